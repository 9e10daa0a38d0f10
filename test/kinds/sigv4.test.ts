import test from 'ava';
import aws4 from 'aws4';
import { ActorCache } from '../../src/actors/actor-cache.ts';
import { silentLogger } from '../../src/log.ts';
import type { ActorCache as ActorCachePort, KindContext, OutboundRequest } from '../../src/kinds/credential-kind.ts';
import { injectorConformance, sendOutbound, startRecordingUpstream, type RecordingUpstream } from '../../src/kinds/conformance.ts';
import { sigv4Kind } from '../../src/kinds/sigv4/index.ts';
import { verifySigv4, type VerifyInput } from './support/sigv4-verifier.ts';

test(injectorConformance, {
  kind: sigv4Kind,
  secret: (marker) => ({ accessKeyId: `${marker}AKID`, secretAccessKey: `${marker}/Secret+Key`, sessionToken: `${marker}SessionToken` }),
  optionalSecretFields: ['sessionToken'],
  neverOnWire: ['secretAccessKey'],
  badConfigs: [{}, { region: 'us-east-1' }, { service: 's3' }, { region: 'US EAST 1', service: 's3' }, { region: 'us-east-1', service: '' },
    { region: 'us-east-1', service: 's3\r\n' }, { region: 'us-east-1', service: 's3', bucket: 'x' }],
  arrange: async (marker) => ({ config: { region: 'eu-west-1', service: 'execute-api' }, onWire: `${marker}AKID` }),
});

const CREDS = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };

interface Harness {
  upstream: RecordingUpstream;
  ctx: KindContext;
  sets: Array<{ key: string; value: Buffer }>;
  clock: { now: number };
}

async function harness(): Promise<Harness> {
  const upstream = await startRecordingUpstream();
  const clock = { now: Date.UTC(2024, 4, 17, 23, 59, 0) };
  const root = new ActorCache({ now: () => clock.now });
  const inner = root.scope('cred-1');
  const sets: Harness['sets'] = [];
  const cache: ActorCachePort = {
    get: (k) => inner.get(k),
    delete: (k) => inner.delete(k),
    set: (key, value, exp) => {
      sets.push({ key, value });
      inner.set(key, value, exp);
    },
  };
  return { upstream, sets, clock, ctx: { workspaceId: 'ws-1', credentialId: 'cred-1', cache, log: silentLogger(), now: () => clock.now } };
}

function fields(c: { accessKeyId: string; secretAccessKey: string; sessionToken?: string }) {
  return Object.fromEntries(Object.entries(c).map(([k, v]) => [k, Buffer.from(v)]));
}

async function signSendVerify(h: Harness, req: OutboundRequest, config: { region: string; service: string }, creds: VerifyInput | typeof CREDS = CREDS) {
  await sigv4Kind.inject(req, fields(creds), config, h.ctx);
  const res = await sendOutbound(req);
  const recorded = h.upstream.requests.at(-1)!;
  const verdict = await verifySigv4(recorded, { ...creds, ...config });
  return { res, recorded, verdict };
}

test('sigv4 GET with a query needing encoding verifies with @smithy/signature-v4 on the upstream', async (t) => {
  const h = await harness();
  t.teardown(() => h.upstream.close());
  const url = new URL('v1/objects', h.upstream.url);
  url.search = '?b=2&a=1&q=hello%20world&plus=a%2Bb&amp=x%26y&star=*&tilde=~&emoji=%C3%A9t%C3%A9&repeat=2&repeat=1&empty=';
  const { res, recorded, verdict } = await signSendVerify(h, { method: 'GET', url, headers: { accept: 'application/json' }, body: undefined }, { region: 'eu-west-1', service: 'execute-api' });
  t.is(res.status, 200);
  t.true(verdict.ok, verdict.reason);
  t.is(recorded.headers['x-amz-date'], '20240517T235900Z', 'signed at call time, from the actor clock');
  t.regex(String(recorded.headers.authorization), /Credential=AKIDEXAMPLE\/20240517\/eu-west-1\/execute-api\/aws4_request/);
});

