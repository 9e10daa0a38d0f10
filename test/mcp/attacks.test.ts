/**
 * Attacks on /mcp and call_api through the REAL running service (HTTP server, database, key backend,
 * actors, broker), driven with the official MCP SDK client or raw HTTP, against real upstreams on
 * 127.0.0.1. Each refusal is checked three ways: the agent gets a clear CUSTOS_ERR_* (tool error or
 * HTTP status), the upstream never received the request, and the denial is in the workspace audit.
 *
 * Every test gets its own upstream(s) and person, so `received.length === 0` means exactly "this
 * test's attacks reached nothing" even while other tests run concurrently.
 */
import test from 'ava';
import { hostname } from 'node:os';
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { randomUUID } from 'node:crypto';
import { DB_KINDS, startCustos, type DbKind, type TestCustos } from '../support/custos.ts';
import { connectAgent, type Agent } from '../support/mcp.ts';
import { startUpstream, type Handler } from '../support/upstream.ts';
import {
  addCredential, auditOf, echoForms, marker, mcpPost, mintAgent, postAgentToken, rawHttp, signup, tag, type AuditEntry, type Person,
} from '../support/mcp-fixtures.ts';
import { mintToken } from '../../src/core/token-format.ts';
import { BrokerService } from '../../src/core/broker.ts';
import { ActorUses } from '../../src/actors/uses.ts';
import { isBlockedAddress } from '../../src/broker/guard.ts';

const instances = new Map<DbKind, TestCustos>();
/** A third instance with tiny /mcp limits, so the rate-limit and body-cap tests stay cheap. */
let limited: TestCustos;
const RATE = 4;
const BODY_LIMIT = 8192;

test.before(async () => {
  for (const db of DB_KINDS) instances.set(db, await startCustos(db));
  limited = await startCustos('sqlite', { mcp: { ratePerMinute: RATE, bodyLimitBytes: BODY_LIMIT } });
});
test.after.always(async () => {
  for (const i of instances.values()) await i.close();
  await limited?.close();
});

const sqlite = (): TestCustos => instances.get('sqlite')!;

interface World {
  person: Person;
  secret: string;
  up: Awaited<ReturnType<typeof startUpstream>>;
  token: string;
  tokenId: string;
  agent: Agent;
  close(): Promise<void>;
}

/** A person with a bearer service `svc` and a header service `hdr` (x-api-key) on a private upstream. */
async function world(inst: TestCustos, opts: { tools?: string[]; methods?: string[]; handler?: Handler; secret?: string } = {}): Promise<World> {
  const up = await startUpstream(opts.handler);
  const person = await signup(inst);
  const secret = opts.secret ?? marker('bearer');
  await addCredential(person, { name: 'svc', authScheme: 'bearer', baseUrl: `${up.url}/v1`, secret: { value: secret } });
  await addCredential(person, { name: 'hdr', authScheme: 'header', baseUrl: `${up.url}/v1`, config: { headerName: 'x-api-key' }, secret: { value: secret } });
  const tok = await mintAgent(person, { ...(opts.tools ? { tools: opts.tools } : {}), ...(opts.methods ? { methods: opts.methods } : {}) });
  const agent = await connectAgent(inst.url, tok.token);
  return {
    person, secret, up, token: tok.token, tokenId: tok.id, agent,
    async close() {
      await agent.close();
      await up.close();
    },
  };
}

function denied(entries: AuditEntry[], code: string): AuditEntry[] {
  return entries.filter((e) => e.action === 'mcp.call_api' && e.outcome === 'denied' && e.details.code === code);
}

// ─── path and URL ────────────────────────────────────────────────────────────────────────────────

const PATH_ATTACKS: Array<[string, string]> = [
  ['absolute http URL', 'http://evil.example/x'],
  ['absolute https URL', 'https://evil.example/x'],
  ['host:port without scheme', 'evil.example:80/x'],
  ['javascript: scheme', 'javascript:alert(1)'],
  ['file: scheme', 'file:///etc/passwd'],
  ['protocol-relative //host', '//evil.example/x'],
  ['userinfo @host', '@evil.example/x'],
  ['@ inside the path', '/x@evil.example/y'],
  ['backslash segments', '/x\\..\\admin'],
  ['leading backslashes', '\\\\evil.example/x'],
  ['/../ escaping the base path /v1', '/../admin'],
  ['deeper ../ escape', '/a/../../admin'],
  ['trailing /..', '/a/..'],
  ['single dot segment', '/./admin'],
  ['%2e%2e/', '/%2e%2e/admin'],
  ['%2E%2E/ (upper-case)', '/%2E%2E/admin'],
  ['.%2e/', '/.%2e/admin'],
  ['%2e./', '/%2e./admin'],
  ['%2f.. (encoded slash)', '/%2f../admin'],
  ['%5c (encoded backslash)', '/a%5c..%5cadmin'],
  ['double-encoded %252e%252e', '/%252e%252e/admin'],
  ['..;/ (matrix parameter)', '/..;/admin'],
  ['tab', '/a\tb'],
  ['control character 0x01', '/a\u0001b'],
  ['DEL', '/a\u007fb'],
  ['CR/LF request splitting', '/a HTTP/1.1\r\nHost: evil.example\r\n\r\nGET /x'],
  ['bare LF', '/a\nb'],
  ['bare CR', '/a\rb'],
  ['NUL', '/a\u0000b'],
  ['encoded CR/LF', '/a%0d%0aHost:%20evil.example'],
  ['encoded NUL', '/a%00b'],
  ['fragment', '/a#frag'],
  ['malformed percent-escape', '/a%zz'],
];

