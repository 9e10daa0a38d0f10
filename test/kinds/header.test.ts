import test from 'ava';
import { ActorCache } from '../../src/actors/actor-cache.ts';
import { CustosError } from '../../src/errors.ts';
import { silentLogger } from '../../src/log.ts';
import type { KindContext, OutboundRequest } from '../../src/kinds/credential-kind.ts';
import { injectorConformance } from '../../src/kinds/conformance.ts';
import { headerKind } from '../../src/kinds/header/index.ts';

const REFUSED = ['Host', 'cookie', 'Set-Cookie', 'content-length', 'Content-Type', 'transfer-encoding', 'connection', 'upgrade',
  'te', 'expect', 'proxy-authorization', 'X-Forwarded-For', 'forwarded', 'sec-fetch-site', 'x-amz-security-token'];

test(injectorConformance, {
  kind: headerKind,
  secret: (marker) => ({ value: `${marker}-header` }),
  badConfigs: [{}, { headerName: '' }, { headerName: 'x api key' }, { headerName: 'x-key\r\nx-evil' }, { headerName: 'x:y' },
    ...REFUSED.map((headerName) => ({ headerName })), { headerName: 'x-api-key', extra: 1 }, { headerName: 'x-api-key', valuePrefix: 'two words' }],
  arrange: async (marker) => ({ config: { headerName: 'X-Api-Key' }, onWire: `${marker}-header` }),
});

const ctx = (): KindContext => ({ workspaceId: 'ws', credentialId: 'c', cache: new ActorCache().scope('c'), log: silentLogger(), now: Date.now });
const req = (): OutboundRequest => ({ method: 'GET', url: new URL('https://api.example.test/'), headers: {}, body: undefined });

test('header config lower-cases the header name and refuses framing, Host, cookie and proxy headers', (t) => {
  t.deepEqual(headerKind.configSchema.parse({ headerName: 'PRIVATE-TOKEN' }), { headerName: 'private-token' });
  for (const headerName of REFUSED) {
    const r = headerKind.configSchema.safeParse({ headerName });
    t.false(r.success, headerName);
    if (!r.success) t.regex(r.error.issues[0]!.message, /cannot carry a credential/);
  }
});

test('header sets the named header, with the optional scheme word', async (t) => {
  const plain = req();
  await headerKind.inject(plain, { value: Buffer.from('k-123') }, headerKind.configSchema.parse({ headerName: 'x-api-key' }), ctx());
  t.deepEqual(plain.headers, { 'x-api-key': 'k-123' });
  const prefixed = req();
  await headerKind.inject(prefixed, { value: Buffer.from('k-123') }, headerKind.configSchema.parse({ headerName: 'Authorization', valuePrefix: 'Token' }), ctx());
  t.deepEqual(prefixed.headers, { authorization: 'Token k-123' });
});

test('header re-validates stored config at use time (a tampered row cannot target Host)', async (t) => {
  const r = req();
  const err = await t.throwsAsync(headerKind.inject(r, { value: Buffer.from('k') }, { headerName: 'host' }, ctx()), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_VALIDATION');
  t.deepEqual(r.headers, {});
});

test('header refuses a stored value with CR/LF without echoing it', async (t) => {
  const err = await t.throwsAsync(
    headerKind.inject(req(), { value: Buffer.from('MARKER\r\nx: y') }, { headerName: 'x-api-key' }, ctx()),
    { instanceOf: CustosError },
  );
  t.false(err?.message.includes('MARKER'));
});
