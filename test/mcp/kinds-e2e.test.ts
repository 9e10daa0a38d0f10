/**
 * SigV4 and OAuth2 injection end to end: the official MCP SDK client → /mcp on the running service
 * → workspace actor → kind → broker → a real upstream on 127.0.0.1. SigV4 is checked on the upstream
 * by an independent verifier (@smithy/signature-v4); OAuth2 runs against a real authorization server
 * (oauth2-mock-server) on 127.0.0.1. Both databases: the OAuth2 refresh lock differs between them.
 */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DB_KINDS, startCustos, type DbKind, type TestCustos } from '../support/custos.ts';
import { connectAgent } from '../support/mcp.ts';
import { startUpstream } from '../support/upstream.ts';
import { addCredential, auditOf, marker, mintAgent, signup } from '../support/mcp-fixtures.ts';
import { startRecordingUpstream } from '../../src/kinds/conformance.ts';
import { verifySigv4 } from '../kinds/support/sigv4-verifier.ts';
import { startAuthServer, type AuthServer, type AuthServerOptions } from '../kinds/support/auth-server.ts';

const instances = new Map<DbKind, TestCustos>();
test.before(async () => {
  for (const db of DB_KINDS) instances.set(db, await startCustos(db));
});
test.after.always(async () => {
  for (const i of instances.values()) await i.close();
});

/**
 * A slow path to the token endpoint: every token request is held for `delayMs` before it is
 * forwarded, so concurrent calls really do overlap the refresh (a broken single-flight would then
 * show as several token requests, not hide behind a fast server).
 */