test('[sqlite] call_api refuses every path that could leave the base URL; the upstream receives none of them', async (t) => {
  const w = await world(sqlite());
  t.teardown(() => w.close());
  for (const [what, path] of PATH_ATTACKS) {
    for (const service of ['svc', 'hdr']) {
      const r = await w.agent.call('call_api', { service, method: 'GET', path });
      t.true(r.isError, `${what} (${service}) must be refused`);
      t.regex(r.text, /^CUSTOS_ERR_URL_REFUSED: /, what);
      t.false(r.text.includes(w.secret), what);
    }
  }
  t.is(w.up.received.length, 0, 'no attack reached the upstream');
  // Positive control: the same agent and upstream work for an ordinary path, under the base path.
  const ok = await w.agent.call('call_api', { service: 'svc', method: 'GET', path: '/items/a.b/..c?q=../x' });
  t.false(ok.isError, ok.text);
  t.is(w.up.received.length, 1);
  t.is(w.up.received[0]!.url, '/v1/items/a.b/..c?q=../x', 'dots inside names and the query are not segments');
  // Audit: every refusal is recorded as a denial with its code, before the agent got the answer.
  const refused = denied(await auditOf(w.person), 'CUSTOS_ERR_URL_REFUSED');
  t.is(refused.length, PATH_ATTACKS.length * 2);
  t.true(refused.every((e) => e.actor.type === 'agent_token' && e.actor.id === w.tokenId && e.actor.creatorId === w.person.accountId));
});

test('[sqlite] a path cannot climb out of a deeper base path into a sibling tenant', async (t) => {
  const up = await startUpstream();
  t.teardown(() => up.close());
  const person = await signup(sqlite());
  const secret = marker('tenant');
  await addCredential(person, { name: 'tenant-a', authScheme: 'bearer', baseUrl: `${up.url}/v1/tenants/a`, secret: { value: secret } });
  const tok = await mintAgent(person);
  const agent = await connectAgent(sqlite().url, tok.token);
  t.teardown(() => agent.close());
  for (const path of ['/../b/secrets', '/..%2fb', '/%2e%2e/b', '/x/../../b', '/../a-evil']) {
    const r = await agent.call('call_api', { service: 'tenant-a', method: 'GET', path });
    t.regex(r.text, /^CUSTOS_ERR_URL_REFUSED: /, path);
  }
  t.is(up.received.length, 0);
  const ok = await agent.call('call_api', { service: 'tenant-a', method: 'GET', path: '/items' });
  t.false(ok.isError, ok.text);
  t.deepEqual(up.received.map((r) => r.url), ['/v1/tenants/a/items']);
});

// ─── methods ─────────────────────────────────────────────────────────────────────────────────────

test('[sqlite] methods are an exact upper-case allow-list cut by the token scope; CR/LF in a method is refused', async (t) => {
  const w = await world(sqlite(), { methods: ['GET', 'POST'] });
  t.teardown(() => w.close());
  const cases: Array<[string, RegExp]> = [
    ['get', /^CUSTOS_ERR_VALIDATION: HTTP methods are exact uppercase/],
    ['Post', /^CUSTOS_ERR_VALIDATION: /],
    ['GET\r\nX: 1', /^CUSTOS_ERR_VALIDATION: The HTTP method is malformed/],
    ['GET /admin', /^CUSTOS_ERR_VALIDATION: /],
    ['GET\u0000', /^CUSTOS_ERR_VALIDATION: /],
    ['TRACE', /^CUSTOS_ERR_METHOD_NOT_ALLOWED: /],
    ['CONNECT', /^CUSTOS_ERR_METHOD_NOT_ALLOWED: /],
    ['PROPFIND', /^CUSTOS_ERR_METHOD_NOT_ALLOWED: /],
    ['DELETE', /^CUSTOS_ERR_METHOD_NOT_ALLOWED: This token may not use DELETE; its methods are: GET, POST/],
    ['PUT', /^CUSTOS_ERR_METHOD_NOT_ALLOWED: /],
  ];
  for (const [method, expected] of cases) {
    const r = await w.agent.call('call_api', { service: 'svc', method, path: '/m' });
    t.true(r.isError, JSON.stringify(method));
    t.regex(r.text, expected, JSON.stringify(method));
    t.false(r.text.includes('\r'), 'a malformed method is never echoed');
  }
  t.is(w.up.received.length, 0);
  const entries = await auditOf(w.person);
  t.is(denied(entries, 'CUSTOS_ERR_METHOD_NOT_ALLOWED').length, 5);
  t.is(denied(entries, 'CUSTOS_ERR_VALIDATION').length, 5);
});

// ─── headers ─────────────────────────────────────────────────────────────────────────────────────

