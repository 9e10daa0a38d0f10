/**
 * The key-backend conformance macro: every backend must pass every check. Used from
 * test/keys/*.test.ts as
 *
 *   registerKeyBackendConformance(test, { name: 'pkcs11 (aes-gcm)', open, randomized: true, rotatable: true });
 *
 * or one check at a time: `test(keyBackendConformance, 'tamper', subject)`.
 *
 * What it pins (DESIGN.md §2, issue 3): round trip; the caller may zero its DEK right after wrap;
 * a wrong workspace (AAD) fails with CUSTOS_ERR_INTEGRITY; a flipped bit anywhere in the blob,
 * a truncated or extended blob fails with CUSTOS_ERR_INTEGRITY; randomised mechanisms never repeat
 * a blob; after rotateKek old blobs still unwrap and new wraps carry the new version; concurrent
 * calls all succeed; bad input is CUSTOS_ERR_VALIDATION; a closed backend refuses with
 * CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE; no error message carries the DEK.
 */
import { randomBytes } from 'node:crypto';
import test, { type ExecutionContext, type TestFn } from 'ava';
import { CustosError } from '../errors.ts';
import { isRotatable, type KeyBackend } from './key-backend.ts';
import { WRAP_HEADER_BYTES } from './wrapped-blob.ts';

export interface ConformanceSubject {
  /** Shown in test titles, e.g. "pkcs11 (aes-gcm)". */
  name: string;
  /** Opens a fresh backend instance; the macro closes it. */
  open(): Promise<KeyBackend>;
  /** Whether two wraps of one DEK must differ (false for deterministic key wrap). */
  randomized: boolean;
  /** Whether the backend must offer rotateKek (false: rotation happens inside the KMS). */
  rotatable: boolean;
}

export const CONFORMANCE_CHECKS = [
  'round-trip',
  'wrong-aad',
  'tamper',
  'randomness',
  'rotation',
  'concurrency',
  'bad-input',
  'closed',
] as const;
export type ConformanceCheck = (typeof CONFORMANCE_CHECKS)[number];

const TITLES: Record<ConformanceCheck, string> = {
  'round-trip': 'wrap/unwrap round-trips a DEK the caller zeroed right after wrapping',
  'wrong-aad': 'unwrapping with another workspace as associated data fails with CUSTOS_ERR_INTEGRITY',
  tamper: 'a flipped bit at every position, a truncated or an extended blob fails with CUSTOS_ERR_INTEGRITY',
  randomness: 'two wraps of one DEK differ when the mechanism is randomised (and are equal when it is deterministic)',
  rotation: 'after rotateKek old blobs still unwrap and new wraps use the new KEK version',
  concurrency: '64 concurrent wraps and unwraps all succeed',
  'bad-input': 'a DEK that is not 32 bytes or empty associated data is refused with CUSTOS_ERR_VALIDATION',
  closed: 'a closed backend refuses with CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE',
};

function aadFor(workspace: string): Buffer {
  return Buffer.from(workspace, 'utf8');
}

async function expectCode(t: ExecutionContext, p: Promise<unknown>, code: CustosError['code'], what: string, secret?: Buffer): Promise<void> {
  const err = await t.throwsAsync(p, { instanceOf: CustosError }, what);
  if (!err) return;
  t.is((err as CustosError).code, code, what);
  if (secret) {
    const text = `${err.message} ${JSON.stringify((err as CustosError).toJSON())}`;
    t.false(text.includes(secret.toString('hex')), `${what}: error text carries no DEK (hex)`);
    t.false(text.includes(secret.toString('base64')), `${what}: error text carries no DEK (base64)`);
  }
}

async function exec(t: ExecutionContext, check: ConformanceCheck, subject: ConformanceSubject): Promise<void> {
  const backend = await subject.open();
  try {
    await CHECKS[check](t, backend, subject);
  } finally {
    await backend.close();
  }
}

