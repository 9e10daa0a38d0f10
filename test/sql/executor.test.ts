/**
 * query_db's database path against the real PostgreSQL on 127.0.0.1, as a dedicated low-privilege
 * role: masking survives aliases, expressions and JSON aggregation; caps; types; session reset;
 * safe errors; the DSN password never comes back.
 */
import test from 'ava';
import { inspect } from 'node:util';
import pg from 'pg';
import { createFixture, LIMITS, type Fixture } from './fixture.ts';
import { DatabasePool } from '../../src/sql/pool.ts';
import { executeUnguarded, runReadOnlyQuery } from '../../src/sql/executor.ts';
import { CustosError } from '../../src/errors.ts';
import { createLogger, serializeError } from '../../src/log.ts';

let fx: Fixture;
test.before(async () => {
  fx = await createFixture();
});
test.after.always(async () => {
  await fx?.teardown();
});

const col = (r: { columns: { name: string }[]; rows: unknown[][] }, name: string): unknown[] => {
  const i = r.columns.findIndex((c) => c.name === name);
  if (i < 0) throw new Error(`no column ${name}`);
  return r.rows.map((row) => row[i]);
};

test('direct PII columns are masked whole by name and reported', async (t) => {
  const r = await fx.pool.query('SELECT id, name, email, phone, ssn, card, iban, ip, api_key FROM users ORDER BY id', [], LIMITS);
  t.deepEqual(col(r, 'email'), ['[masked]', '[masked]', '[masked]']);
  for (const c of ['phone', 'ssn', 'iban', 'ip', 'api_key']) t.deepEqual(col(r, c), ['[masked]', '[masked]', '[masked]'], c);
  t.deepEqual(col(r, 'name'), ['Jane Roe', 'John Doe', 'Ada Lovelace']);
  t.deepEqual(col(r, 'id'), [1, 2, 3]);
  // `card` is not a sensitive *name*; its values are caught by the Luhn-checked card detector
  t.deepEqual(col(r, 'card'), ['**** **** **** 4242', '**** **** **** 4444', '**** **** **** 5556']);
  t.deepEqual(r.masked.columns.sort(), ['api_key', 'email', 'iban', 'ip', 'phone', 'ssn']);
  t.true(r.masked.values >= 21);
  t.deepEqual(r.columns.map((c) => c.type), ['int4', 'text', 'text', 'text', 'text', 'text', 'text', 'text', 'text']);
});

test('aliases and expressions are masked by value, keeping a hint of shape', async (t) => {
  const r = await fx.pool.query(
    `SELECT lower(email) AS x, upper(email) AS y, email || ' (primary)' AS z, ssn AS s, card AS c, iban AS b, ip AS a,
            api_key AS k, phone AS p, concat('tel ', phone) AS q
       FROM users WHERE id = 1`, [], LIMITS);
  const row = r.rows[0]!;
  t.deepEqual(row, [
    'j***@example.com', 'J***@EXAMPLE.COM', 'j***@example.com (primary)', '***-**-6789', '**** **** **** 4242',
    'DE** **** **** 3000', '192.168.*.*', '[secret]', '+* *** *** **23', 'tel +* *** *** **23',
  ]);
  t.deepEqual(r.masked.columns, []);
  const text = JSON.stringify(r.rows);
  for (const leaked of ['jane.roe', '6789-', '4242 4242 4242', '0130', '10.20', 'sk_live_', '555 0123']) t.false(text.includes(leaked), leaked);
});

