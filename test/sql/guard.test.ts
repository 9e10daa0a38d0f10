/** The read-only guard in isolation: what it admits, what it refuses and how it says so. */
import test from 'ava';
import { assertReadOnlySql, isDeniedFunction, MAX_SQL_LENGTH } from '../../src/sql/guard.ts';
import { lex } from '../../src/sql/lexer.ts';
import { CustosError } from '../../src/errors.ts';

const admitted: [string, string][] = [
  ['SELECT 1', 'SELECT'],
  ['select 1;', 'SELECT'],
  ['  -- leading comment\n/* block */ SELECT id, name FROM users WHERE id = $1', 'SELECT'],
  ['WITH a AS (SELECT 1 AS x) SELECT x FROM a', 'SELECT'],
  ['WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r', 'SELECT'],
  ['(SELECT 1) UNION (SELECT 2)', 'SELECT'],
  ['SELECT 1 UNION ALL SELECT 2 EXCEPT SELECT 3', 'SELECT'],
  ["SELECT u.id, count(o.id) FROM users u LEFT JOIN orders o ON o.user_id = u.id GROUP BY u.id HAVING count(o.id) > 1", 'SELECT'],
  ["SELECT row_to_json(u), string_agg(email, ',') FROM users u GROUP BY u.id", 'SELECT'],
  ["SELECT data->>'k', data @> '{}'::jsonb FROM t WHERE created_at > now() - interval '7 days'", 'SELECT'],
  ['SELECT a, row_number() OVER (PARTITION BY b ORDER BY c) FROM t', 'SELECT'],
  ['SELECT * FROM generate_series(1, 10) g', 'SELECT'],
  ['SELECT pg_sleep(1)', 'SELECT'],
  ["SELECT $$; DELETE FROM t; $$ AS harmless_text", 'SELECT'],
  ["SELECT 'a;b', E'it\\'s'", 'SELECT'],
  ['SELECT 1 -- ; DELETE FROM t', 'SELECT'],
  ['VALUES (1, 2), (3, 4)', 'VALUES'],
  ['EXPLAIN SELECT * FROM t', 'EXPLAIN'],
  ['EXPLAIN VERBOSE SELECT 1', 'EXPLAIN'],
  ['EXPLAIN (FORMAT JSON, COSTS OFF, BUFFERS false) SELECT * FROM t', 'EXPLAIN'],
];

for (const [sql, type] of admitted) {
  test(`admits ${type}: ${sql.replace(/\s+/g, ' ').slice(0, 60)}`, (t) => {
    t.deepEqual(assertReadOnlySql(sql), { statementType: type });
  });
}

