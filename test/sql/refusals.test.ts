/**
 * query_db refusal and bypass cases against the real PostgreSQL, as the low-privilege role.
 *
 * Every case asserts that the data is unchanged afterwards (row counts and checksums of users and
 * orders, the sequence, relations and their ACLs, large objects, functions). Where the parser
 * refuses a write, the case ALSO runs the statement through the database layer alone (the guard
 * bypassed) and shows the database refuses it too: defence in depth, not one line.
 */
import test from 'ava';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createFixture, LIMITS, type Fixture } from './fixture.ts';
import { executeUnguarded } from '../../src/sql/executor.ts';
import { CustosError } from '../../src/errors.ts';

let fx: Fixture;
let baseline: string;
test.before(async () => {
  fx = await createFixture();
  baseline = await fx.snapshot();
});
test.after.always(async () => {
  await fx?.teardown();
});

/** What the database layer alone does with the statement (guard bypassed). */
type DbAlone =
  | 'refuses' // throws a CustosError (read-only transaction, privileges, one-statement Parse…)
  | 'harmless'; // may succeed, but changes nothing (asserted by the snapshot)

interface RefusalCase {
  title: string;
  sql: string;
  dbAlone: DbAlone;
  /** substring the guard's message must contain (names the statement type or the reason) */
  says?: string;
}