test('[sqlite] agent headers cannot override or plant credentials, Host, framing or routing; CR/LF in names and values is refused', async (t) => {
  const w = await world(sqlite());
  t.teardown(() => w.close());
  const attacks: Array<[string, Record<string, string>]> = [
    ['svc', { Authorization: 'Bearer attacker-token' }],
    ['svc', { authorization: 'Bearer attacker-token' }],
    ['svc', { AUTHORIZATION: 'Basic YTpi' }],
    ['svc', { 'Proxy-Authorization': 'Basic YTpi' }],
    ['svc', { Cookie: 'session=attacker' }],
    ['svc', { Host: 'evil.example' }],
    ['svc', { 'X-Amz-Date': '20240101T000000Z' }],
    ['svc', { 'x-amz-security-token': 'planted' }],
    ['hdr', { 'x-api-key': 'attacker-key' }],
    ['hdr', { 'X-API-Key': 'attacker-key' }],
    ['hdr', { Authorization: 'Bearer attacker-token' }],
    ['svc', { 'X-Ok\r\nAuthorization': 'Bearer attacker-token' }],
    ['svc', { 'X-Ok': 'v\r\nAuthorization: Bearer attacker-token' }],
    ['svc', { 'X-Ok': 'v\nX-Injected: 1' }],
    ['svc', { 'X-Ok': 'v\u0000' }],
    ['svc', { 'X Bad': 'v' }],
    ['svc', { 'X-HTTP-Method-Override': 'DELETE' }],
    ['svc', { 'X-Original-URL': '/admin' }],
    ['svc', { 'X-Forwarded-Host': 'evil.example' }],
    ['svc', { 'Transfer-Encoding': 'chunked' }],
    ['svc', { 'Content-Length': '0' }],
    ['svc', { Connection: 'close, Authorization' }],
    ['svc', { 'Accept-Encoding': 'gzip' }],
    ['svc', { 'X-A': 'one', 'x-a': 'two' }],
  ];
  for (const [service, headers] of attacks) {
    const r = await w.agent.call('call_api', { service, method: 'GET', path: '/h', headers });
    t.true(r.isError, `${service} ${JSON.stringify(headers)}`);
    t.regex(r.text, /^CUSTOS_ERR_HEADER_REFUSED: /, JSON.stringify(headers));
    t.false(r.text.includes('attacker'), 'a refused value is never echoed');
  }
  t.is(w.up.received.length, 0);
  t.is(denied(await auditOf(w.person), 'CUSTOS_ERR_HEADER_REFUSED').length, attacks.length);
  // Positive control: ordinary headers pass, and the credential is the stored one.
  const ok = await w.agent.call('call_api', { service: 'hdr', method: 'GET', path: '/h', headers: { Accept: 'application/json', 'X-Request-Tag': 'abc' } });
  t.false(ok.isError, ok.text);
  const seen = w.up.received[0]!;
  t.is(seen.headers['x-api-key'], w.secret);
  t.is(seen.headers.accept, 'application/json');
  t.is(seen.headers['x-request-tag'], 'abc');
  t.is(seen.headers.authorization, undefined);
});

// ─── redirects ───────────────────────────────────────────────────────────────────────────────────

test('[sqlite] redirects are returned to the agent as is; the other host is never contacted', async (t) => {
  const other = await startUpstream();
  t.teardown(() => other.close());
  const handler: Handler = (req, res) => {
    const to: Record<string, [number, string]> = {
      '/v1/to-other-host': [302, `${other.url}/steal`],
      '/v1/to-http': [301, 'http://evil.example/steal'],
      '/v1/to-other-port-same-ip': [307, `${other.url}/v1/again`],
      '/v1/to-same-origin': [308, '/v1/followed'],
    };
    const hop = to[req.url];
    if (hop) {
      res.writeHead(hop[0], { location: hop[1], 'content-type': 'text/plain' });
      res.end(`moved to ${hop[1]}`);
      return;
    }
    res.end('ok');
  };
  const w = await world(sqlite(), { handler });
  t.teardown(() => w.close());
  for (const [path, status, location] of [
    ['/to-other-host', 302, `${other.url}/steal`],
    ['/to-http', 301, 'http://evil.example/steal'],
    ['/to-other-port-same-ip', 307, `${other.url}/v1/again`],
    ['/to-same-origin', 308, '/v1/followed'],
  ] as const) {
    const r = await w.agent.call('call_api', { service: 'svc', method: 'GET', path });
    t.false(r.isError, r.text);
    t.is(r.structured.status, status, path);
    t.is(r.structured.headers.location, location, 'the Location comes back for the agent to decide');
  }
  t.is(other.received.length, 0, 'the redirect target never saw a request (nor the credential)');
  t.deepEqual(w.up.received.map((r) => r.url), ['/v1/to-other-host', '/v1/to-http', '/v1/to-other-port-same-ip', '/v1/to-same-origin'], 'not even a same-origin redirect is followed');
});

// ─── private, loopback and metadata destinations ─────────────────────────────────────────────────

