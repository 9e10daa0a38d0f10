import test from 'ava';
import { ActorCache } from '../../src/actors/actor-cache.ts';
import { CustosError } from '../../src/errors.ts';
import { createLogger } from '../../src/log.ts';
import type { KindContext, OutboundRequest } from '../../src/kinds/credential-kind.ts';
import { captureLog, injectorConformance, sendOutbound, startRecordingUpstream } from '../../src/kinds/conformance.ts';
import { oauth2Kind, type Oauth2Config } from '../../src/kinds/oauth2/index.ts';
import { startAuthServer, type AuthServer, type AuthServerOptions } from './support/auth-server.ts';
import { MemoryRefreshPort } from './support/memory-refresh-port.ts';

test(injectorConformance, {
  kind: oauth2Kind,
  secret: (marker) => ({ clientId: `${marker}-client`, clientSecret: `${marker}-client-secret`, refreshToken: `${marker}-refresh` }),
  neverOnWire: ['clientId', 'clientSecret', 'refreshToken'],
  badConfigs: [
    {},
    { tokenUrl: 'ftp://127.0.0.1/token' },
    { tokenUrl: 'http://auth.example.com/token' },
    { tokenUrl: 'https://user:pw@auth.example.com/token' },
    { tokenUrl: 'https://auth.example.com/token#x' },
    { tokenUrl: 'not a url' },
    { tokenUrl: 'https://auth.example.com/token', scopes: 'a b' },
    { tokenUrl: 'https://auth.example.com/token', scopes: ['a b'] },
    { tokenUrl: 'https://auth.example.com/token', authStyle: 'query' },
    { tokenUrl: 'https://auth.example.com/token', expirySkewSeconds: -1 },
    { tokenUrl: 'https://auth.example.com/token', clientSecret: 'x' },
  ],
  arrange: async (marker) => {
    const server = await startAuthServer({
      clientId: `${marker}-client`,
      clientSecret: `${marker}-client-secret`,
      refreshToken: `${marker}-refresh`,
      accessToken: () => `${marker}-access`,
    });
    const refresh = new MemoryRefreshPort({ clientId: `${marker}-client`, clientSecret: `${marker}-client-secret`, refreshToken: `${marker}-refresh` });
    return { config: { tokenUrl: server.tokenUrl, scopes: ['read', 'write'] }, refresh, onWire: `${marker}-access`, teardown: () => server.stop() };
  },
});

const SECRET = { clientId: 'client-1', clientSecret: 'MARKER-client-secret-7f3a', refreshToken: 'MARKER-refresh-token-91c2' };

interface World {
  server: AuthServer;
  port: MemoryRefreshPort;
  root: ActorCache;
  clock: { now: number };
  ctx: KindContext;
  config: Oauth2Config;
  log: ReturnType<typeof captureLog>;
}

async function world(t: { teardown(fn: () => unknown): void }, opts: Partial<AuthServerOptions> = {}, config: Partial<Oauth2Config> = {}): Promise<World> {
  const server = await startAuthServer({ ...SECRET, ...opts });
  t.teardown(() => server.stop());
  const port = new MemoryRefreshPort(SECRET);
  const clock = { now: Date.UTC(2024, 0, 1) };
  const root = new ActorCache({ now: () => clock.now });
  const log = captureLog();
  const ctx: KindContext = {
    workspaceId: `ws-${Math.random()}`,
    credentialId: 'cred-oauth',
    cache: root.scope('cred-oauth'),
    log: createLogger({ level: 'trace', destination: log.destination }),
    now: () => clock.now,
    refresh: port,
  };
  return { server, port, root, clock, ctx, log, config: oauth2Kind.configSchema.parse({ tokenUrl: server.tokenUrl, ...config }) };
}

const fields = (s: Record<string, string> = SECRET) => Object.fromEntries(Object.entries(s).map(([k, v]) => [k, Buffer.from(v)]));
const req = (): OutboundRequest => ({ method: 'GET', url: new URL('https://api.example.test/v1/me'), headers: {}, body: undefined });

test('oauth2 refreshes with client credentials in a Basic header by default, and sends the scopes', async (t) => {
  const w = await world(t, {}, { scopes: ['read', 'mail.send'] });
  const r = req();
  const scrub = await oauth2Kind.inject(r, fields(), w.config, w.ctx);
  t.is(w.server.tokenRequests, 1);
  const seen = w.server.seen[0]!;
  t.regex(String(seen.authorization), /^Basic /);
  t.is(seen.body.client_secret, undefined);
  t.is(seen.body.grant_type, 'refresh_token');
  t.is(seen.body.scope, 'read mail.send');
  t.regex(r.headers.authorization!, /^Bearer at-1-/);
  t.true(scrub.some((b) => r.headers.authorization!.endsWith(b.toString())), 'the access token is returned for scrubbing');
  t.true(scrub.some((b) => b.toString() === SECRET.clientSecret) && scrub.some((b) => b.toString() === SECRET.refreshToken));
  t.is(w.port.health, 'ok');
});

