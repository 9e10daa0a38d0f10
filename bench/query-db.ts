/**
 * Issue 5 benchmark, one run: a direct `pg` query vs the same query through query_db on /mcp
 * (HTTP + JSON-RPC + token + audit + read-only transaction + masking), for 1 row and for 1,000
 * rows. Sequential requests; p50 and mean; ratio against direct measured in the same run.
 *
 *   node --import tsx bench/query-db.ts [--n 400]
 */
import { parseArgs } from 'node:util';
import { Agent, request } from 'node:http';
import pg from 'pg';
import { adminCommand } from '../src/cli/admin.ts';
import { readonlyRoleSql } from '../src/sql/readonly-role.ts';
import { createTestDatabase, dropRole, roleDsn, uniqueName } from '../test/support/pg.ts';
import { pct, person, startCustosProcess } from './support/processes.ts';

const { values } = parseArgs({ options: { n: { type: 'string', default: '400' } } });
const N = Number(values.n);

const ROUNDS = 4;

/** N sequential timings (ms) after a warm-up. */
async function time(fn: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < 20; i++) await fn(); // warm-up
  const xs: number[] = [];
  for (let i = 0; i < N / ROUNDS; i++) {
    const t0 = performance.now();
    await fn();
    xs.push(performance.now() - t0);
  }
  return xs;
}

function stats(xs: number[]): { p50: number; mean: number } {
  const sorted = [...xs].sort((a, b) => a - b);
  return { p50: pct(sorted, 50), mean: xs.reduce((a, b) => a + b, 0) / xs.length };
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
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const u = new URL(custos.url);
  for (const [label, sql] of cases) {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'query_db', arguments: { service: 'db', sql } } });
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'content-length': String(Buffer.byteLength(body)) };
    // The same raw keep-alive HTTP client as bench/mcp.ts (fetch's own client cost on a large body
    // would be counted against Custos); the response body is read in full.
    const viaMcp = (): Promise<string> => new Promise((resolve, reject) => {
      const req = request({ host: u.hostname, port: u.port, path: '/mcp', method: 'POST', headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => (res.statusCode === 200 ? resolve(Buffer.concat(chunks).toString('utf8')) : reject(new Error(`query_db: HTTP ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end(body);
    });
    const text = await viaMcp();
    if (!text.includes('"masked"') || text.includes('"isError":true')) throw new Error(`query_db failed: ${text.slice(0, 300)}`);
    if (sql.includes('ORDER BY') && text.includes('user1@example.com')) throw new Error('emails were not masked');
    // Rounds alternate between the two sides so that machine noise hits both alike.
    const d: number[] = [];
    const m: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      d.push(...(await time(() => direct.query(sql))));
      m.push(...(await time(viaMcp)));
    }
    const ds = stats(d);
    const ms = stats(m);
    console.log(`| ${label} | ${ds.p50.toFixed(2)} / ${ds.mean.toFixed(2)} | ${ms.p50.toFixed(2)} / ${ms.mean.toFixed(2)} | ${(ms.p50 / ds.p50).toFixed(2)}× / ${(ms.mean / ds.mean).toFixed(2)}× |`);
  }
  agent.destroy();
  await direct.end();
} finally {
  custos.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 500));
  await db.drop();
  await dropRole(role);
}
