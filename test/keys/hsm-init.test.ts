import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';

const run = promisify(execFile);

test('hsm/init-softhsm.sh creates a token, 0600 PIN files and the KEK once, keeps them on a second run, and never prints the PIN', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'custos-hsm-init-'));
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, CUSTOS_HSM_DIR: path.join(dir, 'hsm'), CUSTOS_PKCS11_TOKEN_LABEL: 'custos-init-test' };
    delete env.SOFTHSM2_CONF;
    const first = await run('sh', ['hsm/init-softhsm.sh'], { env });
    t.regex(first.stdout, /token "custos-init-test" created/);
    t.regex(first.stdout, /KEK versions custos-kek-v1; current pkcs11:custos-kek-v1/);
    const second = await run('sh', ['hsm/init-softhsm.sh'], { env });
    t.regex(second.stdout, /token "custos-init-test" already exists/);
    t.regex(second.stdout, /KEK versions custos-kek-v1; current pkcs11:custos-kek-v1/, 'no second KEK');
    for (const name of ['user.pin', 'so.pin']) {
      const file = path.join(dir, 'hsm', name);
      t.is((await stat(file)).mode & 0o777, 0o600, `${name} is 0600`);
      const pin = (await readFile(file, 'utf8')).trim();
      t.regex(pin, /^[0-9]{8}$/);
      t.false(`${first.stdout}${first.stderr}${second.stdout}${second.stderr}`.includes(pin), `${name} is never printed`);
    }
    t.regex(second.stdout, /export CUSTOS_PKCS11_PIN_FILE=.*user\.pin/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
