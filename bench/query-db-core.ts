/**
 * query_db core overhead: a direct `pg` query vs the query_db database path (guard + BEGIN READ
 * ONLY/SET LOCAL + extended-protocol capped fetch + ROLLBACK/DISCARD ALL + PII masking of every
 * value), for 1 row and for 1,000 rows of PII-heavy data, against the local PostgreSQL.
 * Both sides use a pool of the same size, the same role and the same SQL. Prints p50/mean and the
 * ratio. Target: ≤ 1.5× direct for 1,000 rows.
 *
 *   node --import tsx bench/query-db-core.ts [iterations]
 *
 * Not measured here: the MCP/HTTP hop and the actor message (the lead's end-to-end bench).
 */
import pg from 'pg';
import { createTestDatabase, dropRole, roleDsn, uniqueName } from '../test/support/pg.ts';
import { readonlyRoleSql } from '../src/sql/readonly-role.ts';
import { DatabasePool } from '../src/sql/pool.ts';

const ITER = Number(process.argv[2] ?? 200);
const POOL_SIZE = 4;
const LIMITS = { maxRows: 1000, maxBytes: 4 * 1024 * 1024, statementTimeoutMs: 5000, connectTimeoutMs: 5000 };

const db = await createTestDatabase('custos_bench');
const role = uniqueName('custos_bench_ro');
try {
  await db.admin(`
    CREATE TABLE users (id serial PRIMARY KEY, name text, email text, phone text, ssn text, card text, ip text, notes text, profile jsonb);
    INSERT INTO users (name, email, phone, ssn, card, ip, notes, profile)
    SELECT 'User ' || g, 'user' || g || '@example.com', '+1 415 555 ' || lpad((g % 10000)::text, 4, '0'),
           lpad((100 + g % 800)::text, 3, '0') || '-45-' || lpad((g % 10000)::text, 4, '0'),
           '4242 4242 4242 4242', '10.0.' || (g % 256) || '.' || (g % 250 + 1),
           'Customer since ' || (2000 + g % 24) || ', prefers contact by mail at user' || g || '@example.org',
           jsonb_build_object('tier', 'gold', 'contact', jsonb_build_object('email', 'alt' || g || '@example.net'), 'visits', g)
    FROM generate_series(1, 1000) g;`);
  await db.admin(readonlyRoleSql({ role, database: db.name }));
  const dsn = roleDsn(db.name, role, 'bench-password');
  const direct = new pg.Pool({ connectionString: dsn, max: POOL_SIZE });
  const broker = new DatabasePool(dsn, { poolSize: POOL_SIZE, connectTimeoutMs: 5000 });

  const scenarios = [
    { label: '1 row', sql: 'SELECT * FROM users WHERE id = 1' },
    { label: '1,000 rows', sql: 'SELECT * FROM users ORDER BY id' },
  ];

  const time = async (fn: () => Promise<unknown>): Promise<number[]> => {
    for (let i = 0; i < 20; i++) await fn(); // warm-up: connections, JIT
    const out: number[] = [];
    for (let i = 0; i < ITER; i++) {
      const t0 = performance.now();
      await fn();
      out.push(performance.now() - t0);
    }
    return out;
  };
  const stats = (xs: number[]): { p50: number; mean: number } => {
    const s = [...xs].sort((a, b) => a - b);
    return { p50: s[Math.floor(s.length / 2)]!, mean: xs.reduce((a, b) => a + b, 0) / xs.length };
  };
  const f = (n: number): string => `${n.toFixed(3)} ms`;

  console.log(`query_db core bench: ${ITER} iterations each, pool size ${POOL_SIZE}, PostgreSQL on 127.0.0.1`);
  for (const sc of scenarios) {
    // interleave the two sides in rounds so that machine noise hits both alike
    const d: number[] = [];
    const b: number[] = [];
    let sample: Awaited<ReturnType<DatabasePool['query']>> | undefined;
    for (let round = 0; round < 4; round++) {
      d.push(...(await time(() => direct.query(sc.sql))));
      b.push(...(await time(async () => { sample = await broker.query(sc.sql, [], LIMITS); })));
    }
    const ds = stats(d);
    const bs = stats(b);
    console.log(`\n${sc.label}  (${sample?.rowCount} rows, ${sample?.masked.values} values masked, columns masked: ${sample?.masked.columns.join(',')})`);
    console.log(`  direct pg        p50 ${f(ds.p50)}  mean ${f(ds.mean)}`);
    console.log(`  query_db core    p50 ${f(bs.p50)}  mean ${f(bs.mean)}`);
    console.log(`  ratio            p50 ${(bs.p50 / ds.p50).toFixed(2)}x  mean ${(bs.mean / ds.mean).toFixed(2)}x`);
  }
  await direct.end();
  await broker.close();
} finally {
  await db.drop();
  await dropRole(role);
}