const CHECKS: Record<ConformanceCheck, (t: ExecutionContext, b: KeyBackend, s: ConformanceSubject) => Promise<void>> = {
  async 'round-trip'(t, b) {
    const dek = randomBytes(32);
    const callerCopy = Buffer.from(dek);
    const ws = aadFor(`ws-${randomBytes(4).toString('hex')}`);
    const blob = await b.wrap(callerCopy, ws);
    callerCopy.fill(0); // the caller zeroes its DEK right after wrap: the blob must not depend on it
    t.true(Buffer.isBuffer(blob));
    t.is(blob.indexOf(dek), -1, 'the blob does not contain the DEK in the clear');
    t.regex(b.id, /^(local-dev|pkcs11|aws-kms):\S+$/);
    const out = await b.unwrap(blob, ws);
    t.true(out.equals(dek));
    out.fill(0);
    const again = await b.unwrap(blob, ws);
    t.true(again.equals(dek), 'a blob unwraps any number of times');
    again.fill(0);
  },

  async 'wrong-aad'(t, b) {
    const dek = randomBytes(32);
    const blob = await b.wrap(dek, aadFor('ws-1'));
    for (const other of ['ws-2', 'ws-10', 'ws-', 'WS-1', 'ws-1 ']) {
      await expectCode(t, b.unwrap(blob, aadFor(other)), 'CUSTOS_ERR_INTEGRITY', `aad ${JSON.stringify(other)}`, dek);
    }
  },

  async tamper(t, b) {
    const dek = randomBytes(32);
    const ws = aadFor('ws-tamper');
    const blob = await b.wrap(dek, ws);
    t.true(blob.length > WRAP_HEADER_BYTES);
    for (let i = 0; i < blob.length; i += 1) {
      const bad = Buffer.from(blob);
      bad[i] = bad[i]! ^ (1 << (i % 8));
      await expectCode(t, b.unwrap(bad, ws), 'CUSTOS_ERR_INTEGRITY', `bit ${i % 8} of byte ${i} flipped`, dek);
    }
    await expectCode(t, b.unwrap(blob.subarray(0, blob.length - 1), ws), 'CUSTOS_ERR_INTEGRITY', 'truncated by one byte');
    await expectCode(t, b.unwrap(blob.subarray(0, WRAP_HEADER_BYTES), ws), 'CUSTOS_ERR_INTEGRITY', 'header only');
    await expectCode(t, b.unwrap(Buffer.concat([blob, Buffer.from([0])]), ws), 'CUSTOS_ERR_INTEGRITY', 'extended by one byte');
    await expectCode(t, b.unwrap(Buffer.alloc(0), ws), 'CUSTOS_ERR_INTEGRITY', 'empty blob');
    const out = await b.unwrap(blob, ws);
    t.true(out.equals(dek), 'the untouched blob still unwraps');
  },

  async randomness(t, b, s) {
    const dek = randomBytes(32);
    const ws = aadFor('ws-random');
    const one = await b.wrap(dek, ws);
    const two = await b.wrap(dek, ws);
    if (s.randomized) t.false(one.equals(two), 'two wraps of one DEK differ');
    else t.true(one.equals(two), 'the deterministic mechanism gives one blob per (DEK, workspace)');
    t.true((await b.unwrap(one, ws)).equals(dek));
    t.true((await b.unwrap(two, ws)).equals(dek));
    const other = await b.wrap(dek, aadFor('ws-random-2'));
    t.false(other.equals(one), 'the same DEK for another workspace gives another blob');
  },

  async rotation(t, b, s) {
    if (!s.rotatable) {
      t.false(isRotatable(b), `${s.name} declares no rotateKek (rotation is done by the KMS itself)`);
      return;
    }
    if (!isRotatable(b)) {
      t.fail(`${s.name} must implement rotateKek`);
      return;
    }
    const dek = randomBytes(32);
    const ws = aadFor('ws-rotate');
    const oldBlob = await b.wrap(dek, ws);
    const oldId = b.id;
    const oldVersion = oldBlob.readUInt32BE(1);
    const newId = await b.rotateKek();
    t.is(b.id, newId);
    t.not(newId, oldId, 'the id names the new KEK version');
    const newBlob = await b.wrap(dek, ws);
    t.true(newBlob.readUInt32BE(1) > oldVersion, 'new wraps carry a newer KEK version');
    t.true(newId.endsWith(`-v${newBlob.readUInt32BE(1)}`), 'the id ends with the version new blobs carry');
    t.true((await b.unwrap(oldBlob, ws)).equals(dek), 'old blobs still unwrap');
    t.true((await b.unwrap(newBlob, ws)).equals(dek), 'new blobs unwrap');
    await expectCode(t, b.unwrap(newBlob, aadFor('ws-other')), 'CUSTOS_ERR_INTEGRITY', 'new blob, wrong aad');
    // The old version in the header cannot be grafted onto the new body.
    const grafted = Buffer.from(newBlob);
    grafted.writeUInt32BE(oldVersion, 1);
    await expectCode(t, b.unwrap(grafted, ws), 'CUSTOS_ERR_INTEGRITY', 'new body under the old version number');
  },

  async concurrency(t, b) {
    const items = Array.from({ length: 64 }, (_, i) => ({ dek: randomBytes(32), ws: aadFor(`ws-c-${i}`) }));
    const blobs = await Promise.all(items.map((it) => b.wrap(it.dek, it.ws)));
    const outs = await Promise.all(blobs.map((blob, i) => b.unwrap(blob, items[i]!.ws)));
    t.true(outs.every((out, i) => out.equals(items[i]!.dek)));
  },

  async 'bad-input'(t, b) {
    await expectCode(t, b.wrap(randomBytes(16), aadFor('ws')), 'CUSTOS_ERR_VALIDATION', '16-byte DEK');
    await expectCode(t, b.wrap(Buffer.alloc(0), aadFor('ws')), 'CUSTOS_ERR_VALIDATION', 'empty DEK');
    await expectCode(t, b.wrap(randomBytes(32), Buffer.alloc(0)), 'CUSTOS_ERR_VALIDATION', 'empty aad on wrap');
    const blob = await b.wrap(randomBytes(32), aadFor('ws'));
    await expectCode(t, b.unwrap(blob, Buffer.alloc(0)), 'CUSTOS_ERR_VALIDATION', 'empty aad on unwrap');
  },

  async closed(t, b) {
    const dek = randomBytes(32);
    const blob = await b.wrap(dek, aadFor('ws'));
    await b.close();
    await expectCode(t, b.wrap(dek, aadFor('ws')), 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE', 'wrap after close');
    await expectCode(t, b.unwrap(blob, aadFor('ws')), 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE', 'unwrap after close');
  },
};

export const keyBackendConformance = test.macro<[ConformanceCheck, ConformanceSubject]>({
  exec,
  title: (provided, check, subject) =>
    provided ??
    `${subject.name}: ${check === 'rotation' && !subject.rotatable ? 'declares no rotateKek (the KMS rotates its own key material)' : TITLES[check]}`,
});

/** Registers every conformance check as its own test. */
export function registerKeyBackendConformance(testFn: TestFn, subject: ConformanceSubject): void {
  for (const check of CONFORMANCE_CHECKS) testFn(keyBackendConformance, check, subject);
}
