/**
 * pkcs11 against a real SoftHSM2 token created for this file (one token per worker process:
 * Cryptoki reads SOFTHSM2_CONF once per process).
 */
import { randomBytes } from 'node:crypto';
import test from 'ava';
import { CustosError } from '../../src/errors.ts';
import { registerKeyBackendConformance } from '../../src/keys/conformance.ts';
import { createPkcs11Backend, cryptokiFor, pkcs11js, type Pkcs11BackendConfig } from '../../src/keys/pkcs11/index.ts';
import { createSoftHsmToken, pkcs11ConfigFor, type SoftHsmToken } from '../support/softhsm.ts';
import { captureLogger } from './log-capture.ts';

let token: SoftHsmToken;
test.before(async () => {
  token = await createSoftHsmToken();
});
test.after.always(async () => {
  await token?.cleanup();
});

const config = (overrides: Partial<Pkcs11BackendConfig> = {}): Pkcs11BackendConfig => pkcs11ConfigFor(token, { sessions: 4, ...overrides });

registerKeyBackendConformance(test, {
  name: 'pkcs11 (aes-gcm)',
  randomized: true,
  rotatable: true,
  open: () => createPkcs11Backend(config({ kekLabel: 'conf-gcm' }), { log: captureLogger().log }),
});

registerKeyBackendConformance(test, {
  name: 'pkcs11 (aes-key-wrap-pad)',
  randomized: false,
  rotatable: true,
  open: () => createPkcs11Backend(config({ kekLabel: 'conf-kwp', mechanism: 'aes-key-wrap-pad', sessions: 2 }), { log: captureLogger().log }),
});

/** Opens a logged-in session of our own on the token to inspect objects as an attacker with the PIN would. */
function inspect<T>(fn: (lib: InstanceType<typeof pkcs11js.PKCS11>, session: Buffer) => T): T {
  const mod = cryptokiFor(token.module);
  const lib = mod.ensure();
  mod.addUser(); // our session must survive other tests' library restarts
  const slot = lib.C_GetSlotList(true).find((s) => lib.C_GetTokenInfo(s).label.trim() === token.label)!;
  const session = lib.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION);
  try {
    try {
      lib.C_Login(session, pkcs11js.CKU_USER, token.pin);
    } catch (err) {
      if (!/CKR_USER_ALREADY_LOGGED_IN/.test(String((err as Error).message))) throw err;
    }
    return fn(lib, session);
  } finally {
    lib.C_CloseSession(session);
    mod.removeUser();
  }
}

function findByLabel(lib: InstanceType<typeof pkcs11js.PKCS11>, session: Buffer, label: string): Buffer[] {
  lib.C_FindObjectsInit(session, [{ type: pkcs11js.CKA_LABEL, value: label }]);
  const found = lib.C_FindObjects(session, 10);
  lib.C_FindObjectsFinal(session);
  return found;
}

test('pkcs11: the KEK is on the token, sensitive and non-extractable; reading CKA_VALUE and wrapping it out both fail', async (t) => {
  const backend = await createPkcs11Backend(config({ kekLabel: 'attr-kek' }), { log: captureLogger().log });
  t.is(backend.id, 'pkcs11:attr-kek-v1');
  await backend.wrap(randomBytes(32), Buffer.from('ws')); // keep a session (and the login) open while we look
  inspect((lib, session) => {
    const [kek] = findByLabel(lib, session, 'attr-kek-v1');
    t.truthy(kek, 'KEK found by label');
    const attrs = lib.C_GetAttributeValue(session, kek!, [
      { type: pkcs11js.CKA_EXTRACTABLE },
      { type: pkcs11js.CKA_SENSITIVE },
      { type: pkcs11js.CKA_TOKEN },
      { type: pkcs11js.CKA_KEY_TYPE },
      { type: pkcs11js.CKA_VALUE_LEN },
      { type: pkcs11js.CKA_NEVER_EXTRACTABLE },
      { type: pkcs11js.CKA_ALWAYS_SENSITIVE },
    ]);
    const [extractable, sensitive, onToken, keyType, valueLen, neverExtractable, alwaysSensitive] = attrs.map((a) => a.value);
    t.is(extractable![0], 0, 'CKA_EXTRACTABLE = false');
    t.is(sensitive![0], 1, 'CKA_SENSITIVE = true');
    t.is(onToken![0], 1, 'CKA_TOKEN = true');
    t.is(keyType!.readUInt32LE(0), pkcs11js.CKK_AES);
    t.is(valueLen!.readUInt32LE(0), 32, 'AES-256');
    t.is(neverExtractable![0], 1, 'CKA_NEVER_EXTRACTABLE: generated inside the token');
    t.is(alwaysSensitive![0], 1, 'CKA_ALWAYS_SENSITIVE');
    const readErr = t.throws(() => lib.C_GetAttributeValue(session, kek!, [{ type: pkcs11js.CKA_VALUE }]));
    t.regex(readErr?.message ?? '', /CKR_ATTRIBUTE_SENSITIVE/);
    // Even with another wrapping key, the KEK cannot be wrapped out of the token.
    const wrapper = lib.C_GenerateKey(session, { mechanism: pkcs11js.CKM_AES_KEY_GEN }, [
      { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_SECRET_KEY },
      { type: pkcs11js.CKA_KEY_TYPE, value: pkcs11js.CKK_AES },
      { type: pkcs11js.CKA_VALUE_LEN, value: 32 },
      { type: pkcs11js.CKA_TOKEN, value: false },
      { type: pkcs11js.CKA_WRAP, value: true },
    ]);
    const wrapErr = t.throws(() => lib.C_WrapKey(session, { mechanism: pkcs11js.CKM_AES_KEY_WRAP_PAD }, wrapper, kek!, Buffer.alloc(128)));
    t.regex(wrapErr?.message ?? '', /CKR_KEY_UNEXTRACTABLE/);
    // Nor can anyone relax the attributes later.
    t.throws(() => lib.C_SetAttributeValue(session, kek!, [{ type: pkcs11js.CKA_EXTRACTABLE, value: true }]));
  });
  await backend.close();
});