test('row_to_json and json_agg: JSON keys masked by name, nested values by value', async (t) => {
  const r = await fx.pool.query('SELECT row_to_json(u) AS j FROM users u WHERE id = 1', [], LIMITS);
  const j = r.rows[0]![0] as Record<string, any>;
  t.is(r.columns[0]!.type, 'json');
  t.is(j.name, 'Jane Roe');
  t.is(j.email, '[masked]');
  t.is(j.ssn, '[masked]');
  t.is(j.card, '**** **** **** 4242');
  t.is(j.profile.contact.email, '[masked]');
  t.is(j.profile.password, '[masked]');
  t.is(j.profile.tier, 'gold');
  t.is(j.notes, 'call me at (***) ***-**99');

  const agg = await fx.pool.query('SELECT json_agg(u) AS all_users FROM (SELECT * FROM users ORDER BY id) u', [], LIMITS);
  const all = agg.rows[0]![0] as Record<string, any>[];
  t.is(all.length, 3);
  t.true(all.every((u) => u.email === '[masked]' && u.api_key === '[masked]'));
  t.is(all[1]!.profile.contact.phone, '[masked]');

  // the same JSON as text: keys are still seen (the text is parsed, masked, re-serialised)
  const txt = await fx.pool.query('SELECT row_to_json(u)::text AS t, jsonb_build_object(\'who\', email)::text AS w FROM users u WHERE id = 2', [], LIMITS);
  const parsed = JSON.parse(txt.rows[0]![0] as string) as Record<string, unknown>;
  t.is(parsed.email, '[masked]');
  t.is(parsed.ssn, '[masked]');
  t.is(JSON.parse(txt.rows[0]![1] as string).who, 'j***@example.com');
});

test('string_agg of emails and other aggregates are masked inside the text', async (t) => {
  const r = await fx.pool.query("SELECT string_agg(email, ',' ORDER BY id) AS e, string_agg(ip, ' ' ORDER BY id) AS addrs, array_agg(api_key ORDER BY id)::text AS keys FROM users", [], LIMITS);
  t.deepEqual(r.rows[0], [
    'j***@example.com,j***@example.com,a***@example.net',
    '192.168.*.* 10.0.*.* 2001:db8::*',
    '{[secret],[secret],[secret]}',
  ]);
});

test('per-credential rules: maskColumns masks more, allowColumns exempts names and PII but never secrets or cards', async (t) => {
  const r = await fx.pool.query('SELECT name, email, ip, api_key, card, notes FROM users WHERE id = 1', [], LIMITS, {
    maskColumns: ['name'],
    allowColumns: ['email', 'ip', 'api_key', 'card', 'notes'],
  });
  t.deepEqual(r.rows[0], ['[masked]', 'jane.roe@example.com', '192.168.10.20', '[secret]', '**** **** **** 4242', 'call me at (415) 555-0199']);
  t.deepEqual(r.masked.columns, ['name']);
});

test('parameters go through the extended protocol as values, not SQL', async (t) => {
  const r = await fx.pool.query('SELECT id, name FROM users WHERE name = $1 OR id = $2 ORDER BY id', ["Ada Lovelace' OR '1'='1", 1], LIMITS);
  t.deepEqual(r.rows, [[1, 'Jane Roe']]);
});

test('types: columns carry PostgreSQL type names; numerics and timestamps stay exact text', async (t) => {
  const r = await fx.pool.query('SELECT id, amount, placed_at, true AS flag, 1.5::float8 AS f, 9007199254740993::int8 AS big, NULL::text AS nothing FROM orders ORDER BY id LIMIT 1', [], LIMITS);
  t.deepEqual(r.columns.map((c) => c.type), ['int4', 'numeric', 'timestamptz', 'bool', 'float8', 'int8', 'text']);
  t.deepEqual(r.rows[0], [1, '10.50', '2024-01-15 10:30:00+00', true, 1.5, '9007199254740993', null]);
});

test('row cap: max_rows rows and truncated=true; exactly max_rows rows is not truncated', async (t) => {
  const capped = await fx.pool.query('SELECT id FROM orders ORDER BY id', [], { ...LIMITS, maxRows: 5 });
  t.is(capped.rowCount, 5);
  t.true(capped.truncated);
  t.is(capped.truncatedBy, 'rows');
  const exact = await fx.pool.query('SELECT id FROM orders ORDER BY id', [], { ...LIMITS, maxRows: 12 });
  t.is(exact.rowCount, 12);
  t.false(exact.truncated);
});

test('rows are fetched in batches across portal suspensions without loss', async (t) => {
  const r = await fx.pool.query('SELECT g FROM generate_series(1, 1000) g', [], { ...LIMITS, maxRows: 1000 });
  t.is(r.rowCount, 1000);
  t.false(r.truncated);
  t.deepEqual(r.rows.map((row) => row[0]), Array.from({ length: 1000 }, (_v, i) => i + 1));
});

