/**
 * Where /mcp time goes at c=1: p50 of sequential prepared requests for Koa alone (/healthz), an MCP
 * ping, tools/list, list_services and call_api, against a separate `custos serve`.
 *   node --import tsx bench/mcp-layers.ts
 */
import { Agent, request } from 'node:http';
import { pct, person, startCustosProcess, startUpstreamProcess } from './support/processes.ts';
const upstream = await startUpstreamProcess();
const custos = await startCustosProcess();
const p = await person(custos.url);
await p.post(`/workspaces/${p.workspaceId}/credentials`, { name: 'up', authScheme: 'bearer', baseUrl: upstream.url, secret: { value: 'bench-secret-value' } });
const { token } = await p.post('/tokens/agent', { name: 'bench', tools: ['call_api', 'list_services'], methods: ['GET'] });
const agent = new Agent({ keepAlive: true, maxSockets: 1 });
async function seq(path: string, method: string, body?: string, n = 2000) {
  const u = new URL(custos.url);
  const headers: Record<string, string> = body ? { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'content-length': String(Buffer.byteLength(body)) } : {};
  const once = () => new Promise<void>((res, rej) => { const r = request({ host: u.hostname, port: u.port, path, method, headers, agent }, (s) => { s.resume(); s.on('end', () => res()); }); r.on('error', rej); r.end(body); });
  for (let i = 0; i < 200; i++) await once();
  const xs: number[] = [];
  for (let i = 0; i < n; i++) { const t0 = performance.now(); await once(); xs.push(performance.now() - t0); }
  xs.sort((a, b) => a - b);
  return pct(xs, 50).toFixed(3);
}
const rpc = (method: string, params?: unknown) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, ...(params ? { params } : {}) });
console.log('healthz', await seq('/healthz', 'GET'));
console.log('mcp ping', await seq('/mcp', 'POST', rpc('ping')));
console.log('mcp tools/list', await seq('/mcp', 'POST', rpc('tools/list')));
console.log('mcp list_services', await seq('/mcp', 'POST', rpc('tools/call', { name: 'list_services', arguments: {} })));
console.log('mcp call_api', await seq('/mcp', 'POST', rpc('tools/call', { name: 'call_api', arguments: { service: 'up', method: 'GET', path: '/x' } })));
custos.child.kill(); upstream.child.kill(); agent.destroy();