test('[sqlite] a host NAME that resolves to a loopback/private address is refused at connect time (real resolver, /etc/hosts)', async (t) => {
  // The machine's own host name resolves through the real system resolver (/etc/hosts) to a
  // loopback or private address on Debian and in containers: exactly a "public-looking name that
  // points inside". The credential is stored by a person; only the name is private-looking, not the URL.
  const name = hostname();
  const resolved = await dnsLookup(name, { all: true }).catch(() => []);
  t.true(resolved.length > 0 && resolved.every((a) => isBlockedAddress(a.address)),
    `precondition: the host name ${name} must resolve to a loopback/private address (got ${JSON.stringify(resolved)})`);
  const up = await startUpstream();
  t.teardown(() => up.close());
  const person = await signup(sqlite());
  const secret = marker('dns');
  await addCredential(person, { name: 'by-name', authScheme: 'bearer', baseUrl: `http://${name}:${up.port}/v1`, secret: { value: secret } });
  await addCredential(person, { name: 'by-literal', authScheme: 'bearer', baseUrl: `${up.url}/v1`, secret: { value: secret } });
  const tok = await mintAgent(person);
  const agent = await connectAgent(sqlite().url, tok.token);
  t.teardown(() => agent.close());
  const r = await agent.call('call_api', { service: 'by-name', method: 'GET', path: '/x' });
  t.true(r.isError);
  t.regex(r.text, /^CUSTOS_ERR_DESTINATION_REFUSED: /);
  t.is(up.received.length, 0, 'the name was never connected to');
  // Control: the same upstream through the literal base URL a person chose is reachable.
  const ok = await agent.call('call_api', { service: 'by-literal', method: 'GET', path: '/x' });
  t.false(ok.isError, ok.text);
  t.is(up.received.length, 1);
  const entry = (await auditOf(person)).find((e) => e.action === 'mcp.call_api' && e.target.name === 'by-name')!;
  t.is(entry.outcome, 'failure');
  t.is(entry.details.code, 'CUSTOS_ERR_DESTINATION_REFUSED');
});

test('[sqlite] names resolving to 169.254.169.254, 127.0.0.1 or ::1 are refused at connect time (BrokerService + actors with an injected resolver)', async (t) => {
  // createCustos has no seam for the resolver, and /etc/hosts may not be edited; so this case runs one
  // layer down: the running service's store, access, credentials and actor system, a BrokerService
  // built with the public ActorUses constructor and a resolver that maps public-looking names to
  // internal addresses. Sockets, guard, undici agent and upstream are real.
  const inst = sqlite();
  const up = await startUpstream();
  t.teardown(() => up.close());
  const table: Record<string, string> = {
    'metadata.public-looking.example': '169.254.169.254',
    'api.public-looking.example': '127.0.0.1',
    'v6.public-looking.example': '::1',
    'mapped.public-looking.example': '::ffff:127.0.0.1',
    'ten.public-looking.example': '10.0.0.7',
  };
  const lookups: string[] = [];
  const fakeDns = ((host: string, options: { all?: boolean }, cb: (err: NodeJS.ErrnoException | null, a: unknown, f?: number) => void) => {
    lookups.push(host);
    const address = table[host];
    if (!address) {
      cb(Object.assign(new Error(`ENOTFOUND ${host}`), { code: 'ENOTFOUND' }), options.all ? [] : '', 0);
      return;
    }
    if (options.all) cb(null, [{ address, family: isIP(address) }]);
    else cb(null, address, isIP(address));
  }) as unknown as LookupFunction;
  const broker = new BrokerService(inst.custos.store, inst.custos.services.access, inst.custos.services.credentials,
    new ActorUses(inst.custos.actors, inst.custos.store, inst.custos.config.broker, inst.custos.config.queryDb, { lookup: fakeDns }), () => inst.url);
  const person = await signup(inst);
  const secret = marker('meta');
  for (const host of Object.keys(table)) {
    await addCredential(person, { name: host, authScheme: 'bearer', baseUrl: `http://${host}:${up.port}/v1`, secret: { value: secret } });
  }
  await addCredential(person, { name: 'literal', authScheme: 'bearer', baseUrl: `${up.url}/v1`, secret: { value: secret } });
  const tok = await mintAgent(person);
  const ctx = { principal: await inst.custos.services.tokens.resolve(tok.token, 'agent', '127.0.0.1'), ip: '127.0.0.1', requestId: 'attack-test' };
  for (const host of Object.keys(table)) {
    const err = await t.throwsAsync(broker.callApi(ctx, { service: host, method: 'GET', path: '/latest/meta-data/iam' }));
    t.is((err as { code?: string }).code, 'CUSTOS_ERR_DESTINATION_REFUSED', host);
    t.false(err!.message.includes(secret));
  }
  t.deepEqual([...new Set(lookups)].sort(), Object.keys(table).sort(), 'each name was resolved at connect time');
  t.is(up.received.length, 0, 'nothing reached the loopback upstream through a public-looking name');
  const ok = await broker.callApi(ctx, { service: 'literal', method: 'GET', path: '/fine' });
  t.is(ok.status, 200);
  t.is(up.received.length, 1);
});

// ─── echo of the credential ──────────────────────────────────────────────────────────────────────

