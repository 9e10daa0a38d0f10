/**
 * A private SoftHSM2 token for a test file. SoftHSM reads SOFTHSM2_CONF once, in C_Initialize, and
 * Cryptoki is initialised once per process (all tests of one ava worker share it), so:
 *  - the first call in a process writes a private softhsm2.conf + token dir and points
 *    process.env.SOFTHSM2_CONF at it; later calls in the same process add tokens to that same dir;
 *  - prefer one token per test file. A token created after the process initialised Cryptoki is
 *    only seen once the backend re-initialises the library (it does so when no backend holds
 *    sessions), which is why one-token-per-file is the simple, reliable pattern.
 * A missing softhsm2-util throws (the test fails), in CI and outside it.
 */
import { execFile } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Pkcs11BackendConfig } from '../../src/keys/pkcs11/index.ts';

const run = promisify(execFile);

export const SOFTHSM_MODULE = process.env.CUSTOS_TEST_PKCS11_MODULE ?? '/usr/lib/softhsm/libsofthsm2.so';

export interface SoftHsmToken {
  /** Path of the private softhsm2.conf (also in process.env.SOFTHSM2_CONF). */
  conf: string;
  /** Temp dir holding the conf, the token dir and the PIN file. */
  dir: string;
  label: string;
  pin: string;
  soPin: string;
  /** A 0600 file holding the PIN (for keys.pkcs11.pinFile). */
  pinFile: string;
  module: string;
  cleanup(): Promise<void>;
}

let shared: { dir: string; conf: string; tokenDir: string; tokens: number } | null = null;

export async function createSoftHsmToken(
  options: { label?: string; pin?: string; soPin?: string } = {},
): Promise<SoftHsmToken> {
  const label = options.label ?? `custos-test-${randomBytes(5).toString('hex')}`;
  const pin = options.pin ?? String(randomInt(10_000_000, 99_999_999));
  const soPin = options.soPin ?? String(randomInt(10_000_000, 99_999_999));
  if (!shared) {
    const dir = await mkdtemp(path.join(tmpdir(), 'custos-softhsm-'));
    const tokenDir = path.join(dir, 'tokens');
    await mkdir(tokenDir, { mode: 0o700 });
    const conf = path.join(dir, 'softhsm2.conf');
    await writeFile(conf, `directories.tokendir = ${tokenDir}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n`, { mode: 0o600 });
    shared = { dir, conf, tokenDir, tokens: 0 };
    // Must be set before the first C_Initialize in this process.
    process.env.SOFTHSM2_CONF = conf;
  }
  const state = shared;
  try {
    await run('softhsm2-util', ['--init-token', '--free', '--label', label, '--so-pin', soPin, '--pin', pin], {
      env: { ...process.env, SOFTHSM2_CONF: state.conf },
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ENOENT') {
      throw new Error('softhsm2-util is not installed (apt-get install -y softhsm2); the PKCS#11 tests need a real SoftHSM2 token.');
    }
    throw new Error(`softhsm2-util --init-token failed for label ${label}`, { cause: err });
  }
  state.tokens += 1;
  const pinFile = path.join(state.dir, `${label}.pin`);
  await writeFile(pinFile, `${pin}\n`, { mode: 0o600 });
  return {
    conf: state.conf,
    dir: state.dir,
    label,
    pin,
    soPin,
    pinFile,
    module: SOFTHSM_MODULE,
    async cleanup() {
      state.tokens -= 1;
      await rm(pinFile, { force: true });
      if (state.tokens === 0 && shared === state) {
        // Cryptoki may still be initialised on these files; they are only deleted, not reused.
        await rm(state.dir, { recursive: true, force: true });
        shared = null;
      }
    },
  };
}

/** A pkcs11 backend config for `token` (PIN from its file, KEK label `custos-kek`, AES-GCM, 2 sessions). */
export function pkcs11ConfigFor(token: SoftHsmToken, overrides: Partial<Pkcs11BackendConfig> = {}): Pkcs11BackendConfig {
  return {
    module: token.module, tokenLabel: token.label, pin: null, pinFile: token.pinFile,
    kekLabel: 'custos-kek', mechanism: 'aes-gcm', sessions: 2, ...overrides,
  };
}