test('sigv4 POST with a JSON body verifies, and the body hash is covered', async (t) => {
  const h = await harness();
  t.teardown(() => h.upstream.close());
  const body = Buffer.from(JSON.stringify({ TableName: 'items', Key: { id: { S: 'é 1' } } }));
  const req: OutboundRequest = { method: 'POST', url: new URL('/', h.upstream.url), headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': 'DynamoDB_20120810.GetItem' }, body };
  const { verdict, recorded } = await signSendVerify(h, req, { region: 'us-west-2', service: 'dynamodb' });
  t.true(verdict.ok, verdict.reason);
  t.deepEqual(recorded.body, body);
  t.is(recorded.headers['x-amz-target'], undefined, 'agent-supplied x-amz-* headers are dropped, never signed');
  // Negative control: the same request with a changed body no longer verifies.
  const tampered = { ...recorded, body: Buffer.from(body.toString().replace('items', 'other')) };
  t.false((await verifySigv4(tampered, { ...CREDS, region: 'us-west-2', service: 'dynamodb' })).ok);
});

test('sigv4 path with encoded segments (space, slash, unicode, raw |) verifies', async (t) => {
  const h = await harness();
  t.teardown(() => h.upstream.close());
  const url = new URL('v1/objects/a%20b/c%2Fd/%C3%A9t%C3%A9/x|y/report(1).json', h.upstream.url);
  const { verdict, recorded } = await signSendVerify(h, { method: 'GET', url, headers: {}, body: undefined }, { region: 'eu-central-1', service: 'execute-api' });
  t.true(verdict.ok, verdict.reason);
  t.is(recorded.url, '/v1/objects/a%20b/c%2Fd/%C3%A9t%C3%A9/x%7Cy/report(1).json', 'the path sent is the path signed');
});

test('sigv4 for s3 adds x-amz-content-sha256 and verifies (single-encoded path)', async (t) => {
  const h = await harness();
  t.teardown(() => h.upstream.close());
  const body = Buffer.from('hello, object');
  const req: OutboundRequest = { method: 'PUT', url: new URL('bucket/key%20with%20space.txt', h.upstream.url), headers: { 'content-type': 'text/plain' }, body };
  const { verdict, recorded } = await signSendVerify(h, req, { region: 'us-east-1', service: 's3' });
  t.true(verdict.ok, verdict.reason);
  t.regex(String(recorded.headers['x-amz-content-sha256']), /^[0-9a-f]{64}$/);
  const plus = await signSendVerify(h, { method: 'GET', url: new URL('bucket/a+b.txt', h.upstream.url), headers: {}, body: undefined }, { region: 'us-east-1', service: 's3' });
  t.true(plus.verdict.ok, plus.verdict.reason);
  t.is(plus.recorded.url, '/bucket/a%2Bb.txt', 'a literal + in an S3 key is sent encoded, as signed');
});

test('sigv4 with a session token sends and signs x-amz-security-token', async (t) => {
  const h = await harness();
  t.teardown(() => h.upstream.close());
  const creds = { ...CREDS, sessionToken: 'FwoGZXIvYXdzEXAMPLETOKEN//+=' };
  const { verdict, recorded } = await signSendVerify(h, { method: 'GET', url: new URL('?Action=GetCallerIdentity&Version=2011-06-15', h.upstream.url), headers: {}, body: undefined }, { region: 'us-east-1', service: 'sts' }, creds);
  t.true(verdict.ok, verdict.reason);
  t.is(recorded.headers['x-amz-security-token'], creds.sessionToken);
  t.regex(String(recorded.headers.authorization), /SignedHeaders=[^,]*x-amz-security-token/);
});

test('the verifier is not a rubber stamp: a wrong secret key fails verification', async (t) => {
  const h = await harness();
  t.teardown(() => h.upstream.close());
  const req: OutboundRequest = { method: 'GET', url: new URL('x', h.upstream.url), headers: {}, body: undefined };
  await sigv4Kind.inject(req, fields(CREDS), { region: 'us-east-1', service: 'sts' }, h.ctx);
  await sendOutbound(req);
  const verdict = await verifySigv4(h.upstream.requests.at(-1)!, { ...CREDS, secretAccessKey: `${CREDS.secretAccessKey}x`, region: 'us-east-1', service: 'sts' });
  t.false(verdict.ok);
});

test('sigv4 never calls aws4\'s default signature() (its module cache is keyed by the plaintext secret)', async (t) => {
  const h = await harness();
  t.teardown(() => h.upstream.close());
  const proto = aws4.RequestSigner.prototype;
  const original = proto.signature;
  let calls = 0;
  proto.signature = function spied(this: aws4.RequestSigner) {
    calls += 1;
    return original.call(this);
  };
  t.teardown(() => {
    proto.signature = original;
  });
  // The spy is live: a plain aws4.sign() goes through it (so a zero count below means something).
  aws4.sign({ host: 'example.test', path: '/', service: 'sts', region: 'us-east-1' }, { accessKeyId: 'AKIDSPY', secretAccessKey: 'spy-secret' });
  t.is(calls, 1);
  calls = 0;
  for (let i = 0; i < 5; i += 1) {
    const { verdict } = await signSendVerify(h, { method: 'GET', url: new URL(`n/${i}`, h.upstream.url), headers: {}, body: undefined }, { region: 'us-east-1', service: 'sts' });
    t.true(verdict.ok, verdict.reason);
  }
  t.is(calls, 0);
});

test('sigv4 derives the signing key once per UTC day, region and service, and zeroes it when the day ends', async (t) => {
  const h = await harness();
  t.teardown(() => h.upstream.close());
  const call = (service: string, region = 'us-east-1') =>
    signSendVerify(h, { method: 'GET', url: new URL('x', h.upstream.url), headers: {}, body: undefined }, { region, service });
  for (let i = 0; i < 25; i += 1) t.true((await call('sts')).verdict.ok);
  t.is(h.sets.length, 1, 'one derivation for 25 calls');
  t.true(h.sets[0]!.key.startsWith('sigv4:key:') && h.sets[0]!.key.endsWith(':20240517:us-east-1:sts'));
  t.false(h.sets[0]!.key.includes(CREDS.secretAccessKey) || h.sets[0]!.key.includes(CREDS.accessKeyId), 'no plaintext in the cache key');
  t.true((await call('s3')).verdict.ok);
  t.true((await call('sts', 'eu-west-1')).verdict.ok);
  t.is(h.sets.length, 3, 'another service or region is another key');
  const firstDay = h.sets[0]!.value;
  h.clock.now += 2 * 60_000; // past midnight UTC
  const next = await call('sts');
  t.true(next.verdict.ok, next.verdict.reason);
  t.is(next.recorded.headers['x-amz-date'], '20240518T000100Z');
  t.is(h.sets.length, 4, 'a new day derives a new key');
  t.true(firstDay.every((b) => b === 0), 'yesterday\'s key was zeroed on expiry');
});

test('sigv4 ignores a stale cached key after the secret is replaced (fingerprinted cache key)', async (t) => {
  const h = await harness();
  t.teardown(() => h.upstream.close());
  const config = { region: 'us-east-1', service: 'sts' };
  t.true((await signSendVerify(h, { method: 'GET', url: new URL('x', h.upstream.url), headers: {}, body: undefined }, config)).verdict.ok);
  const replaced = { ...CREDS, secretAccessKey: 'aNewSecretKeyValueAfterRotation/0000000000' };
  const { verdict } = await signSendVerify(h, { method: 'GET', url: new URL('x', h.upstream.url), headers: {}, body: undefined }, config, replaced);
  t.true(verdict.ok, verdict.reason);
});

test('sigv4 sends the query it signed: raw "+", brackets and a bare key verify', async (t) => {
  const h = await harness();
  t.teardown(() => h.upstream.close());
  const url = new URL('search?q=a+b&filter[x]=1|2&flag&z=%7E', h.upstream.url);
  const { verdict, recorded } = await signSendVerify(h, { method: 'GET', url, headers: {}, body: undefined }, { region: 'us-east-1', service: 'execute-api' });
  t.true(verdict.ok, verdict.reason);
  t.is(recorded.url, '/search?q=a%20b&filter%5Bx%5D=1%7C2&flag=&z=~', 'RFC 3986 encoded, "+" read as a space');
});
