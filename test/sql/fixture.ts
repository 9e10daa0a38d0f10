/**
 * The query_db fixture: a fresh database with users/orders tables holding PII, a procedure that
 * writes (for CALL), and a dedicated low-privilege role created by readonlyRoleSql, which is what
 * query_db connects as. Tests plant a marker password in the role's DSN.
 */
import { randomBytes } from 'node:crypto';
import { createTestDatabase, dropRole, roleDsn, uniqueName, type TestDatabase } from '../support/pg.ts';
import { readonlyRoleSql } from '../../src/sql/readonly-role.ts';
import { DatabasePool } from '../../src/sql/pool.ts';
import type { QueryLimits } from '../../src/sql/executor.ts';

export const FIXTURE_SQL = `
CREATE TABLE users (
  id serial PRIMARY KEY,
  name text NOT NULL,
  email text NOT NULL,
  phone text,
  ssn text,
  card text,
  iban text,
  ip text,
  api_key text,
  notes text,
  profile jsonb
);
CREATE TABLE orders (
  id serial PRIMARY KEY,
  user_id int NOT NULL REFERENCES users(id),
  amount numeric(10,2) NOT NULL,
  placed_at timestamptz NOT NULL DEFAULT '2024-01-15 10:30:00+00'
);
INSERT INTO users (name, email, phone, ssn, card, iban, ip, api_key, notes, profile) VALUES
  ('Jane Roe', 'jane.roe@example.com', '+1 415 555 0123', '123-45-6789', '4242 4242 4242 4242',
   'DE89 3704 0044 0532 0130 00', '192.168.10.20', 'sk_live_51HxYzAbCdEfGhIjKlMn', 'call me at (415) 555-0199',
   '{"contact": {"email": "jane.home@example.org"}, "tier": "gold", "password": "hunter2"}'),
  ('John Doe', 'john.doe@example.com', '+44 20 7946 0958', '078-05-1120', '5555-5555-5555-4444',
   'GB82 WEST 1234 5698 7654 32', '10.0.0.7', 'ghp_abcdefghijklmnopqrstuvwxyz0123456789', 'VIP since 2019',
   '{"contact": {"phone": "+33 6 12 34 56 78"}, "tier": "silver"}'),
  ('Ada Lovelace', 'ada@example.net', '(212) 555-0147', '219-09-9999', '4000 0566 5566 5556',
   'FR14 2004 1010 0505 0001 3M02 606', '2001:db8:85a3::8a2e:370:7334', 'AKIAIOSFODNN7EXAMPLE', 'prefers email',
   '{"tier": "bronze"}');
INSERT INTO orders (user_id, amount) SELECT (g % 3) + 1, g * 10.5 FROM generate_series(1, 12) g;
CREATE PROCEDURE purge_users() LANGUAGE sql AS $$ DELETE FROM orders; DELETE FROM users; $$;
`;

export const LIMITS: QueryLimits = { maxRows: 1000, maxBytes: 4 * 1024 * 1024, statementTimeoutMs: 5000, connectTimeoutMs: 3000 };

export interface Fixture {
  db: TestDatabase;
  role: string;
  marker: string;
  dsn: string;
  pool: DatabasePool;
  /** A new pool for the role (caller closes it). */
  newPool(size?: number): DatabasePool;
  /** Everything a write could change: row counts and checksums, the sequence, relations, ACLs, large objects. */
  snapshot(): Promise<string>;
  teardown(): Promise<void>;
}

export async function createFixture(): Promise<Fixture> {
  const db = await createTestDatabase('custos_qdb');
  const role = uniqueName('custos_ro');
  const marker = `MARKER-${randomBytes(9).toString('hex')}`;
  try {
    await db.admin(FIXTURE_SQL);
    await db.admin(readonlyRoleSql({ role, database: db.name }));
  } catch (err) {
    await db.drop();
    await dropRole(role);
    throw err;
  }
  const dsn = roleDsn(db.name, role, marker);
  const pools: DatabasePool[] = [];
  const newPool = (size = 2): DatabasePool => {
    const p = new DatabasePool(dsn, { poolSize: size, connectTimeoutMs: 3000 });
    pools.push(p);
    return p;
  };
  const pool = newPool(2);
  return {
    db,
    role,
    marker,
    dsn,
    pool,
    newPool,
    async snapshot() {
      const r = await db.admin(`
        SELECT
          (SELECT count(*) || ':' || md5(coalesce(string_agg(u::text, '|' ORDER BY id), '')) FROM users u) AS users,
          (SELECT count(*) || ':' || md5(coalesce(string_agg(o::text, '|' ORDER BY id), '')) FROM orders o) AS orders,
          (SELECT last_value || ':' || is_called FROM users_id_seq) AS seq,
          (SELECT string_agg(relname || '=' || coalesce(relacl::text, ''), ',' ORDER BY relname)
             FROM pg_class WHERE relnamespace = 'public'::regnamespace) AS relations,
          (SELECT count(*) FROM pg_largeobject_metadata) AS large_objects,
          (SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace) AS functions`);
      return JSON.stringify(r.rows[0]);
    },
    async teardown() {
      for (const p of pools) await p.close();
      await db.drop();
      await dropRole(role);
    },
  };
}