test('oauth2 authStyle body sends the client credentials in the form body instead', async (t) => {
  const w = await world(t, {}, { authStyle: 'body' });
  await oauth2Kind.inject(req(), fields(), w.config, w.ctx);
  const seen = w.server.seen[0]!;
  t.is(seen.authorization, undefined);
  t.is(seen.body.client_id, SECRET.clientId);
  t.is(seen.body.client_secret, SECRET.clientSecret);
});

test('oauth2 caches the access token until the skew before expiry (60 s default, configurable)', async (t) => {
  const w = await world(t, { expiresIn: 3600 });
  const start = w.clock.now;
  await oauth2Kind.inject(req(), fields(), w.config, w.ctx);
  w.clock.now = start + 3539_000;
  await oauth2Kind.inject(req(), fields(), w.config, w.ctx);
  t.is(w.server.tokenRequests, 1, 'still cached 61 s before expiry');
  w.clock.now = start + 3541_000;
  await oauth2Kind.inject(req(), fields(), w.config, w.ctx);
  t.is(w.server.tokenRequests, 2, 'refreshed 59 s before expiry');

  const w2 = await world(t, { expiresIn: 3600 }, { expirySkewSeconds: 600 });
  const s2 = w2.clock.now;
  await oauth2Kind.inject(req(), fields(), w2.config, w2.ctx);
  w2.clock.now = s2 + 3001_000;
  await oauth2Kind.inject(req(), fields(), w2.config, w2.ctx);
  t.is(w2.server.tokenRequests, 2, 'a 600 s skew refreshes 599 s before expiry');
});

test('50 parallel calls with an expired token cause exactly one token request', async (t) => {
  const w = await world(t);
  const upstream = await startRecordingUpstream();
  t.teardown(() => upstream.close());
  await oauth2Kind.inject(req(), fields(), w.config, w.ctx);
  t.is(w.server.tokenRequests, 1);
  w.clock.now += 2 * 3600_000; // the cached token is now expired
  const reqs = Array.from({ length: 50 }, (_, i): OutboundRequest => ({ method: 'GET', url: new URL(`item/${i}`, upstream.url), headers: {}, body: undefined }));
  await Promise.all(reqs.map((r) => oauth2Kind.inject(r, fields(), w.config, w.ctx)));
  t.is(w.server.tokenRequests, 2, 'one refresh for 50 concurrent calls');
  await Promise.all(reqs.map((r) => sendOutbound(r)));
  const tokens = new Set(upstream.requests.map((r) => r.headers.authorization));
  t.is(tokens.size, 1, 'all 50 calls carried the same fresh token');
  t.regex([...tokens][0]!, /^Bearer at-2-/);
  t.is(w.port.events.filter((e) => e === 'lock').length, 2);
});

test('a rotated refresh token is persisted before the new access token is used', async (t) => {
  const w = await world(t, { rotate: true });
  let cachedAtPersist = -1;
  w.port.onPersist = () => {
    cachedAtPersist = w.root.scope('cred-oauth').size;
  };
  const r = req();
  await oauth2Kind.inject(r, fields(), w.config, w.ctx);
  t.is(cachedAtPersist, 0, 'no access token was usable while the rotated refresh token was being persisted');
  t.deepEqual(w.port.events, ['lock', 'persist:refreshToken', 'health:ok', 'commit', 'unlock']);
  t.is(w.port.stored('refreshToken'), w.server.validRefreshToken, 'the stored refresh token is the one the server now accepts');
  t.not(w.port.stored('refreshToken'), SECRET.refreshToken);
  // The next refresh must use the rotated token (the old one is dead at the server).
  w.clock.now += 2 * 3600_000;
  await oauth2Kind.inject(req(), fields(), w.config, w.ctx);
  t.is(w.server.tokenRequests, 2);
  t.is(w.port.health, 'ok');
  t.true(w.port.handedOut.every((b) => b.every((x) => x === 0)), 'fresh secret Buffers are zeroed after the refresh');
});

test('a failed persist of the rotated refresh token means the new access token is never used', async (t) => {
  const w = await world(t, { rotate: true });
  w.port.failPersist = true;
  const r = req();
  await t.throwsAsync(oauth2Kind.inject(r, fields(), w.config, w.ctx));
  t.is(r.headers.authorization, undefined);
  t.is(w.root.scope('cred-oauth').size, 0);
});

