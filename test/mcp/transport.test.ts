/**
 * The /mcp wire protocol of our stateless JSON transport (src/mcp/transport.ts), through the real
 * service: the status codes and JSON-RPC errors the SDK's own Streamable HTTP transport gives in
 * stateless JSON mode, batches, notifications, and, because one McpServer serves every request of
 * the process, that concurrent requests with the same JSON-RPC id from different agents each get
 * their own answer.
 */
import test from 'ava';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { startCustos, type TestCustos } from '../support/custos.ts';
import { addCredential, MCP_ACCEPT, mcpPost, mintAgent, rawHttp, signup } from '../support/mcp-fixtures.ts';
import { StatelessJsonTransport } from '../../src/mcp/transport.ts';

let inst: TestCustos;
test.before(async () => {
  inst = await startCustos('sqlite');
});
test.after.always(async () => {
  await inst?.close();
});

const listServices = (id: unknown): unknown => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'list_services', arguments: {} } });

async function agentToken(): Promise<string> {
  return (await mintAgent(await signup(inst))).token;
}

test('initialize answers with the server info and the negotiated protocol version, without a session id', async (t) => {
  const r = await mcpPost(inst.url, { token: await agentToken() });
  t.is(r.status, 200);
  t.regex(String(r.headers['content-type']), /^application\/json/);
  t.is(r.headers['mcp-session-id'], undefined, 'stateless: no session');
  t.is(r.json.id, 1);
  t.is(r.json.result.serverInfo.name, 'custos');
  t.is(r.json.result.protocolVersion, '2025-06-18');
  t.truthy(r.json.result.capabilities.tools);
});

test('Accept must list application/json and text/event-stream (406); Content-Type must be JSON (415, typed)', async (t) => {
  const token = await agentToken();
  for (const accept of ['application/json', 'text/event-stream', '*/*']) {
    const r = await mcpPost(inst.url, { token, headers: { accept } });
    t.is(r.status, 406, accept);
    t.deepEqual(r.json, { jsonrpc: '2.0', error: { code: -32000, message: 'Not Acceptable: Client must accept both application/json and text/event-stream' }, id: null });
  }
  const r = await mcpPost(inst.url, { token, headers: { 'content-type': 'text/plain; a=application/json' } });
  t.is(r.status, 415, 'the media type is parsed, not substring-matched');
  t.is(r.json.error.code, 'CUSTOS_ERR_UNSUPPORTED_MEDIA_TYPE', 'refused by the body reader before JSON-RPC');
  const charset = await mcpPost(inst.url, { token, headers: { 'content-type': 'application/json; charset=utf-8' } });
  t.is(charset.status, 200, 'parameters on the JSON media type are fine');
});

