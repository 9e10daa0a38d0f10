import test from 'ava';
import { createServer, type Server } from 'node:http';
import { CustosError } from '../../src/errors.ts';
import { HttpSignerClient, checkSshToken, parseServiceUrl } from '../../src/ssh/service-client.ts';
import { freePort } from '../support/sshd.ts';
import { randomToken } from './helpers.ts';

interface Seen { url: string; auth: string | undefined; body: string }

async function server(t: import('ava').ExecutionContext, handler: (seen: Seen, res: import('node:http').ServerResponse) => void) {
  const seen: Seen[] = [];
  const s: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const entry = { url: req.url ?? '', auth: req.headers.authorization, body: Buffer.concat(chunks).toString() };
    seen.push(entry);
    handler(entry, res);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => { s.closeAllConnections(); s.close(); });
  return { url: `http://127.0.0.1:${(s.address() as { port: number }).port}`, seen };
}

function json(res: import('node:http').ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

test('listIdentities and sign speak the contract: bearer token, base64 fields, flags', async (t) => {
  const token = randomToken();
  const blob = Buffer.from('blob-bytes');
  const { url, seen } = await server(t, (s, res) => {
    if (s.url === '/api/v1/ssh/identities') json(res, 200, { identities: [{ keyBlob: blob.toString('base64'), comment: 'prod\nkey', fingerprint: 'SHA256:x', credentialId: 'c1' }] });
    else json(res, 200, { signature: Buffer.from('sig-blob').toString('base64') });
  });
  const c = new HttpSignerClient({ baseUrl: url, token });
  t.deepEqual(await c.listIdentities(), [{ keyBlob: blob, comment: 'prod key' }]);
  t.deepEqual(await c.sign(blob, Buffer.from('data'), 2), Buffer.from('sig-blob'));
  t.is(seen[0]!.auth, `Bearer ${token}`);
  t.deepEqual(JSON.parse(seen[0]!.body), {});
  t.is(seen[1]!.url, '/api/v1/ssh/sign');
  t.deepEqual(JSON.parse(seen[1]!.body), { keyBlob: blob.toString('base64'), data: Buffer.from('data').toString('base64'), flags: 2 });
});

test('a base URL with a path prefix is respected', async (t) => {
  const { url, seen } = await server(t, (_s, res) => json(res, 200, { identities: [] }));
  await new HttpSignerClient({ baseUrl: `${url}/custos`, token: randomToken() }).listIdentities();
  t.is(seen[0]!.url, '/custos/api/v1/ssh/identities');
});

test('401, 403, 404 and 503 become CustosErrors with a clear message that never contains the token', async (t) => {
  const token = randomToken();
  let status = 401;
  const { url } = await server(t, (_s, res) => json(res, status, { error: { code: status === 401 ? 'CUSTOS_ERR_TOKEN_INVALID' : status === 404 ? 'CUSTOS_ERR_NOT_FOUND' : 'CUSTOS_ERR_UNAVAILABLE', message: `echo ${token}` } }));
  const c = new HttpSignerClient({ baseUrl: url, token });
  const expect: Record<number, RegExp> = { 401: /refused the SSH token/, 403: /denied/, 404: /does not know this key/, 503: /failed the sign request/ };
  for (const s of [401, 403, 404, 503]) {
    status = s;
    const err = (await t.throwsAsync(c.sign(Buffer.from('k'), Buffer.from('d'), 0), { instanceOf: CustosError })) as CustosError;
    t.regex(err.message, expect[s]!);
    t.true(err.message.includes(`HTTP ${s}`));
    t.false(err.message.includes(token), 'token must be scrubbed even if the service echoed it');
  }
});

test('an unreachable service is CUSTOS_ERR_UNAVAILABLE; a hanging one times out', async (t) => {
  const port = await freePort();
  const c = new HttpSignerClient({ baseUrl: `http://127.0.0.1:${port}`, token: randomToken() });
  const err = (await t.throwsAsync(c.listIdentities(), { instanceOf: CustosError })) as CustosError;
  t.is(err.code, 'CUSTOS_ERR_UNAVAILABLE');
  t.regex(err.message, /unreachable \(ECONNREFUSED\)/);
  const { url } = await server(t, () => { /* never answers */ });
  const slow = new HttpSignerClient({ baseUrl: url, token: randomToken(), timeoutMs: 200 });
  const e2 = (await t.throwsAsync(slow.listIdentities(), { instanceOf: CustosError })) as CustosError;
  t.is(e2.code, 'CUSTOS_ERR_UPSTREAM_TIMEOUT');
});

test('redirects are not followed (the bearer token is never replayed elsewhere)', async (t) => {
  const token = randomToken();
  const other = await server(t, (_s, res) => json(res, 200, { identities: [] }));
  const { url } = await server(t, (_s, res) => { res.writeHead(307, { location: `${other.url}/api/v1/ssh/identities` }); res.end(); });
  await t.throwsAsync(new HttpSignerClient({ baseUrl: url, token }).listIdentities(), { instanceOf: CustosError });
  t.is(other.seen.length, 0);
});

test('malformed service answers are refused', async (t) => {
  let body: unknown = { identities: 'nope' };
  const { url } = await server(t, (_s, res) => json(res, 200, body));
  const c = new HttpSignerClient({ baseUrl: url, token: randomToken() });
  await t.throwsAsync(c.listIdentities(), { message: /unexpected identities answer/ });
  body = { identities: [{ comment: 'no blob' }] };
  await t.throwsAsync(c.listIdentities(), { message: /unexpected identities answer/ });
  body = { nothing: true };
  await t.throwsAsync(c.sign(Buffer.from('k'), Buffer.from('d'), 0), { message: /unexpected sign answer/ });
});

test('token shape and URL are checked without echoing the token', (t) => {
  t.notThrows(() => checkSshToken(randomToken()));
  for (const bad of [undefined, '', 'custos_agent_abcdefghijklmnopqrstuvwxyz0123456789', 'custos_ssh_short', 'custos_ssh_MARKER-with-dash-abcdefghijklmnopqrstuvwxyz']) {
    const err = t.throws(() => checkSshToken(bad), { instanceOf: CustosError }) as CustosError;
    t.is(err.code, 'CUSTOS_ERR_VALIDATION');
    if (bad) t.false(err.message.includes(bad));
  }
  t.is(parseServiceUrl('https://custos.example.com/base').pathname, '/base');
  for (const bad of [undefined, 'not a url', 'ftp://x', 'https://user:MARKER-pw@custos.example.com']) {
    const err = t.throws(() => parseServiceUrl(bad), { instanceOf: CustosError }) as CustosError;
    t.false(err.message.includes('MARKER'));
  }
});
