/**
 * pkcs11 down-and-recover cases, on this file's own SoftHSM2 token. Serial: login state is per
 * token per process, so a wrong-PIN test must not share the token with a logged-in backend.
 */
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import test from 'ava';
import { CustosError } from '../../src/errors.ts';
import { createPkcs11Backend, cryptokiFor, type Pkcs11BackendConfig } from '../../src/keys/pkcs11/index.ts';
import { createSoftHsmToken, pkcs11ConfigFor, type SoftHsmToken } from '../support/softhsm.ts';
import { captureLogger } from './log-capture.ts';

const tokens: SoftHsmToken[] = [];
let token: SoftHsmToken;
test.before(async () => {
  token = await createSoftHsmToken();
  tokens.push(token);
});
test.after.always(async () => {
  for (const t of tokens) await t.cleanup();
});

const config = (overrides: Partial<Pkcs11BackendConfig> = {}): Pkcs11BackendConfig => pkcs11ConfigFor(token, overrides);

test.serial('pkcs11: a wrong PIN gives a 503-class error without the PIN; once the PIN file is corrected the next call works', async (t) => {
  const marker = `MARKER-${randomBytes(6).toString('hex')}`;
  await writeFile(token.pinFile, `${marker}\n`, { mode: 0o600 });
  const cap = captureLogger();
  const backend = await createPkcs11Backend(config(), { log: cap.log });
  const dek = randomBytes(32);
  const err = await t.throwsAsync(backend.wrap(dek, Buffer.from('ws')), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE');
  t.is(err?.status, 503);
  t.regex(err?.message ?? '', /Login to PKCS#11 token ".*" failed: wrong PIN/);
  const healthErr = await t.throwsAsync(backend.health(), { instanceOf: CustosError });
  t.is(healthErr?.code, 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE', 'still down while the PIN is wrong: no fallback');
  for (const e of [err!, healthErr!]) {
    const text = `${e.message} ${JSON.stringify((e as CustosError).toJSON())} ${String(e.stack)}`;
    t.false(text.includes(marker), 'the PIN is not in the error');
  }
  t.false(cap.text().includes(marker), 'the PIN is not in the logs');
  t.regex(cap.text(), /not reachable yet/, 'start-up logged the outage');

  await writeFile(token.pinFile, `${token.pin}\n`, { mode: 0o600 });
  const blob = await backend.wrap(dek, Buffer.from('ws'));
  t.true((await backend.unwrap(blob, Buffer.from('ws'))).equals(dek));
  await backend.close();
});

test.serial('pkcs11: when every session is torn down under it, one call fails with 503 and the next reconnects', async (t) => {
  const backend = await createPkcs11Backend(config(), { log: captureLogger().log });
  const dek = randomBytes(32);
  const blob = await backend.wrap(dek, Buffer.from('ws'));
  // Simulate an HSM reset: every session of this process on the token disappears.
  const lib = cryptokiFor(token.module).ensure();
  const slot = lib.C_GetSlotList(true).find((s) => lib.C_GetTokenInfo(s).label.trim() === token.label)!;
  lib.C_CloseAllSessions(slot);
  const err = await t.throwsAsync(backend.unwrap(blob, Buffer.from('ws')), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE');
  t.true((await backend.unwrap(blob, Buffer.from('ws'))).equals(dek), 'the next call logged in again and worked');
  await backend.close();
});

test.serial('pkcs11: a token that does not exist yet gives 503; once it is created the next call finds it', async (t) => {
  const label = `late-${randomBytes(4).toString('hex')}`;
  const backend = await createPkcs11Backend(config({ tokenLabel: label }), { log: captureLogger().log });
  const err = await t.throwsAsync(backend.health(), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE');
  t.regex(err?.message ?? '', new RegExp(`token "${label}" was not found`));
  const late = await createSoftHsmToken({ label, pin: token.pin });
  tokens.push(late);
  await t.notThrowsAsync(backend.health());
  const dek = randomBytes(32);
  t.true((await backend.unwrap(await backend.wrap(dek, Buffer.from('w')), Buffer.from('w'))).equals(dek));
  await backend.close();
});