const cases: RefusalCase[] = [
  { title: 'INSERT', sql: "INSERT INTO users (name, email) VALUES ('x', 'x@example.com')", dbAlone: 'refuses', says: 'INSERT' },
  { title: 'UPDATE', sql: "UPDATE users SET email = 'pwned@example.com'", dbAlone: 'refuses', says: 'UPDATE' },
  { title: 'DELETE', sql: 'DELETE FROM orders', dbAlone: 'refuses', says: 'DELETE' },
  { title: 'MERGE', sql: 'MERGE INTO orders o USING users u ON o.user_id = u.id WHEN MATCHED THEN DELETE', dbAlone: 'refuses', says: 'MERGE' },
  { title: 'TRUNCATE', sql: 'TRUNCATE orders', dbAlone: 'refuses', says: 'TRUNCATE' },
  { title: 'DROP TABLE', sql: 'DROP TABLE orders', dbAlone: 'refuses', says: 'DROP' },
  { title: 'ALTER TABLE', sql: 'ALTER TABLE users ADD COLUMN pwned int', dbAlone: 'refuses', says: 'ALTER' },
  { title: 'CREATE TABLE', sql: 'CREATE TABLE pwned (a int)', dbAlone: 'refuses', says: 'CREATE' },
  { title: 'CREATE TEMP TABLE AS', sql: 'CREATE TEMP TABLE t AS SELECT * FROM users', dbAlone: 'refuses', says: 'CREATE' },
  { title: 'GRANT', sql: 'GRANT ALL ON users TO PUBLIC', dbAlone: 'refuses', says: 'GRANT' },
  { title: 'writable CTE (DELETE)', sql: 'WITH d AS (DELETE FROM orders RETURNING *) SELECT count(*) FROM d', dbAlone: 'refuses', says: 'WITH' },
  { title: 'writable CTE (UPDATE)', sql: "WITH u AS (UPDATE users SET email = 'x' RETURNING id) SELECT * FROM u", dbAlone: 'refuses', says: 'UPDATE' },
  { title: 'WITH … DELETE as the main statement', sql: 'WITH x AS (SELECT 1) DELETE FROM orders', dbAlone: 'refuses' },
  { title: 'two statements', sql: 'SELECT 1; DELETE FROM orders', dbAlone: 'refuses', says: '2 statements' },
  { title: 'COMMIT; then a write', sql: 'COMMIT; DELETE FROM orders', dbAlone: 'refuses', says: 'COMMIT' },
  { title: 'END; then a write', sql: 'END; DELETE FROM orders', dbAlone: 'refuses', says: 'END' },
  { title: 'ROLLBACK; BEGIN; then a write', sql: 'ROLLBACK; BEGIN; DELETE FROM orders; COMMIT', dbAlone: 'refuses', says: 'ROLLBACK' },
  { title: 'block comment hiding a second statement from naive parsers', sql: 'SELECT 1 /* harmless */; DELETE FROM orders -- */', dbAlone: 'refuses', says: 'DELETE' },
  { title: 'nested comments (PostgreSQL nests them)', sql: 'SELECT 1 /* /* */ ; DELETE FROM orders; /* */ */; DELETE FROM users', dbAlone: 'refuses', says: 'DELETE' },
  { title: 'dollar quoting hiding a statement break', sql: 'SELECT $$ text $$; DELETE FROM orders; SELECT $$ $$', dbAlone: 'refuses', says: 'DELETE' },
  { title: 'tagged dollar quoting', sql: 'SELECT $a$ $$ ; $a$; DELETE FROM orders', dbAlone: 'refuses', says: 'DELETE' },
  { title: "E-string escape: E'\\'' then a statement", sql: "SELECT E'\\''; DELETE FROM orders; --'", dbAlone: 'refuses', says: 'DELETE' },
  { title: 'standard string with a backslash then a statement', sql: "SELECT '\\'; DELETE FROM orders; --'", dbAlone: 'refuses', says: 'DELETE' },
  { title: 'VALUES wrapper escape attempt', sql: 'VALUES (1)) AS v; DELETE FROM orders; SELECT * FROM (VALUES (1)', dbAlone: 'refuses' },
  { title: 'SELECT … INTO', sql: 'SELECT * INTO stolen FROM users', dbAlone: 'refuses', says: 'INTO' },
  { title: 'SELECT … FOR UPDATE', sql: 'SELECT * FROM users FOR UPDATE', dbAlone: 'refuses', says: 'locking' },
  { title: 'DO block', sql: 'DO $$ BEGIN DELETE FROM orders; END $$', dbAlone: 'refuses', says: 'DO' },
  { title: 'DO block switching read-only off first', sql: "DO $$ BEGIN SET transaction_read_only = off; DELETE FROM orders; END $$", dbAlone: 'refuses', says: 'DO' },
  { title: 'CALL a writing procedure', sql: 'CALL purge_users()', dbAlone: 'refuses', says: 'CALL' },
  { title: 'EXPLAIN ANALYZE DELETE', sql: 'EXPLAIN ANALYZE DELETE FROM orders', dbAlone: 'refuses', says: 'ANALYZE' },
  { title: 'EXPLAIN (ANALYZE) with a comment in between', sql: 'EXPLAIN /* x */ (ANALYZE true, FORMAT json) DELETE FROM orders', dbAlone: 'refuses', says: 'ANALYZE' },
  { title: 'EXPLAIN of a write (no ANALYZE) is still not a SELECT', sql: 'EXPLAIN DELETE FROM orders', dbAlone: 'harmless', says: 'DELETE' },
  { title: 'COPY FROM a server file', sql: "COPY users FROM '/etc/passwd'", dbAlone: 'refuses', says: 'COPY' },
  { title: 'COPY TO PROGRAM', sql: "COPY (SELECT 1) TO PROGRAM 'touch /tmp/custos-pwned-$RAND'", dbAlone: 'refuses', says: 'COPY' },
  { title: 'COPY TO STDOUT', sql: 'COPY users TO STDOUT', dbAlone: 'harmless', says: 'COPY' },
  { title: "set_config('transaction_read_only', 'off', false)", sql: "SELECT set_config('transaction_read_only', 'off', false)", dbAlone: 'refuses', says: 'set_config' },
  { title: 'SET transaction_read_only = off', sql: 'SET transaction_read_only = off', dbAlone: 'refuses', says: 'SET' },
  { title: 'nextval', sql: "SELECT nextval('users_id_seq')", dbAlone: 'refuses', says: 'nextval' },
  { title: 'setval', sql: "SELECT setval('users_id_seq', 1000)", dbAlone: 'refuses', says: 'setval' },
  { title: 'nextval hidden in a subquery', sql: "SELECT id, (SELECT nextval('users_id_seq')) FROM users", dbAlone: 'refuses', says: 'nextval' },
  { title: 'schema-qualified, quoted function name', sql: `SELECT pg_catalog."setval"('users_id_seq', 5)`, dbAlone: 'refuses', says: 'setval' },
  { title: 'lo_import', sql: "SELECT lo_import('/etc/passwd')", dbAlone: 'refuses', says: 'lo_import' },
  // PostgreSQL 15 allows creating a large object in a read-only transaction; it is transactional,
  // so the executor's ROLLBACK discards it (the snapshot counts pg_largeobject_metadata)
  { title: 'lo_from_bytea (a large-object write)', sql: "SELECT lo_from_bytea(0, 'pwned')", dbAlone: 'harmless', says: 'lo_from_bytea' },
  { title: 'pg_read_file', sql: "SELECT pg_read_file('/etc/passwd')", dbAlone: 'refuses', says: 'pg_read_file' },
  { title: 'pg_reload_conf', sql: 'SELECT pg_reload_conf()', dbAlone: 'refuses', says: 'pg_reload_conf' },
  { title: 'query_to_xml running hidden SQL', sql: "SELECT query_to_xml('DELETE FROM orders RETURNING 1', true, false, '')", dbAlone: 'refuses', says: 'query_to_xml' },
  { title: 'LOCK TABLE', sql: 'LOCK TABLE users IN ACCESS EXCLUSIVE MODE', dbAlone: 'refuses', says: 'LOCK' },
  { title: 'VACUUM', sql: 'VACUUM users', dbAlone: 'refuses', says: 'VACUUM' },
  { title: 'PREPARE a write', sql: 'PREPARE p AS DELETE FROM orders', dbAlone: 'harmless', says: 'PREPARE' },
  { title: 'unparseable garbage', sql: 'SELEC * FRM users', dbAlone: 'refuses' },
];