test('a server that keeps the refresh token (no rotation) persists nothing', async (t) => {
  const w = await world(t, { rotate: false });
  await oauth2Kind.inject(req(), fields(), w.config, w.ctx);
  t.deepEqual(w.port.events, ['lock', 'health:ok', 'commit', 'unlock']);
  t.is(w.port.stored('refreshToken'), SECRET.refreshToken);
});

test('invalid_grant marks the credential reauth_required and tells a person to re-authorise, without secrets', async (t) => {
  const w = await world(t);
  w.server.validRefreshToken = 'some-other-token';
  const r = req();
  const err = await t.throwsAsync(oauth2Kind.inject(r, fields(), w.config, w.ctx), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_REAUTH_REQUIRED');
  t.is(err?.status, 409);
  t.regex(err!.message, /^OAuth2 refresh failed: a person must re-authorise this credential/);
  t.deepEqual(err?.details, { reason: 'invalid_grant' });
  t.is(w.port.health, 'reauth_required', 'the health change committed although the call failed');
  t.is(w.port.healthReason, 'invalid_grant');
  t.is(r.headers.authorization, undefined);
  const everything = `${err!.message} ${JSON.stringify(err)} ${w.log.text()}`;
  t.false(everything.includes('MARKER'), 'no secret in the error or the log');
});

test('invalid_client (401) also requires re-authorisation', async (t) => {
  const w = await world(t);
  const wrong = { ...SECRET, clientSecret: 'MARKER-wrong-secret' };
  w.port = new MemoryRefreshPort(wrong);
  w.ctx.refresh = w.port;
  const err = await t.throwsAsync(oauth2Kind.inject(req(), fields(wrong), w.config, w.ctx), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_REAUTH_REQUIRED');
  t.is(w.port.healthReason, 'invalid_client');
  t.false(err!.message.includes('MARKER'));
});

test('a token endpoint outage is an upstream error and does not demand re-authorisation', async (t) => {
  const w = await world(t);
  w.server.forceError = { status: 503, body: { error: 'temporarily_unavailable' } };
  const err = await t.throwsAsync(oauth2Kind.inject(req(), fields(), w.config, w.ctx), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_UPSTREAM');
  t.is(w.port.health, 'unknown');
  await w.server.stop();
  const down = await t.throwsAsync(oauth2Kind.inject(req(), fields(), w.config, w.ctx), { instanceOf: CustosError });
  t.is(down?.code, 'CUSTOS_ERR_UPSTREAM');
  t.false(`${down?.message}`.includes('MARKER'));
  // Restarting is not possible on the same port object; the teardown must not fail on a stopped server.
  w.server.stop = async () => {};
});

test('two actors (two nodes) refreshing the same credential are serialised by the row lock and re-read the rotated token', async (t) => {
  const w = await world(t, { rotate: true });
  const other: KindContext = { ...w.ctx, workspaceId: `${w.ctx.workspaceId}-node2`, cache: new ActorCache({ now: () => w.clock.now }).scope('cred-oauth') };
  // Each node still holds the secret it decrypted earlier: the original refresh token.
  await Promise.all([
    oauth2Kind.inject(req(), fields(), w.config, w.ctx),
    oauth2Kind.inject(req(), fields(), w.config, other),
  ]);
  t.is(w.server.tokenRequests, 2);
  t.is(w.port.maxHolders, 1, 'never two refreshes at once');
  t.is(w.port.health, 'ok', 'the second refresh used the rotated token (no invalid_grant)');
  t.is(w.port.stored('refreshToken'), w.server.validRefreshToken);
});

test('oauth2 refuses to refresh without the actor refresh port (a rotated token could be lost)', async (t) => {
  const w = await world(t);
  const { refresh: _none, ...noPort } = w.ctx;
  const err = await t.throwsAsync(oauth2Kind.inject(req(), fields(), w.config, noPort), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_CONFIG');
  t.is(w.server.tokenRequests, 0);
});

test('oauth2 caches only the access token: not the client secret or refresh token', async (t) => {
  const w = await world(t, { accessToken: () => 'the-access-token' });
  await oauth2Kind.inject(req(), fields(), w.config, w.ctx);
  t.is(w.root.size, 1);
  const scope = w.root.scope('cred-oauth');
  // Reach the one entry through the kind's own key.
  const { accessTokenCacheKey } = await import('../../src/kinds/oauth2/index.ts');
  t.is(scope.get(accessTokenCacheKey(Buffer.from(SECRET.clientId), w.config))?.toString(), 'the-access-token');
});