test('[sqlite] an upstream that echoes the credential (raw, base64, URL-encoded, hex, JSON, in headers) leaks nothing to the agent', async (t) => {
  // A secret with characters whose URL, JSON and base64 forms all differ from the raw bytes.
  const secret = `${marker('echo')}+/=!*'"\\`;
  const handler: Handler = (req, res) => {
    const presented = String(req.headers.authorization ?? req.headers['x-api-key'] ?? '');
    const value = presented.replace(/^Bearer /, '');
    const forms = {
      raw: presented,
      base64: Buffer.from(value).toString('base64'),
      base64Header: Buffer.from(presented).toString('base64'),
      basic: Buffer.from(`user:${value}`).toString('base64'),
      base64url: Buffer.from(value).toString('base64url'),
      url: encodeURIComponent(value),
      formUrl: encodeURIComponent(value).replace(/%20/g, '+'),
      hex: Buffer.from(value).toString('hex'),
      upper: value.toUpperCase(),
      headersSeen: req.headers,
      body: req.body.toString('utf8'),
    };
    res.writeHead(200, {
      'content-type': 'application/json',
      'x-request-id': value,
      'www-authenticate': `Bearer realm="${value}"`,
      location: `https://example.com/cb?token=${encodeURIComponent(value)}`,
      link: `<https://example.com/?k=${Buffer.from(value).toString('base64')}>; rel="next"`,
      'set-cookie': `s=${value}`,
      'x-echo-auth': presented,
    });
    res.end(JSON.stringify(forms));
  };
  const w = await world(sqlite(), { handler, secret });
  t.teardown(() => w.close());
  for (const service of ['svc', 'hdr']) {
    const r = await w.agent.call('call_api', { service, method: 'POST', path: `/echo-${service}`, body: { note: 'hello' } });
    t.false(r.isError, r.text);
    t.is(r.structured.status, 200);
    const out = r.text + JSON.stringify(r.structured);
    for (const form of [...echoForms(secret), Buffer.from(`user:${secret}`).toString('base64'), Buffer.from(`Bearer ${secret}`).toString('base64'), secret.toUpperCase()]) {
      t.false(out.includes(form), `${service}: form ${form.slice(0, 12)}… leaked`);
    }
    t.false(out.includes(secret.slice(0, 20)), 'not even the marker part');
    t.true(out.includes('[redacted]'), 'the echo is visibly redacted, not silently dropped');
    t.is(r.structured.body.body, '{"note":"hello"}', 'the rest of the echo is intact');
    t.is(r.structured.headers['set-cookie'], undefined);
    t.is(r.structured.headers['x-echo-auth'], undefined);
  }
  t.is(w.up.received.length, 2, 'the credential did reach its own upstream');
  await sqlite().custos.auditLog.flush();
  t.false(sqlite().logs.text().includes(secret.slice(0, 27)), 'logs');
  const exp = await w.person.client.get(`/workspaces/${w.person.workspaceId}/audit/export`);
  t.false(exp.text.includes(secret.slice(0, 27)), 'audit export');
});

// ─── transport: Origin, Host, tokens ─────────────────────────────────────────────────────────────