for (const c of cases) {
  test.serial(`refused: ${c.title}; data unchanged`, async (t) => {
    const sql = c.sql.replace('$RAND', randomBytes(4).toString('hex'));
    const err = await t.throwsAsync(fx.pool.query(sql, [], LIMITS));
    t.is((err as CustosError).code, 'CUSTOS_ERR_SQL_REFUSED', err?.message);
    if (c.says) t.true(err!.message.includes(c.says), err!.message);

    // defence in depth: the same text straight to the database layer, no parser in front
    try {
      await executeUnguarded(fx.pool, sql, [], LIMITS);
      if (c.dbAlone === 'refuses') t.fail('the database layer alone accepted it');
    } catch (dbErr) {
      t.true(dbErr instanceof CustosError, String(dbErr));
      t.true(['CUSTOS_ERR_SQL_REFUSED', 'CUSTOS_ERR_DATABASE'].includes((dbErr as CustosError).code), (dbErr as Error).message);
    }
    if (sql.includes('TO PROGRAM')) t.false(existsSync(`/tmp/custos-pwned-${sql.split('custos-pwned-')[1]!.slice(0, 8)}`));
    t.is(await fx.snapshot(), baseline);
    await fx.pool.settled();
    t.is(fx.pool.stats.total - fx.pool.stats.idle, 0, 'every connection went back to the pool');
  });
}

test.serial('the database layer alone names the read-only refusal (25006) for a plain write', async (t) => {
  const err = await t.throwsAsync(executeUnguarded(fx.pool, 'DELETE FROM orders', [], LIMITS));
  t.is((err as CustosError).code, 'CUSTOS_ERR_SQL_REFUSED');
  t.regex(err!.message, /25006: cannot execute DELETE in a read-only transaction/);
  t.is(await fx.snapshot(), baseline);
});

test.serial('pg_sleep past a 300 ms timeout: cancelled, connection released, backend no longer running it', async (t) => {
  const pool = fx.newPool(1);
  const tag = `sleep_${randomBytes(4).toString('hex')}`;
  const err = await t.throwsAsync(pool.query(`SELECT pg_sleep(10) AS ${tag}`, [], { ...LIMITS, statementTimeoutMs: 300 }));
  t.is((err as CustosError).code, 'CUSTOS_ERR_QUERY_TIMEOUT');
  t.is(pool.stats.total - pool.stats.idle, 0);
  t.is(pool.stats.waiting, 0);
  t.is(await activeCount(tag), 0);
  // the pool still works afterwards
  const ok = await pool.query('SELECT 1 AS one', [], LIMITS);
  t.deepEqual(ok.rows, [[1]]);
  t.is(await fx.snapshot(), baseline);
});

test.serial('broker-side timer: with the server timeout disabled, the broker cancels the backend and destroys the connection', async (t) => {
  const pool = fx.newPool(1);
  const tag = `sleep_${randomBytes(4).toString('hex')}`;
  const started = Date.now();
  const err = await t.throwsAsync(
    executeUnguarded(pool, `SELECT pg_sleep(20) AS ${tag}`, [], { ...LIMITS, statementTimeoutMs: 300 }, 'SELECT', { serverTimeout: false }),
  );
  t.is((err as CustosError).code, 'CUSTOS_ERR_QUERY_TIMEOUT');
  t.true(Date.now() - started < 15_000, 'returned long before pg_sleep(20) would have');
  t.is(pool.stats.total, 0, 'the connection was destroyed, not pooled');
  t.is(await activeCount(tag), 0, 'the CancelRequest stopped the query on the server');
});