test('pkcs11: the KEK is generated once; a second backend finds it by label instead of making another', async (t) => {
  const a = await createPkcs11Backend(config({ kekLabel: 'once-kek' }), { log: captureLogger().log });
  const dek = randomBytes(32);
  const blob = await a.wrap(dek, Buffer.from('ws'));
  const b = await createPkcs11Backend(config({ kekLabel: 'once-kek' }), { log: captureLogger().log });
  t.true((await b.unwrap(blob, Buffer.from('ws'))).equals(dek));
  t.is(inspect((lib, s) => findByLabel(lib, s, 'once-kek-v1').length), 1);
  await a.close();
  await b.close();
});

test('pkcs11: rotateKek creates <kekLabel>-v2 on the token; another instance unwraps v2 blobs after rescanning', async (t) => {
  const a = await createPkcs11Backend(config({ kekLabel: 'rot-kek' }), { log: captureLogger().log });
  const b = await createPkcs11Backend(config({ kekLabel: 'rot-kek' }), { log: captureLogger().log });
  t.is(await a.rotateKek(), 'pkcs11:rot-kek-v2');
  t.is(inspect((lib, s) => findByLabel(lib, s, 'rot-kek-v2').length), 1);
  t.deepEqual(await a.kekVersions(), [1, 2]);
  const dek = randomBytes(32);
  const blob = await a.wrap(dek, Buffer.from('ws'));
  t.is(blob.readUInt32BE(1), 2);
  t.is(b.id, 'pkcs11:rot-kek-v1', 'b has not looked yet');
  t.true((await b.unwrap(blob, Buffer.from('ws'))).equals(dek));
  t.is(b.id, 'pkcs11:rot-kek-v2', 'b now wraps under the newest version too');
  await a.close();
  await b.close();
});

test('pkcs11: a blob made with aes-gcm still unwraps after the mechanism is switched to key wrap, and vice versa', async (t) => {
  const gcm = await createPkcs11Backend(config({ kekLabel: 'switch-kek' }), { log: captureLogger().log });
  const kwp = await createPkcs11Backend(config({ kekLabel: 'switch-kek', mechanism: 'aes-key-wrap-pad' }), { log: captureLogger().log });
  const dek = randomBytes(32);
  const ws = Buffer.from('ws-switch');
  const g = await gcm.wrap(dek, ws);
  const k = await kwp.wrap(dek, ws);
  t.is(g[0], 0x11);
  t.is(k[0], 0x12);
  t.true((await kwp.unwrap(g, ws)).equals(dek));
  t.true((await gcm.unwrap(k, ws)).equals(dek));
  await gcm.close();
  await kwp.close();
});

// Serial: ava runs serial tests before concurrent ones, so no other test's key wrap is mid-flight.
test.serial('pkcs11: key wrap leaves no transient DEK objects behind on the token', async (t) => {
  const kwp = await createPkcs11Backend(config({ kekLabel: 'kwp-clean', mechanism: 'aes-key-wrap-pad', sessions: 1 }), { log: captureLogger().log });
  const blob = await kwp.wrap(randomBytes(32), Buffer.from('ws'));
  await kwp.unwrap(blob, Buffer.from('ws'));
  await t.throwsAsync(kwp.unwrap(blob, Buffer.from('other')));
  const generic = inspect((lib, s) => {
    lib.C_FindObjectsInit(s, [{ type: pkcs11js.CKA_KEY_TYPE, value: pkcs11js.CKK_GENERIC_SECRET }]);
    const found = lib.C_FindObjects(s, 10);
    lib.C_FindObjectsFinal(s);
    return found.length;
  });
  t.is(generic, 0);
  await kwp.close();
});

test('pkcs11: a missing token gives CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE naming the label', async (t) => {
  const cap = captureLogger();
  const backend = await createPkcs11Backend(config({ tokenLabel: 'no-such-token' }), { log: cap.log });
  const err = await t.throwsAsync(backend.wrap(randomBytes(32), Buffer.from('ws')), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE');
  t.is(err?.status, 503);
  t.regex(err?.message ?? '', /token "no-such-token" was not found/);
  t.regex(cap.text(), /not reachable yet/, 'the eager connect logged a warning instead of failing start-up');
  await backend.close();
});

test('pkcs11: a missing module gives CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE naming the path', async (t) => {
  const backend = await createPkcs11Backend(config({ module: '/nonexistent/libpkcs11.so' }), { log: captureLogger().log, eager: false });
  const err = await t.throwsAsync(backend.health(), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE');
  t.regex(err?.message ?? '', /Cannot load the PKCS#11 module \/nonexistent\/libpkcs11\.so/);
});

test('pkcs11: no PIN configured is CUSTOS_ERR_CONFIG at start', async (t) => {
  const err = await t.throwsAsync(createPkcs11Backend(config({ pinFile: null, pin: null }), { log: captureLogger().log }), { instanceOf: CustosError });
  t.is(err?.code, 'CUSTOS_ERR_CONFIG');
});

test('pkcs11: a PIN given inline in config works as well as a PIN file', async (t) => {
  const backend = await createPkcs11Backend(config({ pinFile: null, pin: token.pin, kekLabel: 'inline-pin' }), { log: captureLogger().log });
  const dek = randomBytes(32);
  t.true((await backend.unwrap(await backend.wrap(dek, Buffer.from('w')), Buffer.from('w'))).equals(dek));
  await backend.close();
});