for (const db of DB_KINDS) {
  const inst = (): TestCustos => instances.get(db)!;

  test(`[${db}] /mcp refuses a foreign Origin or Host with 403, whatever the token`, async (t) => {
    const person = await signup(inst());
    const { token } = await mintAgent(person);
    const port = new URL(inst().url).port;
    const good = await mcpPost(inst().url, { token });
    t.is(good.status, 200, good.text);
    const goodOrigin = await mcpPost(inst().url, { token, headers: { origin: new URL(inst().url).origin } });
    t.is(goodOrigin.status, 200, 'the service\'s own origin is accepted');
    for (const origin of ['http://evil.example', 'null', `http://127.0.0.1:${port}.evil.example`, `https://127.0.0.1:${port}`, `http://127.0.0.1:${Number(port) + 1}`]) {
      const r = await mcpPost(inst().url, { token, headers: { origin } });
      t.is(r.status, 403, origin);
      t.is(r.json?.error?.code, 'CUSTOS_ERR_ORIGIN_REFUSED', origin);
    }
    for (const host of ['evil.example', `evil.example:${port}`, `${hostname()}:${port}`, '127.0.0.1:1', `127.0.0.1:${port}.evil.example`]) {
      const r = await mcpPost(inst().url, { token, headers: { host } });
      t.is(r.status, 403, host);
      t.is(r.json?.error?.code, 'CUSTOS_ERR_ORIGIN_REFUSED', host);
    }
    // The SDK client itself is refused when a rebinding page's Origin rides along.
    await t.throwsAsync(connectAgent(inst().url, token, { Origin: 'http://evil.example' }));
  });

  test(`[${db}] /mcp: missing, malformed, unknown, expired, revoked, SSH and CI tokens get 401 with WWW-Authenticate`, async (t) => {
    const up = await startUpstream();
    t.teardown(() => up.close());
    const person = await signup(inst());
    const secret = marker('tok');
    await addCredential(person, { name: 'svc', authScheme: 'bearer', baseUrl: `${up.url}/v1`, secret: { value: secret } });

    const missing = await mcpPost(inst().url, {});
    t.is(missing.status, 401);
    t.is(missing.json.error.code, 'CUSTOS_ERR_UNAUTHENTICATED');
    t.regex(String(missing.headers['www-authenticate']), /^Bearer realm="custos"/);

    const valid = await mintAgent(person);
    const flipped = valid.token.slice(0, -1) + (valid.token.endsWith('A') ? 'B' : 'A');
    const unknown = mintToken('agent'); // right shape and checksum, never issued
    for (const [what, authorization] of [
      ['garbage bearer', 'Bearer not-a-token'],
      ['wrong checksum', `Bearer ${flipped}`],
      ['never issued', `Bearer ${unknown}`],
      ['Basic scheme', `Basic ${Buffer.from(`x:${valid.token}`).toString('base64')}`],
      ['lower-case scheme', `bearer ${valid.token}`],
      ['token with trailing junk', `Bearer ${valid.token} x`],
      ['empty bearer', 'Bearer '],
    ] as const) {
      const r = await mcpPost(inst().url, { authorization });
      t.is(r.status, 401, what);
      t.regex(r.json.error.code, /^CUSTOS_ERR_(TOKEN_INVALID|UNAUTHENTICATED)$/, what);
      t.truthy(r.headers['www-authenticate'], what);
      t.false(r.text.includes(valid.token), 'the token is never echoed');
    }

    const ssh = await person.client.post('/tokens/ssh', { name: 'laptop' });
    t.is(ssh.status, 201, ssh.text);
    const ci = await person.client.post('/tokens/ci', { name: 'pipeline', workspaceId: person.workspaceId, expiresAt: new Date(Date.now() + 3_600_000).toISOString() });
    t.is(ci.status, 201, ci.text);
    for (const other of [ssh.body.token as string, ci.body.token as string]) {
      const r = await mcpPost(inst().url, { token: other });
      t.is(r.status, 401, other.slice(0, 12));
      t.is(r.json.error.code, 'CUSTOS_ERR_TOKEN_INVALID');
      t.truthy(r.headers['www-authenticate']);
    }

    // Expired: the row's expiry passes (written through the store, as time would).
    const expiring = await mintAgent(person, { expiresAt: new Date(Date.now() + 3_600_000).toISOString() });
    const a1 = await connectAgent(inst().url, expiring.token);
    t.teardown(() => a1.close());
    t.false((await a1.call('call_api', { service: 'svc', method: 'GET', path: '/before-expiry' })).isError);
    await inst().custos.store.tx((tx) => tx.updateToken(expiring.id, { expires_at: new Date(Date.now() - 1000).toISOString() }));
    const e1 = await t.throwsAsync(a1.call('call_api', { service: 'svc', method: 'GET', path: '/after-expiry' }), { message: /CUSTOS_ERR_TOKEN_INVALID.*expired/ });
    t.is((e1 as { code?: number }).code, 401);
    const exp = await mcpPost(inst().url, { token: expiring.token });
    t.is(exp.status, 401);
    t.regex(exp.json.error.message, /expired/);

    // Revoked: refused on the very next call, on an already-open client.
    const doomed = await mintAgent(person);
    const a2 = await connectAgent(inst().url, doomed.token);
    t.teardown(() => a2.close());
    t.false((await a2.call('call_api', { service: 'svc', method: 'GET', path: '/before-revoke' })).isError);
    t.is((await person.client.del(`/tokens/agent/${doomed.id}`)).status, 204);
    const e2 = await t.throwsAsync(a2.call('call_api', { service: 'svc', method: 'GET', path: '/after-revoke' }), { message: /CUSTOS_ERR_TOKEN_INVALID.*revoked/ });
    t.is((e2 as { code?: number }).code, 401);
    const rev = await mcpPost(inst().url, { token: doomed.token });
    t.is(rev.status, 401);
    t.regex(rev.json.error.message, /revoked/);

    t.deepEqual(up.received.map((r) => r.url).sort(), ['/v1/before-expiry', '/v1/before-revoke'], 'no refused token reached the upstream');
  });

  test(`[${db}] another account's agent cannot see or use this account's services, even with the same service name`, async (t) => {
    const upA = await startUpstream();
    const upB = await startUpstream();
    t.teardown(async () => {
      await upA.close();
      await upB.close();
    });
    const alice = await signup(inst());
    const bob = await signup(inst());
    const secretA = marker('alice');
    const secretB = marker('bob');
    const aliceSvc = await addCredential(alice, { name: 'shared-name', authScheme: 'bearer', baseUrl: `${upA.url}/v1`, secret: { value: secretA } });
    await addCredential(alice, { name: 'alice-only', authScheme: 'bearer', baseUrl: `${upA.url}/v1`, secret: { value: secretA } });
    await addCredential(bob, { name: 'shared-name', authScheme: 'bearer', baseUrl: `${upB.url}/v1`, secret: { value: secretB } });
    const bobTok = await mintAgent(bob);
    const agent = await connectAgent(inst().url, bobTok.token);
    t.teardown(() => agent.close());

    const list = await agent.call('list_services');
    t.deepEqual(list.structured.services.map((s: { name: string; workspaceId: string }) => [s.name, s.workspaceId]), [['shared-name', bob.workspaceId]]);
    t.false(list.text.includes(aliceSvc));

    const same = await agent.call('call_api', { service: 'shared-name', method: 'GET', path: '/who' });
    t.false(same.isError, same.text);
    const qualified = await agent.call('call_api', { service: 'Default/shared-name', method: 'GET', path: '/who-qualified' });
    t.false(qualified.isError, qualified.text);
    t.is(upB.received.length, 2);
    t.true(upB.received.every((r) => r.headers.authorization === `Bearer ${secretB}`), "Bob's own credential, never Alice's");

    const byId = await agent.call('call_api', { service: aliceSvc, method: 'GET', path: '/steal' });
    const missingId = randomUUID();
    const nothing = await agent.call('call_api', { service: missingId, method: 'GET', path: '/steal' });
    const byName = await agent.call('call_api', { service: 'alice-only', method: 'GET', path: '/steal' });
    t.regex(byId.text, /^CUSTOS_ERR_NOT_FOUND: /);
    t.is(byId.text.replace(aliceSvc, '<id>'), nothing.text.replace(missingId, '<id>'), "Alice's service is indistinguishable from a missing one");
    t.regex(byName.text, /^CUSTOS_ERR_NOT_FOUND: /);
    for (const r of [list, same, qualified, byId, byName]) t.false(r.text.includes(secretA));
    t.is(upA.received.length, 0, "Alice's upstream (and so her credential) was never used");
  });

  // ─── scopes ────────────────────────────────────────────────────────────────────────────────────

  test(`[${db}] a read-only token (list_services + call_api, GET) cannot POST nor create_service`, async (t) => {
    const w = await world(inst(), { tools: ['list_services', 'call_api'], methods: ['GET'] });
    t.teardown(() => w.close());
    const tools = await w.agent.client.listTools();
    t.deepEqual(tools.tools.map((x) => x.name).sort(), ['call_api', 'list_services'], 'only the tools the token may call are listed');
    const get = await w.agent.call('call_api', { service: 'svc', method: 'GET', path: '/read' });
    t.false(get.isError, get.text);
    const post = await w.agent.call('call_api', { service: 'svc', method: 'POST', path: '/write', body: { a: 1 } });
    t.true(post.isError);
    t.regex(post.text, /^CUSTOS_ERR_METHOD_NOT_ALLOWED: This token may not use POST; its methods are: GET\./);
    const create = await w.agent.call('create_service', { name: 'new', baseUrl: 'https://api.example.com', authScheme: 'bearer' });
    t.true(create.isError);
    t.regex(create.text, /^CUSTOS_ERR_TOOL_NOT_ALLOWED: This agent token may not use create_service/);
    const list = await w.agent.call('list_services');
    t.deepEqual(list.structured.services.find((s: { name: string }) => s.name === 'svc').allowedMethods, ['GET']);
    t.deepEqual(w.up.received.map((r) => r.method + ' ' + r.url), ['GET /v1/read']);
    const entries = await auditOf(w.person);
    t.truthy(entries.find((e) => e.action === 'mcp.create_service' && e.outcome === 'denied' && e.details.reason === 'tool not in token scope'));
    t.truthy(denied(entries, 'CUSTOS_ERR_METHOD_NOT_ALLOWED').find((e) => e.details.method === 'POST' && e.details.path === '/write'));
    const inApp = await w.person.client.get(`/workspaces/${w.person.workspaceId}/credentials`);
    t.false(inApp.body.credentials.some((c: { name: string }) => c.name === 'new'), 'nothing was created');
  });

  test(`[${db}] a token with call_api only cannot list, and a token without call_api cannot call`, async (t) => {
    const w = await world(inst(), { tools: ['call_api'], methods: ['GET'] });
    t.teardown(() => w.close());
    const list = await w.agent.call('list_services');
    t.regex(list.text, /^CUSTOS_ERR_TOOL_NOT_ALLOWED: /);
    const tok = await mintAgent(w.person, { tools: ['list_services'], methods: ['GET'] });
    const lister = await connectAgent(inst().url, tok.token);
    t.teardown(() => lister.close());
    const call = await lister.call('call_api', { service: 'svc', method: 'GET', path: '/x' });
    t.regex(call.text, /^CUSTOS_ERR_TOOL_NOT_ALLOWED: This agent token may not use call_api/);
    t.is(w.up.received.length, 0);
  });

  test(`[${db}] a token bound to one workspace cannot see or use a service in another workspace of the same account`, async (t) => {
    const up = await startUpstream();
    t.teardown(() => up.close());
    const person = await signup(inst());
    const secret = marker('ws');
    const ws2 = await person.client.post('/workspaces', { name: `second-${tag()}` });
    t.is(ws2.status, 201, ws2.text);
    const ws2Id = ws2.body.workspace.id as string;
    await addCredential(person, { name: 'in-default', authScheme: 'bearer', baseUrl: `${up.url}/v1/default`, secret: { value: secret } });
    const otherId = await addCredential(person, { name: 'in-second', authScheme: 'bearer', baseUrl: `${up.url}/v1/second`, secret: { value: secret } }, ws2Id);
    const bound = await mintAgent(person, { workspaceId: person.workspaceId });
    const agent = await connectAgent(inst().url, bound.token);
    t.teardown(() => agent.close());
    const list = await agent.call('list_services');
    t.deepEqual(list.structured.services.map((s: { name: string }) => s.name), ['in-default']);
    for (const service of ['in-second', `${ws2.body.workspace.name}/in-second`, otherId]) {
      const r = await agent.call('call_api', { service, method: 'GET', path: '/x' });
      t.regex(r.text, /^CUSTOS_ERR_NOT_FOUND: /, service);
    }
    const create = await agent.call('create_service', { name: 'sneaky', baseUrl: 'https://api.example.com', authScheme: 'bearer', workspace: ws2Id });
    t.true(create.isError);
    t.is(up.received.length, 0);
    const ok = await agent.call('call_api', { service: 'in-default', method: 'GET', path: '/x' });
    t.false(ok.isError, ok.text);
    t.deepEqual(up.received.map((r) => r.url), ['/v1/default/x']);
  });

  test(`[${db}] a token loses a right on the next call when its creator's grant is reduced or revoked`, async (t) => {
    const up = await startUpstream();
    t.teardown(() => up.close());
    const owner = await signup(inst());
    const member = await signup(inst());
    const secret = marker('grant');
    await addCredential(owner, { name: 'team-api', authScheme: 'bearer', baseUrl: `${up.url}/v1`, secret: { value: secret } });
    const put = await owner.client.put(`/workspaces/${owner.workspaceId}/grants/${member.accountId}`, { permissions: ['read', 'use'] });
    t.is(put.status, 200, put.text);
    const tok = await mintAgent(member, { workspaceId: owner.workspaceId });
    const agent = await connectAgent(inst().url, tok.token);
    t.teardown(() => agent.close());
    const before = await agent.call('call_api', { service: 'team-api', method: 'GET', path: '/one' });
    t.false(before.isError, before.text);

    t.is((await owner.client.put(`/workspaces/${owner.workspaceId}/grants/${member.accountId}`, { permissions: ['read'] })).status, 200);
    const reduced = await agent.call('call_api', { service: 'team-api', method: 'GET', path: '/two' });
    t.regex(reduced.text, /^CUSTOS_ERR_FORBIDDEN: Using a service needs the 'use' permission/);
    const listed = await agent.call('list_services');
    t.deepEqual(listed.structured.services.find((s: { name: string }) => s.name === 'team-api').allowedMethods, [], 'read still lists it, without methods');

    t.is((await owner.client.del(`/workspaces/${owner.workspaceId}/grants/${member.accountId}`)).status, 204);
    const revoked = await agent.call('call_api', { service: 'team-api', method: 'GET', path: '/three' });
    t.regex(revoked.text, /^CUSTOS_ERR_NOT_FOUND: /);
    t.deepEqual((await agent.call('list_services')).structured.services, []);
    t.deepEqual(up.received.map((r) => r.url), ['/v1/one']);
    const entries = await auditOf(owner);
    t.truthy(denied(entries, 'CUSTOS_ERR_FORBIDDEN').find((e) => e.details.path === '/two' && e.actor.creatorId === member.accountId));
  });

  test(`[${db}] a token cannot be minted with more than its creator holds`, async (t) => {
    const owner = await signup(inst());
    const member = await signup(inst());
    await owner.client.put(`/workspaces/${owner.workspaceId}/grants/${member.accountId}`, { permissions: ['read', 'use'] });
    const more = await postAgentToken(member, { grants: { [owner.workspaceId]: ['read', 'use', 'write'] } });
    t.is(more.status, 403);
    t.is(more.body.error.code, 'CUSTOS_ERR_FORBIDDEN');
    t.regex(more.body.error.message, /you lack write/);
    const reveal = await postAgentToken(member, { grants: { [owner.workspaceId]: ['reveal'] } });
    t.is(reveal.status, 403);
    const stranger = await signup(inst());
    const foreign = await postAgentToken(stranger, { workspaceId: owner.workspaceId });
    t.is(foreign.status, 404, 'binding to a workspace one has no standing on is a not-found');
    const foreignGrant = await postAgentToken(stranger, { grants: { [owner.workspaceId]: ['read'] } });
    t.is(foreignGrant.status, 404);
    const fine = await postAgentToken(member, { grants: { [owner.workspaceId]: ['read', 'use'] } });
    t.is(fine.status, 201, fine.text);
    const listed = await member.client.get('/tokens/agent');
    t.is(listed.body.tokens.length, 1, 'the refused attempts created nothing');
  });
}

