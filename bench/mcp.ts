/**
 * Issue 4 benchmark: the same load generator (autocannon, prepared requests) against
 *   direct:  → loopback upstream
 *   nginx:   → nginx with proxy_set_header Authorization → upstream
 *   /mcp:    → Custos call_api (Bearer) → upstream   (JSON-RPC tools/call POSTs)
 * at c=1 (latency p50/p99) and c=32 (throughput), plus the official SDK client's latency, and the
 * key-backend calls per steady-state call (from /metrics). Everything runs on this machine at once:
 * the figures are ratios measured in the same run, not absolutes.
 *
 *   node --import tsx bench/mcp.ts [--seconds 8]
 */
import autocannon from 'autocannon';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { parseArgs } from 'node:util';
import { Agent, request } from 'node:http';
import { pct, person, startCustosProcess, startNginx, startUpstreamProcess } from './support/processes.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '8' } } });
const SECONDS = Number(values.seconds);

interface Figures { p50: number; p99: number; rps: number }

async function load(url: string, connections: number, opts: { method?: 'GET' | 'POST'; headers?: Record<string, string>; body?: string } = {}): Promise<Figures> {
  const r = await autocannon({ url, connections, duration: SECONDS, method: opts.method ?? 'GET', headers: opts.headers, body: opts.body, pipelining: 1 });
  // In-flight requests cut off when the run ends count as errors; anything more is a failed run.
  if (r.non2xx > 0 || r.errors > Math.max(connections, r.requests.total / 1000)) throw new Error(`${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return { p50: r.latency.p50, p99: r.latency.p99, rps: r.requests.average };
}

/**
 * c=1 latency with sub-millisecond resolution (autocannon reports whole milliseconds): one
 * keep-alive connection, the same prepared request sent sequentially, timed with performance.now().
 */
async function sequential(url: string, n: number, opts: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<{ p50: number; p99: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const u = new URL(url);
  const once = (): Promise<void> => new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname, method: opts.method ?? 'GET', headers: opts.headers, agent }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`${url}: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
  for (let i = 0; i < 200; i++) await once();
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await once();
    xs.push(performance.now() - t0);
  }
  agent.destroy();
  xs.sort((a, b) => a - b);
  return { p50: pct(xs, 50), p99: pct(xs, 99) };
}

async function main(): Promise<void> {
  const upstream = await startUpstreamProcess();
  const nginx = await startNginx(upstream.port, 'Bearer bench-secret-value');
  const custos = await startCustosProcess();
  const p = await person(custos.url);
  await p.post(`/workspaces/${p.workspaceId}/credentials`, { name: 'up', authScheme: 'bearer', baseUrl: upstream.url, secret: { value: 'bench-secret-value' } });
  const { token } = await p.post('/tokens/agent', { name: 'bench', tools: ['call_api'], methods: ['GET'] });
  const mcpHeaders = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const mcpBody = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'call_api', arguments: { service: 'up', method: 'GET', path: '/items' } } });
  // Warm up (activation: one unwrap) and check the answer is a success.
  const warm = await fetch(`${custos.url}/mcp`, { method: 'POST', headers: mcpHeaders, body: mcpBody });
  const warmBody = await warm.text();
  if (!warmBody.includes('"status\\":200')) throw new Error(`warm-up call failed: ${warmBody.slice(0, 300)}`);
  const before = await custos.metrics();

  const N1 = 3000;
  const rows: Array<[string, { p50: number; p99: number }, Figures]> = [];
  const direct1 = await sequential(`${upstream.url}/items`, N1);
  const direct32 = await load(`${upstream.url}/items`, 32);
  rows.push(['direct → upstream', direct1, direct32]);
  if (nginx) rows.push(['nginx (Authorization) → upstream', await sequential(`${nginx.url}/items`, N1), await load(`${nginx.url}/items`, 32)]);
  const mcpHeadersWithLength = { ...mcpHeaders, 'content-length': String(Buffer.byteLength(mcpBody)) };
  const mcp1 = await sequential(`${custos.url}/mcp`, N1, { method: 'POST', headers: mcpHeadersWithLength, body: mcpBody });
  const mcp32 = await load(`${custos.url}/mcp`, 32, { method: 'POST', headers: mcpHeaders, body: mcpBody });
  rows.push(['/mcp call_api (Bearer) → upstream', mcp1, mcp32]);
  const after = await custos.metrics();
  // The floor on this machine: the same Custos process answering /healthz (Koa and its middleware,
  // no MCP, no database, no upstream). A call can only be some multiple of this.
  rows.push(['(reference) Custos /healthz, no upstream', await sequential(`${custos.url}/healthz`, N1), await load(`${custos.url}/healthz`, 32)]);

  // The official SDK client, sequential calls: end-to-end latency as an agent sees it.
  const client = new Client({ name: 'bench', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${custos.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  const sdk: number[] = [];
  for (let i = 0; i < 300; i++) {
    const t0 = performance.now();
    await client.callTool({ name: 'call_api', arguments: { service: 'up', method: 'GET', path: '/items' } });
    sdk.push(performance.now() - t0);
  }
  await client.close();
  sdk.sort((a, b) => a - b);

  const calls = (after.key_backend_wraps_total! + after.key_backend_unwraps_total!) - (before.key_backend_wraps_total! + before.key_backend_unwraps_total!);
  const audited = N1 + 200 + mcp32.rps * SECONDS;
  console.log(`\nIssue 4 benchmark (${SECONDS}s per run, autocannon, 2 cores shared by load generator, upstream, proxy and Custos)\n`);
  console.log('| path | p50 c=1 (ms) | p99 c=1 (ms) | req/s c=32 |');
  console.log('|---|---|---|---|');
  for (const [name, c1, c32] of rows) console.log(`| ${name} | ${c1.p50.toFixed(3)} | ${c1.p99.toFixed(3)} | ${Math.round(c32.rps)} |`);
  console.log(`\nc=1: ${N1} sequential prepared requests on one keep-alive connection; c=32: autocannon ${SECONDS}s`);
  console.log(`added p50 latency at c=1: /mcp ${(mcp1.p50 - direct1.p50).toFixed(3)} ms over direct` + (nginx ? `; nginx ${(rows[1]![1].p50 - direct1.p50).toFixed(3)} ms` : ''));
  console.log(`throughput ratio at c=32: /mcp / direct = ${(mcp32.rps / direct32.rps).toFixed(3)}` + (nginx ? `; /mcp / nginx = ${(mcp32.rps / rows[1]![2].rps).toFixed(3)}` : ''));
  console.log(`/mcp call_api costs ${(rows.at(-1)![2].rps / mcp32.rps).toFixed(1)}× a /healthz request of the same process at c=32`);
  console.log(`SDK client (300 sequential call_api): p50 ${pct(sdk, 50).toFixed(2)} ms, p99 ${pct(sdk, 99).toFixed(2)} ms`);
  console.log(`key-backend calls during ~${Math.round(audited)} audited call_api: ${calls} (${(calls / Math.max(1, audited)).toFixed(6)} per call)`);
  if (!nginx) console.log('nginx not installed (apt-get install -y nginx-light): nginx row skipped');

  for (const c of [custos.child, upstream.child, nginx?.child]) c?.kill('SIGTERM');
}

await main();