const refused: [string, RegExp][] = [
  ['DELETE FROM users', /refused a DELETE statement/],
  ['INSERT INTO t VALUES (1)', /refused an INSERT statement/],
  ['UPDATE t SET a = 1', /refused an UPDATE statement/],
  ['MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE', /refused a MERGE statement/],
  ['TRUNCATE t', /refused a TRUNCATE statement/],
  ['DROP TABLE t', /refused a DROP statement/],
  ['CREATE TABLE t (a int)', /refused a CREATE statement/],
  ['ALTER TABLE t ADD b int', /refused an ALTER statement/],
  ['GRANT SELECT ON t TO PUBLIC', /refused a GRANT statement/],
  ['COPY t TO STDOUT', /refused a COPY statement/],
  ['DO $$ BEGIN END $$', /refused a DO statement/],
  ['CALL p()', /refused a CALL statement/],
  ['SET search_path = x', /refused a SET statement/],
  ['TABLE users', /refused a TABLE statement/],
  ['SELECT 1; SELECT 2', /exactly one statement.*2 statements \(SELECT, SELECT\)/],
  ['COMMIT; DELETE FROM t', /2 statements \(COMMIT, DELETE\)/],
  ["SELECT E'\\''; DELETE FROM t; --'", /2 statements \(SELECT, DELETE\)/],
  ["SELECT '\\'; DELETE FROM t; --'", /2 statements/],
  ['SELECT $a$ $$ ; $a$; DELETE FROM t', /2 statements/],
  ['WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d', /could not verify this WITH statement/],
  ["WITH u AS (UPDATE t SET a = 1 RETURNING *) SELECT * FROM u", /UPDATE/],
  ['SELECT * INTO t2 FROM t', /INTO/],
  ['SELECT * FROM t FOR UPDATE', /row-locking/],
  ['SELECT * FROM t FOR NO KEY UPDATE', /row-locking/],
  ['SELECT * FROM t FOR SHARE', /row-locking/],
  ['EXPLAIN ANALYZE SELECT 1', /EXPLAIN ANALYZE/],
  ['EXPLAIN ANALYSE SELECT 1', /EXPLAIN ANALYZE/],
  ['EXPLAIN VERBOSE ANALYZE SELECT 1', /EXPLAIN ANALYZE/],
  ['EXPLAIN (ANALYZE) SELECT 1', /EXPLAIN ANALYZE/],
  ['EXPLAIN (FORMAT JSON, ANALYZE false) SELECT 1', /EXPLAIN ANALYZE/],
  ['EXPLAIN /* c */ ANALYZE DELETE FROM t', /EXPLAIN ANALYZE/],
  ['EXPLAIN DELETE FROM t', /refused a DELETE statement/],
  ['EXPLAIN EXPLAIN SELECT 1', /nested EXPLAIN/],
  ['EXPLAIN (WHATEVER) SELECT 1', /does not recognise/],
  ["SELECT set_config('transaction_read_only', 'off', false)", /set_config\(\)/],
  ['SELECT pg_catalog."SET_CONFIG"(\'a\', \'b\', false)', /set_config\(\)/],
  ["SELECT nextval('s')", /nextval\(\)/],
  ["SELECT (SELECT setval('s', 1))", /setval\(\)/],
  ['SELECT x FROM t WHERE EXISTS (SELECT pg_advisory_lock(1))', /pg_advisory_lock\(\)/],
  ['SELECT pg_try_advisory_xact_lock(1)', /pg_try_advisory_xact_lock\(\)/],
  ["SELECT lo_import('/etc/passwd')", /lo_import\(\)/],
  ["SELECT lo_export(1, '/tmp/x')", /lo_export\(\)/],
  ['SELECT pg_terminate_backend(1)', /pg_terminate_backend\(\)/],
  ['SELECT pg_cancel_backend(1)', /pg_cancel_backend\(\)/],
  ['SELECT pg_reload_conf()', /pg_reload_conf\(\)/],
  ["SELECT pg_read_file('/etc/passwd')", /pg_read_file\(\)/],
  ["SELECT pg_read_binary_file('/etc/passwd')", /pg_read_binary_file\(\)/],
  ["SELECT pg_ls_dir('.')", /pg_ls_dir\(\)/],
  ["SELECT * FROM dblink('host=x', 'select 1') AS t(a int)", /dblink\(\)/],
  ["SELECT dblink_exec('DELETE FROM t')", /dblink_exec\(\)/],
  ["SELECT query_to_xml('DELETE FROM t', true, false, '')", /query_to_xml\(\)/],
  ["SELECT pg_notify('c', 'x')", /pg_notify\(\)/],
  ['SELECT txid_current()', /txid_current\(\)/],
  ['SELECT /* hidden */ nextval /* x */ (\'s\')', /nextval\(\)|could not verify/],
  ['', /empty/],
  ['   ;  ', /empty/],
  ['-- only a comment', /empty/],
  ['/* unterminated', /unterminated comment/],
  ["SELECT 'unterminated", /unterminated string/],
  ['SELECT $$ unterminated', /unterminated dollar-quoted/],
  ['SELECT "unterminated', /unterminated quoted identifier/],
  ['SELEC 1', /refused a SELEC statement/],
  ['SELECT FROM WHERE', /could not verify this SELECT statement/],
  ['SELECT 1\u0000', /NUL/],
];

for (const [sql, message] of refused) {
  test(`refuses: ${JSON.stringify(sql).slice(0, 70)}`, (t) => {
    const err = t.throws(() => assertReadOnlySql(sql));
    t.true(err instanceof CustosError);
    t.is((err as CustosError).code, 'CUSTOS_ERR_SQL_REFUSED');
    t.true(err!.message.startsWith('query_db runs read-only queries only: '), err!.message);
    t.regex(err!.message, message);
  });
}

test('refuses SQL longer than the cap', (t) => {
  t.throws(() => assertReadOnlySql(`SELECT ${'1 + '.repeat(MAX_SQL_LENGTH / 4)}1`), { message: /longer than/ });
});

test('refuses non-string input', (t) => {
  t.throws(() => assertReadOnlySql(42 as unknown as string), { message: /must be text/ });
});

test('denied-function matching is case-insensitive and covers prefixes', (t) => {
  for (const name of ['SET_CONFIG', 'pg_advisory_unlock_all', 'pg_try_advisory_lock_shared', 'lo_unlink', 'dblink_connect', 'pg_ls_waldir', 'pg_stat_reset', 'pg_create_logical_replication_slot']) {
    t.true(isDeniedFunction(name), name);
  }
  for (const name of ['lower', 'count', 'pg_sleep', 'row_to_json', 'string_agg', 'current_setting', 'pg_typeof', 'logical']) {
    t.false(isDeniedFunction(name), name);
  }
});

test('the lexer follows PostgreSQL: nested comments, E-strings, dollar tags, quoted identifiers', (t) => {
  const words = (sql: string): string[] => lex(sql).map((tok) => `${tok.type}:${tok.value}`);
  t.deepEqual(words('SELECT /* a /* b */ c */ 1'), ['word:select', 'number:1']);
  t.deepEqual(words("E'\\''"), ["string:E'\\''"]);
  t.deepEqual(words("'it''s'"), ["string:'it''s'"]);
  t.deepEqual(words('$t$ x $$ y $t$ z'), ['string:$t$ x $$ y $t$', 'word:z']);
  t.deepEqual(words('"Weird""Name"($1)'), ['qident:weird"name', 'punct:(', 'param:$1', 'punct:)']);
  t.deepEqual(words('a--c\nb'), ['word:a', 'word:b']);
});
