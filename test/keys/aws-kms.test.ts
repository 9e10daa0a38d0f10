/**
 * aws-kms through the real @aws-sdk/client-kms against the KMS-protocol stand-in on 127.0.0.1.
 * Not run against AWS itself (no network here).
 */
import { randomBytes } from 'node:crypto';
import test from 'ava';
import { CustosError } from '../../src/errors.ts';
import { createAwsKmsBackend, type AwsKmsBackendConfig } from '../../src/keys/aws-kms/index.ts';
import { registerKeyBackendConformance } from '../../src/keys/conformance.ts';
import { startKmsStandIn, type KmsStandIn } from '../support/kms-standin.ts';
import { captureLogger } from './log-capture.ts';

const fakeEnv = { AWS_ACCESS_KEY_ID: 'AKIAFAKEFAKEFAKE', AWS_SECRET_ACCESS_KEY: 'fake-secret-for-the-stand-in' };
let kms: KmsStandIn;
test.before(async () => {
  kms = await startKmsStandIn({ keyIds: ['alias/custos-test', 'alias/other'] });
});
test.after.always(async () => {
  await kms?.stop();
});

function config(overrides: Partial<AwsKmsBackendConfig> = {}): AwsKmsBackendConfig {
  return { keyId: kms.keyId, region: 'us-east-1', endpoint: kms.endpoint, ...overrides };
}

registerKeyBackendConformance(test, {
  name: 'aws-kms (stand-in)',
  randomized: true,
  rotatable: false,
  open: () => createAwsKmsBackend(config(), { log: captureLogger().log, env: fakeEnv, maxAttempts: 1 }),
});

test('aws-kms wraps with Encrypt and unwraps with Decrypt under EncryptionContext {workspace: <id>} and the configured KeyId', async (t) => {
  const backend = await createAwsKmsBackend(config(), { log: captureLogger().log, env: fakeEnv });
  t.is(backend.id, 'aws-kms:alias/custos-test');
  const before = kms.requests.length;
  const dek = randomBytes(32);
  const blob = await backend.wrap(dek, Buffer.from('ws-context'));
  t.is(blob[0], 0x21);
  t.true((await backend.unwrap(blob, Buffer.from('ws-context'))).equals(dek));
  const seen = kms.requests.slice(before).filter((r) => r.encryptionContext?.workspace === 'ws-context');
  t.deepEqual(seen, [
    { target: 'TrentService.Encrypt', keyId: 'alias/custos-test', encryptionContext: { workspace: 'ws-context' } },
    { target: 'TrentService.Decrypt', keyId: 'alias/custos-test', encryptionContext: { workspace: 'ws-context' } },
  ]);
  await backend.close();
});

test('aws-kms refuses a blob made under another KMS key with CUSTOS_ERR_INTEGRITY', async (t) => {
  const other = await createAwsKmsBackend(config({ keyId: 'alias/other' }), { log: captureLogger().log, env: fakeEnv });
  const mine = await createAwsKmsBackend(config(), { log: captureLogger().log, env: fakeEnv });
  const blob = await other.wrap(randomBytes(32), Buffer.from('ws'));
  const err = await t.throwsAsync(mine.unwrap(blob, Buffer.from('ws')), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_INTEGRITY');
  await other.close();
  await mine.close();
});

test('aws-kms without keys.awsKms.keyId is CUSTOS_ERR_CONFIG', async (t) => {
  const err = await t.throwsAsync(createAwsKmsBackend(config({ keyId: null }), { log: captureLogger().log }), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_CONFIG');
});

test('aws-kms: an unknown KMS key is a 503-class error, not an integrity error', async (t) => {
  const backend = await createAwsKmsBackend(config({ keyId: 'alias/missing' }), { log: captureLogger().log, env: fakeEnv, maxAttempts: 1 });
  const err = await t.throwsAsync(backend.wrap(randomBytes(32), Buffer.from('ws')), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE');
  t.regex(err?.message ?? '', /NotFoundException/);
  await backend.close();
});

// Serial: these stop the shared stand-in or make it fail; ava runs serial tests before the others.
test.serial('aws-kms: KMS answering 5xx gives CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE, and the next call after it recovers works', async (t) => {
  const backend = await createAwsKmsBackend(config(), { log: captureLogger().log, env: fakeEnv, maxAttempts: 2 });
  const dek = randomBytes(32);
  const blob = await backend.wrap(dek, Buffer.from('ws'));
  kms.failWith(500);
  try {
    const err = await t.throwsAsync(backend.unwrap(blob, Buffer.from('ws')), { instanceOf: CustosError });
    t.is(err?.code, 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE');
    t.is(err?.status, 503);
    t.regex(err?.message ?? '', /KMSInternalException/);
    const healthErr = await t.throwsAsync(backend.health(), { instanceOf: CustosError });
    t.is(healthErr?.code, 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE');
  } finally {
    kms.failWith(null);
  }
  t.true((await backend.unwrap(blob, Buffer.from('ws'))).equals(dek));
  await backend.close();
});

test.serial('aws-kms: the stand-in stopped gives a 503-class error without the DEK; restarted on the same port, the next call works', async (t) => {
  const cap = captureLogger();
  const backend = await createAwsKmsBackend(config(), { log: cap.log, env: fakeEnv, maxAttempts: 2, timeoutMs: 2000 });
  const marker = Buffer.from(`MARKER-${randomBytes(13).toString('hex')}`.slice(0, 32));
  const blob = await backend.wrap(marker, Buffer.from('ws'));
  const port = kms.port;
  await kms.stop();
  try {
    for (const call of [() => backend.unwrap(blob, Buffer.from('ws')), () => backend.wrap(marker, Buffer.from('ws')), () => backend.health()]) {
      const err = await t.throwsAsync(call(), { instanceOf: CustosError });
      t.is(err?.code, 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE');
      t.regex(err?.message ?? '', /AWS KMS is unavailable \((ECONNREFUSED|ECONNRESET|[A-Za-z]+)\)/);
      const text = `${err?.message} ${JSON.stringify((err as CustosError).toJSON())}`;
      t.false(text.includes(marker.toString('utf8')));
      t.false(text.includes(marker.toString('base64')));
    }
  } finally {
    await kms.start();
  }
  t.is(kms.port, port);
  t.true((await backend.unwrap(blob, Buffer.from('ws'))).equals(marker));
  t.false(cap.text().includes(marker.toString('base64')));
  await backend.close();
});