async function slowProxy(target: string, delayMs: number): Promise<{ url: string; close(): Promise<void> }> {
  const to = new URL(target);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => setTimeout(() => {
      const fwd = httpRequest({ host: to.hostname, port: to.port, path: req.url, method: req.method, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      fwd.on('error', () => res.destroy());
      fwd.end(Buffer.concat(chunks));
    }, delayMs));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${to.pathname}`,
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}

/** Everything that must never come out: marker secrets and every token the auth server issued. */
async function assertNowhere(t: import('ava').ExecutionContext, inst: TestCustos, person: Awaited<ReturnType<typeof signup>>, values: string[], results: string[]): Promise<void> {
  await inst.custos.auditLog.flush();
  const logs = inst.logs.text();
  const exp = await person.client.get(`/workspaces/${person.workspaceId}/audit/export`);
  t.is(exp.status, 200);
  for (const v of values) {
    t.false(logs.includes(v), `logs contain ${v.slice(0, 14)}…`);
    t.false(exp.text.includes(v), `audit export contains ${v.slice(0, 14)}…`);
    for (const r of results) t.false(r.includes(v), `a tool result contains ${v.slice(0, 14)}…`);
  }
}

for (const db of DB_KINDS) {
  const inst = (): TestCustos => instances.get(db)!;

  test(`[${db}] sigv4: GET with a query and POST with a body are signed at call time and verify with @smithy/signature-v4 on the upstream`, async (t) => {
    const creds = { accessKeyId: `AKID${randomBytes(8).toString('hex').toUpperCase()}`, secretAccessKey: marker('sak') };
    const scope = { region: 'eu-west-1', service: 'execute-api' };
    const verdicts: Array<{ url: string; ok: boolean; reason: string }> = [];
    const up = await startRecordingUpstream(async (req, res) => {
      const v = await verifySigv4(req, { ...creds, ...scope });
      verdicts.push({ url: req.url, ...v });
      res.writeHead(v.ok ? 200 : 403, { 'content-type': 'application/json' });
      // An echoing upstream: the key id travels in Authorization and must be scrubbed on the way back.
      res.end(JSON.stringify({ verified: v.ok, headers: req.headers, body: req.body.toString('utf8') }));
    });
    t.teardown(() => up.close());
    const person = await signup(inst());
    await addCredential(person, { name: 'aws-api', authScheme: 'sigv4', baseUrl: new URL('/prod', up.url).toString(), config: scope, secret: creds });
    const tok = await mintAgent(person, { methods: ['GET', 'POST'] });
    const agent = await connectAgent(inst().url, tok.token);
    t.teardown(() => agent.close());

    const query = '/objects/a b/é?b=2&a=1&q=hello%20world&plus=a%2Bb&star=*&repeat=2&repeat=1&empty=';
    const get = await agent.call('call_api', { service: 'aws-api', method: 'GET', path: query, headers: { accept: 'application/json' } });
    t.false(get.isError, get.text);
    t.is(get.structured.status, 200, get.text);
    t.true(get.structured.body.verified);

    const body = { TableName: 'items', Key: { id: { S: 'é 1' } } };
    const post = await agent.call('call_api', { service: 'aws-api', method: 'POST', path: '/', body, headers: { 'content-type': 'application/x-amz-json-1.0' } });
    t.false(post.isError, post.text);
    t.is(post.structured.status, 200, post.text);
    const raw = await agent.call('call_api', { service: 'aws-api', method: 'POST', path: '/raw?x=1', body: 'plain text body' });
    t.is(raw.structured.status, 200, raw.text);

    t.is(verdicts.length, 3);
    t.true(verdicts.every((v) => v.ok), JSON.stringify(verdicts));
    const [g, p] = up.requests;
    t.true(g!.url.startsWith('/prod/objects/a%20b/%C3%A9?'), g!.url);
    t.regex(String(g!.headers.authorization), new RegExp(`^AWS4-HMAC-SHA256 Credential=${creds.accessKeyId}/\\d{8}/eu-west-1/execute-api/aws4_request`));
    t.deepEqual(JSON.parse(p!.body.toString('utf8')), body);
    // Signed at call time: x-amz-date is within the test's window (not a cached or stale signature).
    const amz = String(g!.headers['x-amz-date']);
    const signedAt = Date.parse(`${amz.slice(0, 4)}-${amz.slice(4, 6)}-${amz.slice(6, 8)}T${amz.slice(9, 11)}:${amz.slice(11, 13)}:${amz.slice(13, 15)}Z`);
    t.true(Math.abs(Date.now() - signedAt) < 10 * 60_000);
    // Negative controls: the verifier does reject a wrong key and a tampered body.
    t.false((await verifySigv4(g!, { ...creds, secretAccessKey: 'wrong-secret-key', ...scope })).ok);
    t.false((await verifySigv4({ ...p!, body: Buffer.from('{"TableName":"other"}') }, { ...creds, ...scope })).ok);
    // The secret access key never goes on the wire; the key id does, and is scrubbed from echoes.
    for (const r of up.requests) t.false(JSON.stringify(r.headers).includes(creds.secretAccessKey) || r.body.includes(creds.secretAccessKey));
    t.true(JSON.stringify(get.structured.body.headers).includes('[redacted]'));
    await assertNowhere(t, inst(), person, [creds.secretAccessKey, creds.accessKeyId], [get.text, post.text, raw.text]);
  });

  interface OauthWorld {
    auth: AuthServer;
    issued: string[];
    person: Awaited<ReturnType<typeof signup>>;
    credentialId: string;
    secret: { clientId: string; clientSecret: string; refreshToken: string };
    up: Awaited<ReturnType<typeof startUpstream>>;
    agent: Awaited<ReturnType<typeof connectAgent>>;
    rotated: string[];
    close(): Promise<void>;
  }

  async function oauthWorld(opts: Partial<AuthServerOptions> & { skew?: number; delayTokenMs?: number } = {}): Promise<OauthWorld> {
    const secret = { clientId: `client-${randomBytes(4).toString('hex')}`, clientSecret: marker('cs'), refreshToken: marker('rt') };
    const issued: string[] = [];
    const auth = await startAuthServer({
      ...secret, rotate: true, expiresIn: 3600, ...opts,
      accessToken: (n) => {
        const at = marker(`at${n}`);
        issued.push(at);
        return at;
      },
    });
    const proxy = opts.delayTokenMs ? await slowProxy(auth.tokenUrl, opts.delayTokenMs) : null;
    const up = await startUpstream();
    const person = await signup(inst());
    const credentialId = await addCredential(person, {
      name: 'oauth-api', authScheme: 'oauth2', baseUrl: `${up.url}/api`,
      config: { tokenUrl: proxy?.url ?? auth.tokenUrl, scopes: ['read:items'], ...(opts.skew !== undefined ? { expirySkewSeconds: opts.skew } : {}) }, secret,
    });
    const tok = await mintAgent(person, { methods: ['GET', 'POST'] });
    const agent = await connectAgent(inst().url, tok.token);
    return {
      auth, issued, person, credentialId, secret, up, agent, rotated: [],
      async close() {
        await agent.close();
        await up.close();
        await proxy?.close();
        await auth.stop();
      },
    };
  }

  test(`[${db}] oauth2: the upstream sees Bearer <access token>; 50 parallel calls with no cached token cause exactly one token request`, async (t) => {
    const w = await oauthWorld({ delayTokenMs: 400 });
    t.teardown(() => w.close());
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => w.agent.call('call_api', { service: 'oauth-api', method: 'GET', path: `/p/${i}` })));
    t.is(w.auth.tokenRequests, 1, 'one refresh shared by all 50 calls');
    t.true(results.every((r) => !r.isError && r.structured.status === 200), results.find((r) => r.isError)?.text ?? '');
    t.is(w.up.received.length, 50);
    t.true(w.up.received.every((r) => r.headers.authorization === `Bearer ${w.issued[0]}`));
    const seen = w.auth.seen[0]!;
    t.is(seen.body.grant_type, 'refresh_token');
    t.is(seen.body.refresh_token, w.secret.refreshToken);
    t.is(seen.body.scope, 'read:items');
    t.true(results.every((r) => r.structured.body.headers.authorization === 'Bearer [redacted]'), 'the echoed access token is scrubbed');
    // The cached token serves later calls with no new token request.
    const later = await w.agent.call('call_api', { service: 'oauth-api', method: 'POST', path: '/later', body: { a: 1 } });
    t.false(later.isError, later.text);
    t.is(w.auth.tokenRequests, 1);
    await assertNowhere(t, inst(), w.person, [w.secret.clientSecret, w.secret.refreshToken, w.auth.validRefreshToken, ...w.issued], [...results.map((r) => r.text), later.text]);
  });

  test(`[${db}] oauth2: a rotated refresh token is persisted encrypted and the next refresh uses it`, async (t) => {
    // expires_in 1 s with no skew: the access token is cached for 1 s, so the second call refreshes.
    const w = await oauthWorld({ expiresIn: 1, skew: 0 });
    t.teardown(() => w.close());
    const rowSecret = async (): Promise<string> => (await inst().custos.store.read.findCredential(w.credentialId))!.secret!;
    const before = await rowSecret();
    const first = await w.agent.call('call_api', { service: 'oauth-api', method: 'GET', path: '/one' });
    t.false(first.isError, first.text);
    t.is(w.auth.tokenRequests, 1);
    const rt1 = w.auth.validRefreshToken;
    t.not(rt1, w.secret.refreshToken, 'the server rotated the refresh token');
    const afterFirst = await rowSecret();
    t.not(afterFirst, before, 'the credential row now holds the rotated refresh token');
    t.false(afterFirst.includes(rt1), 'stored encrypted, not in plaintext');

    await new Promise((r) => setTimeout(r, 1200)); // let the 1 s access token expire
    const second = await w.agent.call('call_api', { service: 'oauth-api', method: 'GET', path: '/two' });
    t.false(second.isError, second.text);
    t.is(w.auth.tokenRequests, 2);
    t.is(w.auth.seen[1]!.body.refresh_token, rt1, 'the later refresh presented the rotated token (the old one is dead at the server)');
    t.not(await rowSecret(), afterFirst, 'and the second rotation was persisted too');
    t.deepEqual(w.up.received.map((r) => r.headers.authorization), [`Bearer ${w.issued[0]}`, `Bearer ${w.issued[1]}`]);
    const rotations = (await auditOf(w.person)).filter((e) => e.action === 'credential.oauth2.rotate' && e.target.id === w.credentialId);
    t.is(rotations.length, 2);
    t.deepEqual(rotations[0]!.details.fields, ['refreshToken']);
    await assertNowhere(t, inst(), w.person, [w.secret.clientSecret, w.secret.refreshToken, rt1, w.auth.validRefreshToken, ...w.issued], [first.text, second.text]);
  });

  test(`[${db}] oauth2: a refused refresh (invalid_grant) tells a person to re-authorise, marks the credential, and a new secret clears it`, async (t) => {
    const w = await oauthWorld();
    t.teardown(() => w.close());
    w.auth.forceError = { status: 400, body: { error: 'invalid_grant', error_description: 'refresh token revoked' } };
    const r = await w.agent.call('call_api', { service: 'oauth-api', method: 'GET', path: '/x' });
    t.true(r.isError);
    t.regex(r.text, /^CUSTOS_ERR_REAUTH_REQUIRED: OAuth2 refresh failed: a person must re-authorise this credential \(the token endpoint answered invalid_grant\)/);
    const view = await w.person.client.get(`/credentials/${w.credentialId}`);
    t.is(view.status, 200);
    t.is(view.body.credential.health, 'reauth_required');
    t.is(view.body.credential.healthReason, 'invalid_grant');
    const listed = await w.agent.call('list_services');
    t.is(listed.structured.services[0].health, 'reauth_required');
    // While it is marked, calls are refused up front: no hammering of the token endpoint.
    const again = await w.agent.call('call_api', { service: 'oauth-api', method: 'GET', path: '/y' });
    t.regex(again.text, /^CUSTOS_ERR_REAUTH_REQUIRED: Service 'oauth-api' needs a person to re-authorise it .*supply a new secret in the Custos app/);
    t.is(w.auth.tokenRequests, 1);
    t.is(w.up.received.length, 0);
    const entries = await auditOf(w.person);
    t.truthy(entries.find((e) => e.action === 'credential.health' && e.details.health === 'reauth_required'));
    t.truthy(entries.find((e) => e.action === 'mcp.call_api' && e.details.code === 'CUSTOS_ERR_REAUTH_REQUIRED'));

    // The person re-authorises: a new refresh token is supplied; the state clears and calls work.
    w.auth.forceError = undefined;
    const fresh = marker('rt-new');
    w.auth.validRefreshToken = fresh;
    const put = await w.person.client.put(`/credentials/${w.credentialId}/secret`, { secret: { ...w.secret, refreshToken: fresh } });
    t.is(put.status, 200, put.text);
    t.is(put.body.credential.health, 'ok');
    const ok = await w.agent.call('call_api', { service: 'oauth-api', method: 'GET', path: '/z' });
    t.false(ok.isError, ok.text);
    t.is(w.auth.seen.at(-1)!.body.refresh_token, fresh);
    t.is((await w.person.client.get(`/credentials/${w.credentialId}`)).body.credential.health, 'ok');
    await assertNowhere(t, inst(), w.person, [w.secret.clientSecret, w.secret.refreshToken, fresh, w.auth.validRefreshToken, ...w.issued], [r.text, again.text, ok.text, listed.text]);
  });
}