test.serial('pg_advisory_lock: refused; through the database layer alone the lock does not outlive the call', async (t) => {
  const pool = fx.newPool(1);
  await t.throwsAsync(pool.query('SELECT pg_advisory_lock(4242)', [], LIMITS), { code: 'CUSTOS_ERR_SQL_REFUSED' });
  // the database allows advisory locks in read-only transactions; DISCARD ALL must release them
  const r = await executeUnguarded(pool, 'SELECT pg_advisory_lock(4242), pg_try_advisory_lock(4243)', [], LIMITS);
  t.is(r.rowCount, 1);
  await pool.settled(); // the reset runs after the answer; the connection is back only once it is done
  t.is(pool.stats.total, 1, 'the connection was kept (reset, not destroyed)');
  const held = await fx.db.admin("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'");
  t.is(held.rows[0].n, 0);
  t.is(await fx.snapshot(), baseline);
});

test.serial('pg_terminate_backend: refused; the database alone refuses to signal a superuser backend', async (t) => {
  const victim = new pg.Client({ connectionString: fx.db.url });
  await victim.connect();
  try {
    const pid = (await victim.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
    await t.throwsAsync(fx.pool.query(`SELECT pg_terminate_backend(${pid})`, [], LIMITS), { code: 'CUSTOS_ERR_SQL_REFUSED' });
    await t.throwsAsync(fx.pool.query(`SELECT pg_cancel_backend(${pid})`, [], LIMITS), { code: 'CUSTOS_ERR_SQL_REFUSED' });
    const dbErr = await t.throwsAsync(executeUnguarded(fx.pool, `SELECT pg_terminate_backend(${pid})`, [], LIMITS));
    t.is((dbErr as CustosError).code, 'CUSTOS_ERR_DATABASE');
    t.regex(dbErr!.message, /42501/);
    t.deepEqual((await victim.query('SELECT 1 AS ok')).rows, [{ ok: 1 }], 'the victim session is alive');
  } finally {
    await victim.end();
  }
  t.is(await fx.snapshot(), baseline);
});

test.serial('pg_terminate_backend on a same-role session: only the guard stops it (why the guard denies it)', async (t) => {
  const pool = fx.newPool(1);
  const held = await pool.connect();
  try {
    const pid = (await held.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
    const err = await t.throwsAsync(fx.pool.query(`SELECT pg_terminate_backend(${pid})`, [], LIMITS));
    t.is((err as CustosError).code, 'CUSTOS_ERR_SQL_REFUSED');
    t.deepEqual((await held.query('SELECT 1 AS ok')).rows, [{ ok: 1 }]);
  } finally {
    held.release();
  }
});

test.serial('generate_series(1, 1e7): capped by rows, and by bytes, without materialising the result', async (t) => {
  const byRows = await fx.pool.query('SELECT generate_series(1, 10000000) AS g', [], { ...LIMITS, maxRows: 1000 });
  t.is(byRows.rowCount, 1000);
  t.true(byRows.truncated);
  t.is(byRows.truncatedBy, 'rows');
  const byBytes = await fx.pool.query("SELECT repeat('y', 500) || g AS wide FROM generate_series(1, 10000000) AS g", [], { ...LIMITS, maxRows: 1000, maxBytes: 64 * 1024 });
  t.true(byBytes.rowCount < 1000);
  t.true(byBytes.rowCount > 100);
  t.is(byBytes.truncatedBy, 'bytes');
  t.true(JSON.stringify(byBytes.rows).length < 80 * 1024);
  await fx.pool.settled();
  t.is(fx.pool.stats.total - fx.pool.stats.idle, 0);
});

test.serial('a prepared write from one call cannot be executed by the next (session reset)', async (t) => {
  const pool = fx.newPool(1);
  await executeUnguarded(pool, 'PREPARE wipe AS DELETE FROM orders', [], LIMITS);
  const err = await t.throwsAsync(executeUnguarded(pool, 'EXECUTE wipe', [], LIMITS));
  t.regex(err!.message, /26000|does not exist|read-only/);
  t.is(await fx.snapshot(), baseline);
});

test.serial('SET SESSION CHARACTERISTICS … READ WRITE in one call does not make the next call writable', async (t) => {
  const pool = fx.newPool(1);
  await executeUnguarded(pool, 'SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE', [], LIMITS);
  await t.throwsAsync(executeUnguarded(pool, 'DELETE FROM orders', [], LIMITS), { code: 'CUSTOS_ERR_SQL_REFUSED' });
  t.is(await fx.snapshot(), baseline);
});

test.serial('the refusal list covers at least 30 cases', (t) => {
  t.true(cases.length >= 30);
});

async function activeCount(tag: string): Promise<number> {
  // The backend may need a moment to act on the cancel; poll (bounded) rather than assert timing.
  for (let i = 0; i < 50; i++) {
    const r = await fx.db.admin(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE $1 AND state = 'active' AND pid <> pg_backend_pid()",
      [`%${tag}%`],
    );
    if (r.rows[0].n === 0) return 0;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return -1;
}