test('byte cap: stops before the row that would exceed it', async (t) => {
  const r = await fx.pool.query("SELECT repeat('x', 1000) AS filler FROM generate_series(1, 100)", [], { ...LIMITS, maxBytes: 10_500 });
  t.is(r.rowCount, 10);
  t.true(r.truncated);
  t.is(r.truncatedBy, 'bytes');
});

test('EXPLAIN and VALUES run unwrapped', async (t) => {
  const e = await fx.pool.query('EXPLAIN (COSTS OFF) SELECT * FROM users WHERE id = 1', [], LIMITS);
  t.is(e.statementType, 'EXPLAIN');
  t.regex(String(e.rows[0]![0]), /Scan/);
  const v = await fx.pool.query("VALUES (2, 'b'), (1, 'jane@example.com')", [], LIMITS);
  t.is(v.statementType, 'VALUES');
  t.deepEqual(v.rows, [[2, 'b'], [1, 'j***@example.com']]);
});

test('the session is reset after each call: settings, prepared statements and temp state do not carry over', async (t) => {
  const pool = fx.newPool(1);
  // executeUnguarded: the guard would refuse these; this is the database layer's own guarantee
  await executeUnguarded(pool, "SET SESSION search_path = 'pg_catalog'", [], LIMITS);
  await executeUnguarded(pool, 'PREPARE sneaky AS SELECT 1', [], LIMITS);
  await executeUnguarded(pool, 'SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE', [], LIMITS);
  const after = await pool.query("SELECT current_setting('search_path') AS sp, (SELECT count(*) FROM pg_prepared_statements) AS prepared, current_setting('transaction_read_only') AS ro", [], LIMITS);
  t.deepEqual(after.rows[0], ['"$user", public', '0', 'on']);
  t.is(pool.stats.total, 1, 'same single connection was reused');
});

test('database errors come back as SQLSTATE plus a safe message without data values', async (t) => {
  const missing = await t.throwsAsync(fx.pool.query('SELECT * FROM nope', [], LIMITS));
  t.is((missing as CustosError).code, 'CUSTOS_ERR_DATABASE');
  t.is(missing!.message, 'database error 42P01: relation "nope" does not exist (at character 15)');
  // a data error would quote the value; the value (an email) must not come back
  const cast = await t.throwsAsync(fx.pool.query('SELECT email::int FROM users', [], LIMITS));
  t.is((cast as CustosError).code, 'CUSTOS_ERR_DATABASE');
  t.true(cast!.message.startsWith('database error 22P02: invalid input syntax for type integer'));
  t.false(cast!.message.includes('example.com'));
  // error-based exfiltration of a name-masked column (no recognisable shape) is cut too
  const pw = await t.throwsAsync(fx.pool.query("SELECT (profile->>'password')::int FROM users WHERE id = 1", [], LIMITS));
  t.false(pw!.message.includes('hunter2'));
  t.is(fx.pool.stats.waiting, 0);
});

test('runReadOnlyQuery accepts a connection string and a plain pg.Pool, and guards first', async (t) => {
  const viaString = await runReadOnlyQuery({ connectionString: fx.dsn }, 'SELECT count(*)::int AS n FROM users', [], LIMITS);
  t.deepEqual(viaString.rows, [[3]]);
  const plain = new pg.Pool({ connectionString: fx.dsn, max: 1 });
  try {
    const viaPool = await runReadOnlyQuery(plain, 'SELECT email FROM users WHERE id = 1', [], LIMITS);
    t.deepEqual(viaPool.rows, [['jane.roe@example.com']], 'runReadOnlyQuery itself does not mask: DatabasePool.query does');
    await t.throwsAsync(runReadOnlyQuery(plain, 'DELETE FROM users', [], LIMITS), { code: 'CUSTOS_ERR_SQL_REFUSED' });
  } finally {
    await plain.end();
  }
});

test('bad params and limits are refused before any connection', async (t) => {
  const pool = new DatabasePool('postgres://u:p@127.0.0.1:1/db', { poolSize: 1, connectTimeoutMs: 500 });
  try {
    await t.throwsAsync(pool.query('SELECT $1', [{ a: 1 }], LIMITS), { code: 'CUSTOS_ERR_VALIDATION' });
    await t.throwsAsync(pool.query('SELECT $1', [Number.NaN], LIMITS), { code: 'CUSTOS_ERR_VALIDATION' });
    await t.throwsAsync(pool.query('SELECT 1', [], { ...LIMITS, maxRows: 0 }), { code: 'CUSTOS_ERR_VALIDATION' });
    t.is(pool.stats.total, 0);
  } finally {
    await pool.close();
  }
});

