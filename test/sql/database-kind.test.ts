/** The `database` credential kind: DSN validation at save time, derived config, Querier wiring, role SQL. */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { databaseKind, isQuerier, effectiveMaxRows } from '../../src/kinds/database/index.ts';
import { KINDS } from '../../src/kinds/registry.ts';
import { parseDsn } from '../../src/sql/dsn.ts';
import { readonlyRoleSql } from '../../src/sql/readonly-role.ts';
import { CustosError } from '../../src/errors.ts';
import { createFixture, LIMITS } from './fixture.ts';

const marker = (): string => `MARKER-${randomBytes(6).toString('hex')}`;

test('valid DSNs parse; a missing port means 5432; postgresql:// and percent-encoding are accepted', (t) => {
  const p = parseDsn(Buffer.from('postgres://app:s3cr%40t@db.example.com:6543/prod?sslmode=verify-full&application_name=custos'));
  t.deepEqual({ ...p, password: p.password.toString() }, {
    host: 'db.example.com', port: 6543, database: 'prod', user: 'app', password: 's3cr@t', sslmode: 'verify-full', applicationName: 'custos',
  });
  const q = parseDsn('postgresql://u:p@[::1]/d');
  t.is(q.port, 5432);
  t.is(q.host, '::1');
});

const malformed: [string, (m: string) => string, RegExp][] = [
  ['a non-postgres scheme', (m) => `mysql://u:${m}@h:5432/d`, /must start with postgres:\/\//],
  ['no user', (m) => `postgres://:${m}@h:5432/d`, /user name is missing/],
  ['no password', () => 'postgres://u@h:5432/d', /password is missing/],
  ['no host', (m) => `postgres://u:${m}@:5432/d`, /not a URL|host is missing/],
  ['a bad port', (m) => `postgres://u:${m}@h:99999/d`, /not a URL|port/],
  ['no database', (m) => `postgres://u:${m}@h:5432`, /database name is missing/],
  ['a nested path', (m) => `postgres://u:${m}@h:5432/a/b`, /single path segment/],
  ['options= (server settings injection)', (m) => `postgres://u:${m}@h/d?options=-c%20default_transaction_read_only%3Doff`, /parameter "options" is not supported/],
  ['a host= override', (m) => `postgres://u:${m}@h/d?host=/tmp`, /parameter "host" is not supported/],
  ['a bad sslmode', (m) => `postgres://u:${m}@h/d?sslmode=maybe`, /sslmode must be one of/],
  ['whitespace', (m) => `postgres://u:${m}@h/d `, /whitespace/],
  ['a fragment', (m) => `postgres://u:${m}@h/d#x`, /fragment/],
  ['a malformed percent-encoding', (m) => `postgres://u:${m}%zz@h/d`, /not a URL|percent-encoding/],
  ['an empty string', () => '', /empty/],
];

for (const [what, make, message] of malformed) {
  test(`refuses a DSN with ${what}, without echoing it`, (t) => {
    const m = marker();
    const dsn = make(m);
    const err = t.throws(() => parseDsn(dsn));
    t.true(err instanceof CustosError);
    t.is((err as CustosError).code, 'CUSTOS_ERR_VALIDATION');
    t.regex(err!.message, message);
    t.false(err!.message.includes(m));
    t.false(/@h[:/]/.test(err!.message), 'no part of the DSN is echoed');
    // and through the kind's secretSchema, as the API edge validates it
    const parsed = databaseKind.secretSchema.safeParse({ dsn });
    t.false(parsed.success);
    t.false(JSON.stringify(parsed.error?.issues ?? []).includes(m));
  });
}

test('the kind is registered, is a Querier, and derives host/port/database/user but never the password', (t) => {
  t.is(KINDS.database, databaseKind);
  t.true(isQuerier(databaseKind));
  t.deepEqual(databaseKind.secretFields, ['dsn']);
  const m = marker();
  t.true(databaseKind.secretSchema.safeParse({ dsn: `postgres://reader:${m}@db:5432/shop` }).success);
  t.false(databaseKind.secretSchema.safeParse({ dsn: `postgres://reader:${m}@db:5432/shop`, extra: 'x' }).success);
  const secret = { dsn: Buffer.from(`postgres://reader:${m}@db/shop`) };
  const config = databaseKind.deriveConfig!(secret, databaseKind.configSchema.parse({ maskColumns: ['nickname'], host: 'spoofed' }));
  t.deepEqual(config, { host: 'db', port: 5432, database: 'shop', user: 'reader', maskColumns: ['nickname'] });
  const view = databaseKind.describe(config);
  t.deepEqual(view, { authScheme: 'database', host: 'db', port: 5432, database: 'shop', user: 'reader', maskColumns: ['nickname'] });
  t.false(JSON.stringify([config, view]).includes(m));
  t.is(secret.dsn.toString(), `postgres://reader:${m}@db/shop`, 'the actor owns (and zeroes) the input buffer');
});

test('configSchema refuses unknown keys and bad rule lists', (t) => {
  t.false(databaseKind.configSchema.safeParse({ password: 'x' }).success);
  t.false(databaseKind.configSchema.safeParse({ maskColumns: 'email' }).success);
  t.false(databaseKind.configSchema.safeParse({ allowColumns: [''] }).success);
  t.true(databaseKind.configSchema.safeParse({ allowColumns: ['email'] }).success);
});

test('max_rows is bounded by the server cap', (t) => {
  t.is(effectiveMaxRows(undefined, 1000), 1000);
  t.is(effectiveMaxRows(10, 1000), 10);
  t.is(effectiveMaxRows(5000, 1000), 1000);
  t.throws(() => effectiveMaxRows(0, 1000), { code: 'CUSTOS_ERR_VALIDATION' } as never);
  t.throws(() => effectiveMaxRows(1.5, 1000), { code: 'CUSTOS_ERR_VALIDATION' } as never);
});

test('Querier end to end: createPool from the secret, query with the credential rules, close', async (t) => {
  const fx = await createFixture();
  try {
    const secret = { dsn: Buffer.from(fx.dsn) };
    const config = databaseKind.deriveConfig!(secret, { allowColumns: ['name'], maskColumns: ['amount'] });
    const pool = databaseKind.createPool(secret, config, { poolSize: 2, connectTimeoutMs: 3000 });
    secret.dsn.fill(0); // the actor zeroes its Buffer right after; the pool kept its own copy
    try {
      const r = await databaseKind.query(pool, { sql: 'SELECT u.name, u.email, o.amount FROM users u JOIN orders o ON o.user_id = u.id ORDER BY o.id', maxRows: 2 }, config, LIMITS);
      t.is(r.rowCount, 2);
      t.true(r.truncated);
      t.deepEqual(r.rows[0], ['John Doe', '[masked]', '[masked]']);
      t.deepEqual(r.masked.columns, ['email', 'amount']);
      await t.throwsAsync(databaseKind.query(pool, { sql: 'DELETE FROM users' }, config, LIMITS), { code: 'CUSTOS_ERR_SQL_REFUSED' });
    } finally {
      await pool.close();
    }
    t.true(pool.closed);
    await t.throwsAsync(databaseKind.query(pool, { sql: 'SELECT 1' }, config, LIMITS), { code: 'CUSTOS_ERR_UNAVAILABLE' });
  } finally {
    await fx.teardown();
  }
});

test('readonlyRoleSql: a locked-down role with read grants, default read-only, no password', (t) => {
  const sql = readonlyRoleSql({ role: 'custos_ro', database: 'shop', schemas: ['public', 'sales'], tableOwner: 'app' });
  t.regex(sql, /CREATE ROLE "custos_ro" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT 10;/);
  t.regex(sql, /ALTER ROLE "custos_ro" SET default_transaction_read_only = on;/);
  t.regex(sql, /GRANT CONNECT ON DATABASE "shop" TO "custos_ro";/);
  for (const s of ['public', 'sales']) {
    t.true(sql.includes(`GRANT USAGE ON SCHEMA "${s}" TO "custos_ro";`));
    t.true(sql.includes(`GRANT SELECT ON ALL TABLES IN SCHEMA "${s}" TO "custos_ro";`));
    t.true(sql.includes(`ALTER DEFAULT PRIVILEGES FOR ROLE "app" IN SCHEMA "${s}" GRANT SELECT ON TABLES TO "custos_ro";`));
  }
  t.regex(sql, /REVOKE EXECUTE ON FUNCTION pg_catalog\.lo_import\(text\) FROM PUBLIC, "custos_ro";/);
  t.false(/PASSWORD/.test(sql.replace(/\\password/g, '')));
  t.false(/GRANT (INSERT|UPDATE|DELETE|ALL)/.test(sql));
});

test('readonlyRoleSql refuses identifiers that would need escaping (no SQL injection through the helper)', (t) => {
  for (const bad of ['ro"; DROP DATABASE x; --', 'has space', '1starts_with_digit', '', 'x'.repeat(64)]) {
    t.throws(() => readonlyRoleSql({ role: bad, database: 'shop' }), { code: 'CUSTOS_ERR_VALIDATION' } as never);
    t.throws(() => readonlyRoleSql({ role: 'ok', database: bad }), { code: 'CUSTOS_ERR_VALIDATION' } as never);
  }
  t.throws(() => readonlyRoleSql({ role: 'ok', database: 'shop', statementTimeout: "1s'; DROP" }), { code: 'CUSTOS_ERR_VALIDATION' } as never);
});

test('the role created by readonlyRoleSql can read but is read-only by default even outside query_db', async (t) => {
  const fx = await createFixture();
  const pg = (await import('pg')).default;
  const direct = new pg.Client({ connectionString: fx.dsn });
  await direct.connect();
  try {
    t.is((await direct.query('SELECT count(*)::int AS n FROM users')).rows[0].n, 3);
    t.is((await direct.query("SELECT current_setting('default_transaction_read_only') AS v")).rows[0].v, 'on');
    await t.throwsAsync(direct.query('DELETE FROM orders'), { message: /read-only transaction/ });
    await t.throwsAsync(direct.query('BEGIN READ WRITE; DELETE FROM orders'), { message: /permission denied/ });
  } finally {
    await direct.end();
    await fx.teardown();
  }
});
