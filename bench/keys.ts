/**
 * Key-backend and envelope throughput. Run: node --import tsx bench/keys.ts
 * Prints ops/s (and mean µs/op) for wrap/unwrap on SoftHSM2 (aes-gcm and aes-key-wrap-pad, one
 * caller and 16 concurrent callers over a 4-session pool), local-dev, the KMS stand-in over
 * loopback HTTP (not AWS), and encryptField/decryptField on a 64-byte secret.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { silentLogger } from '../src/log.ts';
import { createAwsKmsBackend } from '../src/keys/aws-kms/index.ts';
import { decryptField, encryptField, generateDek } from '../src/keys/envelope.ts';
import type { KeyBackend } from '../src/keys/key-backend.ts';
import { createLocalDevBackend } from '../src/keys/local-dev/index.ts';
import { createPkcs11Backend, type Pkcs11Mechanism } from '../src/keys/pkcs11/index.ts';
import { startKmsStandIn } from '../test/support/kms-standin.ts';
import { createSoftHsmToken } from '../test/support/softhsm.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 1);
const rows: Array<{ what: string; ops: number; usPerOp: number }> = [];

async function measure(what: string, op: () => Promise<unknown> | unknown, concurrency = 1): Promise<void> {
  for (let i = 0; i < 50; i += 1) await op(); // warm-up
  let count = 0;
  const end = performance.now() + SECONDS * 1000;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        await op();
        count += 1;
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  rows.push({ what, ops: count / elapsed, usPerOp: (elapsed * 1e6) / count });
}

async function benchBackend(name: string, backend: KeyBackend, concurrency: number[] = [1]): Promise<void> {
  const dek = randomBytes(32);
  const aad = Buffer.from('workspace-0001');
  const blob = await backend.wrap(dek, aad);
  for (const c of concurrency) {
    const suffix = c > 1 ? ` ×${c} concurrent` : '';
    await measure(`${name} wrap${suffix}`, () => backend.wrap(dek, aad), c);
    await measure(`${name} unwrap${suffix}`, async () => (await backend.unwrap(blob, aad)).fill(0), c);
  }
  await backend.close();
}

const log = silentLogger();
const token = await createSoftHsmToken({ label: 'custos-bench' });
for (const mechanism of ['aes-gcm', 'aes-key-wrap-pad'] as Pkcs11Mechanism[]) {
  const backend = await createPkcs11Backend(
    { module: token.module, tokenLabel: token.label, pin: null, pinFile: token.pinFile, kekLabel: 'bench-kek', mechanism, sessions: 4 },
    { log },
  );
  await benchBackend(`softhsm ${mechanism}`, backend, [1, 16]);
}
await token.cleanup();

const dir = await mkdtemp(path.join(tmpdir(), 'custos-bench-'));
await benchBackend('local-dev', await createLocalDevBackend({ keyFile: null, dataDir: dir, log, env: { NODE_ENV: 'development' } }));
await rm(dir, { recursive: true, force: true });

const kms = await startKmsStandIn();
await benchBackend(
  'aws-kms (loopback stand-in)',
  await createAwsKmsBackend({ keyId: kms.keyId, region: 'us-east-1', endpoint: kms.endpoint }, { log, credentials: { accessKeyId: 'AKIAFAKE', secretAccessKey: 'fake' } }),
);
await kms.stop();

const dek = generateDek();
const secret = randomBytes(64);
const aad = { workspaceId: 'workspace-0001', credentialId: 'credential-0001', field: 'apiKey' };
const fieldBlob = encryptField(dek, secret, aad);
await measure('encryptField (64 B)', () => encryptField(dek, secret, aad));
await measure('decryptField (64 B)', () => decryptField(dek, fieldBlob, aad).fill(0));

const width = Math.max(...rows.map((r) => r.what.length));
process.stdout.write(`\n${'operation'.padEnd(width)} | ${'ops/s'.padStart(10)} | ${'µs/op'.padStart(8)}\n`);
process.stdout.write(`${'-'.repeat(width)}-|-${'-'.repeat(10)}-|-${'-'.repeat(8)}\n`);
for (const r of rows) {
  process.stdout.write(`${r.what.padEnd(width)} | ${Math.round(r.ops).toLocaleString('en-US').padStart(10)} | ${r.usPerOp.toFixed(1).padStart(8)}\n`);
}
process.stdout.write(`\n(${SECONDS}s per row, Node ${process.version}, ${new Date().toISOString()})\n`);