test('a body that is not JSON-RPC is a -32700 parse error (400); an oversized batch is -32600', async (t) => {
  const token = await agentToken();
  for (const body of [{ hello: 'world' }, { jsonrpc: '1.0', id: 1, method: 'ping' }, [1, 2], 'ping']) {
    const r = await mcpPost(inst.url, { token, body });
    t.is(r.status, 400, JSON.stringify(body));
    t.deepEqual(r.json, { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error: Invalid JSON-RPC message' }, id: null });
  }
  const big = Array.from({ length: 101 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' }));
  const r = await mcpPost(inst.url, { token, body: big });
  t.is(r.status, 400);
  t.is(r.json.error.code, -32600);
});

test('notifications and responses alone get 202 with an empty body', async (t) => {
  const token = await agentToken();
  const r = await mcpPost(inst.url, { token, body: { jsonrpc: '2.0', method: 'notifications/initialized' } });
  t.is(r.status, 202);
  t.is(r.text, '');
  const cancel = await mcpPost(inst.url, { token, body: [{ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }, { jsonrpc: '2.0', id: 9, result: {} }] });
  t.is(cancel.status, 202);
});

test('a batch answers every request in order with its own id (duplicates included); initialize must be alone', async (t) => {
  const token = await agentToken();
  const r = await mcpPost(inst.url, {
    token,
    headers: { 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
    body: [
      { jsonrpc: '2.0', id: 'a', method: 'ping' },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 7, method: 'tools/list' },
      { jsonrpc: '2.0', id: 7, method: 'nope/unknown' },
    ],
  });
  t.is(r.status, 200);
  t.true(Array.isArray(r.json));
  t.deepEqual(r.json.map((m: { id: unknown }) => m.id), ['a', 7, 7]);
  t.deepEqual(r.json[0].result, {});
  t.true(r.json[1].result.tools.some((tool: { name: string }) => tool.name === 'call_api'));
  t.is(r.json[2].error.code, -32601, 'unknown method');
  const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
  const two = await mcpPost(inst.url, { token, body: [init, { jsonrpc: '2.0', id: 2, method: 'ping' }] });
  t.is(two.status, 400);
  t.is(two.json.error.message, 'Invalid Request: Only one initialization request is allowed');
});

test('an unsupported Mcp-Protocol-Version is refused (400); a supported one is accepted', async (t) => {
  const token = await agentToken();
  const bad = await mcpPost(inst.url, { token, headers: { 'mcp-protocol-version': '1999-01-01' }, body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
  t.is(bad.status, 400);
  t.regex(bad.json.error.message, /^Bad Request: Unsupported protocol version: 1999-01-01/);
  const good = await mcpPost(inst.url, { token, headers: { 'mcp-protocol-version': '2025-03-26' }, body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
  t.is(good.status, 200);
  t.deepEqual(good.json, { jsonrpc: '2.0', id: 1, result: {} });
});

test('GET and DELETE are 405 (stateless: no SSE stream, no session to end)', async (t) => {
  const token = await agentToken();
  for (const method of ['GET', 'DELETE']) {
    const r = await rawHttp(`${inst.url}/mcp`, { method, headers: { authorization: `Bearer ${token}`, accept: MCP_ACCEPT } });
    t.is(r.status, 405, method);
    t.is(r.headers.allow, 'POST');
  }
});

test('concurrent requests from different agents with the same JSON-RPC id each get their own answer', async (t) => {
  // Two people, each with a service only they can see; 40 interleaved calls all using id 1.
  const people = await Promise.all([signup(inst), signup(inst)]);
  const names = ['alpha-only', 'beta-only'];
  const tokens: string[] = [];
  for (const [i, p] of people.entries()) {
    await addCredential(p, { name: names[i]!, authScheme: 'bearer', baseUrl: 'https://api.example.com', secret: { value: `v-${i}-${Date.now()}` } });
    tokens.push((await mintAgent(p)).token);
  }
  const calls = Array.from({ length: 40 }, (_, k) => k % 2).map(async (who) => {
    const r = await mcpPost(inst.url, { token: tokens[who]!, body: listServices(1) });
    return { who, r };
  });
  for (const { who, r } of await Promise.all(calls)) {
    t.is(r.status, 200);
    t.is(r.json.id, 1);
    const seen = (r.json.result.structuredContent.services as Array<{ name: string }>).map((s) => s.name);
    t.deepEqual(seen, [names[who]], `agent ${who} saw ${seen.join(',')}`);
  }
});

test('closing the transport answers what is still pending instead of leaving it hanging', async (t) => {
  const transport = new StatelessJsonTransport();
  transport.onmessage = () => undefined; // a server that never answers
  const pending = transport.handle({ accept: MCP_ACCEPT, contentType: 'application/json', protocolVersion: undefined, body: { jsonrpc: '2.0', id: 'x', method: 'ping' }, authInfo: { token: '', clientId: 'c', scopes: [] } });
  await transport.close();
  const r = await pending;
  t.is(r.status, 200);
  t.deepEqual(JSON.parse(r.body!), { jsonrpc: '2.0', id: 'x', error: { code: -32000, message: 'Server is shutting down.' } });
});

test('a server that throws instead of answering gets an internal error in its place, and nothing stays pending', async (t) => {
  const transport = new StatelessJsonTransport();
  transport.onmessage = () => {
    throw new Error('boom: must not reach the agent');
  };
  const r = await transport.handle({ accept: MCP_ACCEPT, contentType: 'application/json', protocolVersion: undefined, body: [{ jsonrpc: '2.0', id: 4, method: 'ping' }, { jsonrpc: '2.0', id: 5, method: 'ping' }], authInfo: { token: '', clientId: 'c', scopes: [] } });
  t.is(r.status, 200);
  t.deepEqual(JSON.parse(r.body!), [4, 5].map((id) => ({ jsonrpc: '2.0', id, error: { code: -32603, message: 'Internal error' } })));
  t.false(r.body!.includes('boom'));
});

test('static methods are answered once by the server, then from the first answer, shaped per caller; a cursor goes through', async (t) => {
  let calls = 0;
  const transport = new StatelessJsonTransport({
    staticMethods: ['tools/list'],
    shapeResult: (method, result, authInfo) => (method === 'tools/list' ? { ...result, tools: (result.tools as Array<{ name: string }>).filter((x) => authInfo.scopes.includes(x.name)) } : result),
  });
  transport.onmessage = (message) => {
    calls++;
    const m = message as { id: number };
    void transport.send({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'a' }, { name: 'b' }] } });
  };
  const ask = async (scopes: string[], params?: Record<string, unknown>): Promise<unknown> => {
    const r = await transport.handle({ accept: MCP_ACCEPT, contentType: 'application/json', protocolVersion: undefined, body: { jsonrpc: '2.0', id: 1, method: 'tools/list', ...(params ? { params } : {}) }, authInfo: { token: '', clientId: 'c', scopes } });
    return JSON.parse(r.body!).result.tools.map((x: { name: string }) => x.name);
  };
  t.deepEqual(await ask(['a', 'b']), ['a', 'b']);
  t.deepEqual(await ask(['b']), ['b'], 'shaped for this caller');
  t.deepEqual(await ask(['a'], { _meta: { progressToken: 7 } }), ['a']);
  t.is(calls, 1, 'the server answered once');
  t.deepEqual(await ask(['a', 'b']), ['a', 'b'], 'the cached answer was not changed by shaping');
  await ask(['a'], { cursor: 'x' });
  await ask(['a'], { cursor: 'y' });
  t.is(calls, 3, 'pages after the first are not cached');
});
