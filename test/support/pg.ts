/**
 * Real PostgreSQL for tests: the local server on 127.0.0.1:5432 (trust auth, user postgres; see
 * PLATFORM.md). Each test file creates its own uniquely named database and drops it afterwards.
 * If PostgreSQL is not reachable the helper throws a clear error, so the tests FAIL (in CI and
 * outside it): query_db's guarantees are about a real server and cannot be faked.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

export const PG_ADMIN_URL = process.env.CUSTOS_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  /** superuser URL for this database (fixtures, checks) */
  url: string;
  name: string;
  /** Runs SQL as the superuser in this database. */
  admin(sql: string, params?: unknown[]): Promise<pg.QueryResult>;
  drop(): Promise<void>;
}

function urlFor(database: string, user = 'postgres', password?: string): string {
  const u = new URL(PG_ADMIN_URL);
  u.pathname = `/${database}`;
  u.username = user;
  if (password !== undefined) u.password = password;
  return u.toString();
}

async function adminClient(database = new URL(PG_ADMIN_URL).pathname.slice(1) || 'postgres'): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: urlFor(database), connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
  } catch (err) {
    const code = (err as { code?: string }).code ?? 'unknown';
    throw new Error(
      `PostgreSQL is required for these tests and is not reachable at 127.0.0.1:5432 (${code}). ` +
        'Start it with `pg_ctlcluster 15 main start`' + (process.env.CI === 'true' ? ' (CI: this is a failure, not a skip).' : '.'),
    );
  }
  client.on('error', () => undefined);
  return client;
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
}

export async function createTestDatabase(prefix = 'custos_t'): Promise<TestDatabase> {
  const name = uniqueName(prefix);
  const root = await adminClient();
  try {
    await root.query(`CREATE DATABASE "${name}"`);
  } finally {
    await root.end();
  }
  const db = await adminClient(name);
  let dropped = false;
  return {
    url: urlFor(name),
    name,
    admin: (sql, params) => db.query(sql, params as unknown[] | undefined),
    async drop() {
      if (dropped) return;
      dropped = true;
      await db.end().catch(() => undefined);
      const r = await adminClient();
      try {
        await r.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await r.end();
      }
    },
  };
}

/** A DSN for `role` on `database` (trust auth accepts any password; the password is a marker). */
export function roleDsn(database: string, role: string, password: string): string {
  return urlFor(database, role, password);
}

/** Drops a cluster-wide role created for a test (after its database is gone). */
export async function dropRole(role: string): Promise<void> {
  const r = await adminClient();
  try {
    await r.query(`DROP ROLE IF EXISTS "${role}"`);
  } finally {
    await r.end();
  }
}
