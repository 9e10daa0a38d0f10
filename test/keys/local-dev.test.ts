import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { CustosError } from '../../src/errors.ts';
import { registerKeyBackendConformance } from '../../src/keys/conformance.ts';
import { createLocalDevBackend } from '../../src/keys/local-dev/index.ts';
import { captureLogger } from './log-capture.ts';

const dirs: string[] = [];
async function freshDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'custos-localdev-'));
  dirs.push(dir);
  return dir;
}
test.after.always(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const devEnv = { NODE_ENV: 'development' };

registerKeyBackendConformance(test, {
  name: 'local-dev',
  randomized: true,
  rotatable: true,
  open: async () => createLocalDevBackend({ keyFile: null, dataDir: path.join(await freshDir(), 'data'), log: captureLogger().log, env: devEnv }),
});

test('local-dev refuses to start when NODE_ENV=production, before touching the disk', async (t) => {
  const dir = await freshDir();
  const err = await t.throwsAsync(
    createLocalDevBackend({ keyFile: null, dataDir: path.join(dir, 'data'), log: captureLogger().log, env: { NODE_ENV: 'production' } }),
    { instanceOf: CustosError },
  );
  t.is(err?.code, 'CUSTOS_ERR_CONFIG');
  t.regex(err?.message ?? '', /NODE_ENV=production/);
  t.deepEqual(await readdir(dir), [], 'no key file or directory was created');
});

test('local-dev creates a 32-byte key file with mode 0600 in a 0700 directory under the data dir', async (t) => {
  const dataDir = path.join(await freshDir(), 'data');
  const b = await createLocalDevBackend({ keyFile: null, dataDir, log: captureLogger().log, env: devEnv });
  const file = path.join(dataDir, 'local-dev-kek.key');
  const st = await stat(file);
  t.is(st.mode & 0o777, 0o600);
  t.is(st.size, 32);
  t.is((await stat(dataDir)).mode & 0o777, 0o700);
  t.is(b.id, 'local-dev:kek-v1');
  t.deepEqual(await readdir(dataDir), ['local-dev-kek.key'], 'no temp file left behind');
  await b.close();
});

test('local-dev logs a loud warning at start that names the key file but never the key bytes', async (t) => {
  const dataDir = path.join(await freshDir(), 'data');
  const cap = captureLogger();
  const b = await createLocalDevBackend({ keyFile: null, dataDir, log: cap.log, env: devEnv });
  const warning = cap.lines.map((l) => JSON.parse(l) as { level: number; msg: string; keyFile?: string }).find((l) => l.level === 40);
  t.truthy(warning);
  t.regex(warning!.msg, /LOCAL-DEV KEY BACKEND.*development only/);
  t.is(warning!.keyFile, path.join(dataDir, 'local-dev-kek.key'));
  const key = await readFile(path.join(dataDir, 'local-dev-kek.key'));
  t.false(cap.text().includes(key.toString('hex')));
  t.false(cap.text().includes(key.toString('base64')));
  await b.close();
});

test('local-dev uses keys.localDev.keyFile when set and reuses an existing key across restarts', async (t) => {
  const dir = await freshDir();
  const keyFile = path.join(dir, 'custom', 'kek.bin');
  const one = await createLocalDevBackend({ keyFile, dataDir: path.join(dir, 'unused'), log: captureLogger().log, env: devEnv });
  const dek = randomBytes(32);
  const blob = await one.wrap(dek, Buffer.from('ws'));
  await one.close();
  const two = await createLocalDevBackend({ keyFile, dataDir: path.join(dir, 'unused'), log: captureLogger().log, env: devEnv });
  t.true((await two.unwrap(blob, Buffer.from('ws'))).equals(dek));
  await two.close();
});

test('local-dev rotation writes kek.v2 beside the key file (0600); a restarted backend wraps with v2 and unwraps v1 blobs', async (t) => {
  const dataDir = path.join(await freshDir(), 'data');
  const one = await createLocalDevBackend({ keyFile: null, dataDir, log: captureLogger().log, env: devEnv });
  const dek = randomBytes(32);
  const v1 = await one.wrap(dek, Buffer.from('ws'));
  t.is(await one.rotateKek(), 'local-dev:kek-v2');
  t.is((await stat(path.join(dataDir, 'local-dev-kek.v2.key'))).mode & 0o777, 0o600);
  await one.close();
  const two = await createLocalDevBackend({ keyFile: null, dataDir, log: captureLogger().log, env: devEnv });
  t.is(two.id, 'local-dev:kek-v2');
  t.is((await two.wrap(dek, Buffer.from('ws'))).readUInt32BE(1), 2);
  t.true((await two.unwrap(v1, Buffer.from('ws'))).equals(dek));
  await two.close();
});

test('a backend picks up a KEK version another process created when it meets a blob made with it', async (t) => {
  const dataDir = path.join(await freshDir(), 'data');
  const a = await createLocalDevBackend({ keyFile: null, dataDir, log: captureLogger().log, env: devEnv });
  const b = await createLocalDevBackend({ keyFile: null, dataDir, log: captureLogger().log, env: devEnv });
  await a.rotateKek();
  const dek = randomBytes(32);
  const blob = await a.wrap(dek, Buffer.from('ws'));
  t.true((await b.unwrap(blob, Buffer.from('ws'))).equals(dek));
  await a.close();
  await b.close();
});

test('local-dev refuses a key file readable by others, or of the wrong size, with CUSTOS_ERR_CONFIG', async (t) => {
  const dir = await freshDir();
  const loose = path.join(dir, 'loose.key');
  await writeFile(loose, randomBytes(32), { mode: 0o600 });
  await chmod(loose, 0o644);
  const e1 = await t.throwsAsync(createLocalDevBackend({ keyFile: loose, dataDir: dir, log: captureLogger().log, env: devEnv }), { instanceOf: CustosError });
  t.is(e1?.code, 'CUSTOS_ERR_CONFIG');
  t.regex(e1?.message ?? '', /mode 644.*600/);
  const short = path.join(dir, 'short.key');
  await writeFile(short, randomBytes(16), { mode: 0o600 });
  const e2 = await t.throwsAsync(createLocalDevBackend({ keyFile: short, dataDir: dir, log: captureLogger().log, env: devEnv }), { instanceOf: CustosError });
  t.is(e2?.code, 'CUSTOS_ERR_CONFIG');
  t.regex(e2?.message ?? '', /32 bytes/);
});

test('after close() the local-dev backend refuses further use', async (t) => {
  const dataDir = path.join(await freshDir(), 'data');
  const b = await createLocalDevBackend({ keyFile: null, dataDir, log: captureLogger().log, env: devEnv });
  await b.close();
  const err = await t.throwsAsync(b.health(), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE');
});
