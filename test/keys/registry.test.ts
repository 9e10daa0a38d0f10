import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import type { Config } from '../../src/config/schema.ts';
import { CustosError } from '../../src/errors.ts';
import { isRotatable } from '../../src/keys/key-backend.ts';
import { KEY_BACKEND_FACTORIES, createKeyBackend } from '../../src/keys/registry.ts';
import { startKmsStandIn, type KmsStandIn } from '../support/kms-standin.ts';
import { createSoftHsmToken, type SoftHsmToken } from '../support/softhsm.ts';
import { captureLogger } from './log-capture.ts';

let dataDir: string;
let token: SoftHsmToken;
let kms: KmsStandIn;
test.before(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'custos-registry-'));
  token = await createSoftHsmToken();
  kms = await startKmsStandIn();
});
test.after.always(async () => {
  await kms?.stop();
  await token?.cleanup();
  await rm(dataDir, { recursive: true, force: true });
});

function keys(backend: Config['keys']['backend']): Config['keys'] {
  return {
    backend,
    localDev: { keyFile: null },
    pkcs11: { module: token.module, tokenLabel: token.label, pin: null, pinFile: token.pinFile, kekLabel: 'registry-kek', mechanism: 'aes-gcm', sessions: 2 },
    awsKms: { keyId: kms.keyId, region: 'us-east-1', endpoint: kms.endpoint },
  };
}

const env = { NODE_ENV: 'test', AWS_ACCESS_KEY_ID: 'AKIAFAKE', AWS_SECRET_ACCESS_KEY: 'fake' };

test('the registry is an explicit map of exactly local-dev, pkcs11 and aws-kms', (t) => {
  t.deepEqual(Object.keys(KEY_BACKEND_FACTORIES).sort(), ['aws-kms', 'local-dev', 'pkcs11']);
});

for (const [name, rotatable] of [['local-dev', true], ['pkcs11', true], ['aws-kms', false]] as const) {
  test(`createKeyBackend('${name}') returns a backend whose stats count every wrap and unwrap (and only those)`, async (t) => {
    const backend = await createKeyBackend(keys(name), { dataDir, log: captureLogger().log, env });
    t.true(backend.id.startsWith(`${name}:`));
    t.is(isRotatable(backend), rotatable, 'rotateKek is exposed exactly when the backend has it');
    t.deepEqual(backend.stats, { wraps: 0, unwraps: 0 });
    const dek = randomBytes(32);
    const blob = await backend.wrap(dek, Buffer.from('ws'));
    await backend.unwrap(blob, Buffer.from('ws'));
    await backend.unwrap(blob, Buffer.from('ws'));
    await t.throwsAsync(backend.unwrap(blob, Buffer.from('other')));
    await backend.health();
    t.deepEqual(backend.stats, { wraps: 1, unwraps: 3 }, 'failed calls count too; health does not');
    backend.resetStats();
    t.deepEqual(backend.stats, { wraps: 0, unwraps: 0 });
    await backend.close();
  });
}

test('createKeyBackend refuses local-dev when NODE_ENV=production', async (t) => {
  const err = await t.throwsAsync(
    createKeyBackend(keys('local-dev'), { dataDir, log: captureLogger().log, env: { NODE_ENV: 'production' } }),
    { instanceOf: CustosError },
  );
  t.is(err?.code, 'CUSTOS_ERR_CONFIG');
});

test('createKeyBackend refuses an unknown backend name with CUSTOS_ERR_CONFIG', async (t) => {
  const bad = { ...keys('local-dev'), backend: 'toString' } as unknown as Config['keys'];
  const err = await t.throwsAsync(createKeyBackend(bad, { dataDir, log: captureLogger().log, env }), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_CONFIG');
});