// ─── limits ──────────────────────────────────────────────────────────────────────────────────────

test('[sqlite] /mcp rate-limits per token: request N+1 in the window gets 429 with Retry-After, other tokens are unaffected', async (t) => {
  const person = await signup(limited);
  const { token } = await mintAgent(person);
  for (let i = 0; i < RATE; i++) {
    const r = await mcpPost(limited.url, { token });
    t.is(r.status, 200, `request ${i + 1}`);
  }
  const over = await mcpPost(limited.url, { token });
  t.is(over.status, 429);
  t.is(over.json.error.code, 'CUSTOS_ERR_RATE_LIMITED');
  const retry = Number(over.headers['retry-after']);
  t.true(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${over.headers['retry-after']}`);
  const other = await mintAgent(person);
  t.is((await mcpPost(limited.url, { token: other.token })).status, 200, 'the limit is per token');
});

test('[sqlite] /mcp caps the request body: 413 before anything is parsed', async (t) => {
  const person = await signup(limited);
  const { token } = await mintAgent(person);
  const big = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'call_api', arguments: { service: 'x', method: 'POST', path: '/x', body: 'A'.repeat(BODY_LIMIT * 2) } } };
  const r = await mcpPost(limited.url, { token, body: big });
  t.is(r.status, 413);
  t.is(r.json.error.code, 'CUSTOS_ERR_BODY_TOO_LARGE');
  const small = await mcpPost(limited.url, { token });
  t.is(small.status, 200);
  const notJson = await rawHttp(`${limited.url}/mcp`, { body: 'a=1', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json, text/event-stream' } });
  t.is(notJson.status, 415);
});