test('the DSN password (marker) never appears in results, errors or logs', async (t) => {
  const { marker } = fx;
  const lines: string[] = [];
  const log = createLogger({ level: 'debug', destination: { write: (l: string) => void lines.push(l) } });
  const seen: string[] = [];
  const record = (v: unknown): void => {
    seen.push(typeof v === 'string' ? v : JSON.stringify(v) ?? String(v));
    if (v instanceof Error) {
      seen.push(v.message, String(v), inspect(v, { depth: 10 }));
      if (v instanceof CustosError) seen.push(JSON.stringify(v.toJSON()));
      log.error({ err: serializeError(v) }, 'query_db failed');
    }
  };
  const attempt = async (p: Promise<unknown>): Promise<void> => {
    try {
      record(await p);
    } catch (err) {
      record(err);
    }
  };
  const base = new URL(fx.dsn);
  const dsnWith = (mut: (u: URL) => void): string => {
    const u = new URL(base.toString());
    mut(u);
    return u.toString();
  };
  const pools: DatabasePool[] = [];
  const poolFor = (dsn: string): DatabasePool => {
    const p = new DatabasePool(dsn, { poolSize: 1, connectTimeoutMs: 1500 });
    pools.push(p);
    return p;
  };
  try {
    // successful query, query errors, and a value that would echo the marker back from the server
    await attempt(fx.pool.query('SELECT current_user, current_database(), inet_server_port()', [], LIMITS));
    await attempt(fx.pool.query('SELECT * FROM missing_table', [], LIMITS));
    await attempt(fx.pool.query('SELECT $1::int', [marker], LIMITS));
    await attempt(fx.pool.query(`SELECT '${marker}'::int`, [], LIMITS));
    // connection refused, unknown role (the trust-auth equivalent of an auth failure), unknown database
    await attempt(poolFor(dsnWith((u) => { u.port = '1'; })).query('SELECT 1', [], LIMITS));
    await attempt(poolFor(dsnWith((u) => { u.username = 'no_such_role_x'; })).query('SELECT 1', [], LIMITS));
    await attempt(poolFor(dsnWith((u) => { u.pathname = '/no_such_db_x'; })).query('SELECT 1', [], LIMITS));
    await attempt(poolFor(dsnWith((u) => { u.hostname = 'no-such-host.invalid'; })).query('SELECT 1', [], LIMITS));
    // malformed DSNs carrying the marker
    for (const bad of [
      `mysql://u:${marker}@127.0.0.1/db`, `postgres://u:${marker}@127.0.0.1:99999/db`,
      `postgres://u:${marker}@127.0.0.1/db?options=-c%20x`, `postgres://u:${marker}@127.0.0.1`, `postgres://:${marker}@h/db`,
    ]) {
      await attempt(Promise.resolve().then(() => new DatabasePool(bad, { poolSize: 1, connectTimeoutMs: 500 })));
    }
  } finally {
    for (const p of pools) await p.close();
  }
  t.true(seen.length >= 14);
  t.true(seen.some((s) => s.includes('could not connect') || s.includes('connection refused')));
  t.true(seen.some((s) => s.includes('authentication failed')));
  t.true(seen.some((s) => s.includes('does not exist')));
  for (const s of [...seen, lines.join('')]) t.false(s.includes(marker), s.slice(0, 200));
});

test('connect failures are CUSTOS_ERR_DATABASE with fixed text and leave no connection behind', async (t) => {
  const pool = new DatabasePool('postgres://u:secretpw@127.0.0.1:1/db', { poolSize: 1, connectTimeoutMs: 1000 });
  try {
    const err = await t.throwsAsync(pool.query('SELECT 1', [], LIMITS));
    t.is((err as CustosError).code, 'CUSTOS_ERR_DATABASE');
    t.is(err!.message, 'Database unavailable: could not connect to the database server (connection refused).');
    t.is(pool.stats.total, 0);
  } finally {
    await pool.close();
  }
  await t.throwsAsync(pool.query('SELECT 1', [], LIMITS), { code: 'CUSTOS_ERR_UNAVAILABLE' });
});
