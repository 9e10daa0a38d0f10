/**
 * Issue 5 benchmark, one run: a direct `pg` query vs the same query through query_db on /mcp
 * (HTTP + JSON-RPC + token + audit + read-only transaction + masking), for 1 row and for 1,000
 * rows. Sequential requests; p50 and mean; ratio against direct measured in the same run.
 *
 *   node --import tsx bench/query-db.ts [--n 200]
 */
import { parseArgs } from 'node:util';
import pg from 'pg';
import { adminCommand } from '../src/cli/admin.ts';
import { readonlyRoleSql } from '../src/sql/readonly-role.ts';
import { createTestDatabase, dropRole, roleDsn, uniqueName } from '../test/support/pg.ts';
import { pct, person, startCustosProcess } from './support/processes.ts';

const { values } = parseArgs({ options: { n: { type: 'string', default: '200' } } });
const N = Number(values.n);

async function time(fn: () => Promise<unknown>): Promise<{ p50: number; mean: number }> {
  for (let i = 0; i < 20; i++) await fn(); // warm-up
  const xs: number[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await fn();
    xs.push(performance.now() - t0);
  }
  xs.sort((a, b) => a - b);
  return { p50: pct(xs, 50), mean: xs.reduce((a, b) => a + b, 0) / xs.length };
}

const db = await createTestDatabase('custos_bench');
const role = uniqueName('custos_bench_ro');
await db.admin(`CREATE TABLE users (id serial PRIMARY KEY, name text, email text, phone text, city text, score int);
  INSERT INTO users (name, email, phone, city, score)
  SELECT 'user ' || g, 'user' || g || '@example.com', '+1 415 555 ' || lpad((g % 10000)::text, 4, '0'), 'City ' || (g % 50), g % 100
  FROM generate_series(1, 1000) g;`);
await db.admin(readonlyRoleSql({ role, database: db.name }));
const dsn = roleDsn(db.name, role, 'bench-password');
const custos = await startCustosProcess();
try {
  const p = await person(custos.url);
  await adminCommand(['set-plan', p.email, 'pro'], { CUSTOS_DATA_DIR: custos.dataDir });
  await p.post(`/workspaces/${p.workspaceId}/credentials`, { name: 'db', authScheme: 'database', secret: { dsn } });
  const { token } = await p.post('/tokens/agent', { name: 'bench', tools: ['query_db'], methods: ['GET'] });
  const direct = new pg.Pool({ connectionString: dsn, max: 4 });
  const cases: Array<[string, string]> = [
    ['1 row', 'SELECT id, name, email, phone, city, score FROM users WHERE id = 1'],
    ['1,000 rows (email+phone masked)', 'SELECT id, name, email, phone, city, score FROM users ORDER BY id'],
  ];
  console.log(`\nIssue 5 benchmark (${N} sequential queries each; Custos as a separate process, SQLite, local-dev)\n`);
  console.log('| query | direct pg p50 / mean (ms) | query_db via /mcp p50 / mean (ms) | ratio p50 / mean |');
  console.log('|---|---|---|---|');
  for (const [label, sql] of cases) {
    const d = await time(() => direct.query(sql));
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'query_db', arguments: { service: 'db', sql } } });
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    let checked = false;
    const m = await time(async () => {
      const r = await fetch(`${custos.url}/mcp`, { method: 'POST', headers, body });
      const text = await r.text();
      if (!checked) {
        if (!text.includes('"masked"') || text.includes('"isError":true')) throw new Error(`query_db failed: ${text.slice(0, 300)}`);
        if (sql.includes('ORDER BY') && text.includes('user1@example.com')) throw new Error('emails were not masked');
        checked = true;
      }
    });
    console.log(`| ${label} | ${d.p50.toFixed(2)} / ${d.mean.toFixed(2)} | ${m.p50.toFixed(2)} / ${m.mean.toFixed(2)} | ${(m.p50 / d.p50).toFixed(2)}× / ${(m.mean / d.mean).toFixed(2)}× |`);
  }
  await direct.end();
} finally {
  custos.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 500));
  await db.drop();
  await dropRole(role);
}
