import { randomBytes } from 'node:crypto';
import test from 'ava';
import { CustosError } from '../../src/errors.ts';
import { DEK_BYTES, FIELD_BLOB_VERSION, decryptField, encodeFieldAad, encryptField, generateDek, type FieldAad } from '../../src/keys/envelope.ts';

const aad: FieldAad = { workspaceId: 'ws-1', credentialId: 'cred-1', field: 'apiKey' };

function integrity(t: import('ava').ExecutionContext, fn: () => unknown, what: string): void {
  const err = t.throws(fn, { instanceOf: CustosError }, what);
  t.is(err?.code, 'CUSTOS_ERR_INTEGRITY', what);
  t.is(err?.message, 'Stored secret failed its integrity check.', `${what}: generic message`);
}

test('generateDek returns 32 random bytes, different each time', (t) => {
  const a = generateDek();
  const b = generateDek();
  t.is(a.length, DEK_BYTES);
  t.false(a.equals(b));
});

test('encryptField/decryptField round-trips and the blob is version ‖ 12-byte nonce ‖ ciphertext ‖ 16-byte tag', (t) => {
  const dek = generateDek();
  const secret = Buffer.from(`MARKER-${randomBytes(8).toString('hex')}`);
  const blob = encryptField(dek, secret, aad);
  t.is(blob[0], FIELD_BLOB_VERSION);
  t.is(blob.length, 1 + 12 + secret.length + 16);
  t.is(blob.indexOf(secret), -1, 'no plaintext in the blob');
  const out = decryptField(dek, blob, aad);
  t.true(out.equals(secret));
});

test('an empty secret round-trips too', (t) => {
  const dek = generateDek();
  t.is(decryptField(dek, encryptField(dek, Buffer.alloc(0), aad), aad).length, 0);
});

test('the same plaintext encrypted twice gives different blobs', (t) => {
  const dek = generateDek();
  const secret = Buffer.from('same secret');
  const one = encryptField(dek, secret, aad);
  const two = encryptField(dek, secret, aad);
  t.false(one.equals(two));
  t.false(one.subarray(1, 13).equals(two.subarray(1, 13)), 'fresh nonce each time');
});

test('flipping any bit of any byte of the blob fails with a generic integrity error', (t) => {
  const dek = generateDek();
  const blob = encryptField(dek, Buffer.from('a secret value of some length'), aad);
  for (let i = 0; i < blob.length; i += 1) {
    for (const bit of [0, 7]) {
      const bad = Buffer.from(blob);
      bad[i] = bad[i]! ^ (1 << bit);
      integrity(t, () => decryptField(dek, bad, aad), `byte ${i} bit ${bit}`);
    }
  }
  integrity(t, () => decryptField(dek, blob.subarray(0, blob.length - 1), aad), 'truncated');
  integrity(t, () => decryptField(dek, Buffer.concat([blob, Buffer.from([0])]), aad), 'extended');
  integrity(t, () => decryptField(dek, blob.subarray(0, 28), aad), 'shorter than header + tag');
});

test('a blob moved to another workspace, credential or field fails to decrypt', (t) => {
  const dek = generateDek();
  const blob = encryptField(dek, Buffer.from('s3cr3t'), aad);
  integrity(t, () => decryptField(dek, blob, { ...aad, workspaceId: 'ws-2' }), 'other workspace');
  integrity(t, () => decryptField(dek, blob, { ...aad, credentialId: 'cred-2' }), 'other credential');
  integrity(t, () => decryptField(dek, blob, { ...aad, field: 'password' }), 'other field');
});

test('the AAD encoding is length-prefixed, so shifting characters between parts changes it', (t) => {
  const a = encodeFieldAad({ workspaceId: 'ab', credentialId: 'c', field: 'f' });
  const b = encodeFieldAad({ workspaceId: 'a', credentialId: 'bc', field: 'f' });
  t.false(a.equals(b));
  const dek = generateDek();
  const blob = encryptField(dek, Buffer.from('x'), { workspaceId: 'ab', credentialId: 'c', field: 'f' });
  integrity(t, () => decryptField(dek, blob, { workspaceId: 'a', credentialId: 'bc', field: 'f' }), 'shifted boundary');
});

test('a wrong DEK, a wrong-length DEK or an empty AAD part fails with the integrity error', (t) => {
  const dek = generateDek();
  const blob = encryptField(dek, Buffer.from('x'), aad);
  integrity(t, () => decryptField(generateDek(), blob, aad), 'other DEK');
  integrity(t, () => decryptField(dek.subarray(0, 16), blob, aad), 'short DEK on decrypt');
  integrity(t, () => encryptField(dek.subarray(0, 16), Buffer.from('x'), aad), 'short DEK on encrypt');
  integrity(t, () => encryptField(dek, Buffer.from('x'), { ...aad, field: '' }), 'empty field name');
});

test('integrity errors never carry the plaintext, DEK or blob', (t) => {
  const dek = generateDek();
  const marker = `MARKER-${randomBytes(8).toString('hex')}`;
  const blob = encryptField(dek, Buffer.from(marker), aad);
  const err = t.throws(() => decryptField(dek, blob, { ...aad, field: 'other' }), { instanceOf: CustosError });
  const text = `${err?.message} ${JSON.stringify(err?.toJSON())} ${String(err?.stack)}`;
  for (const needle of [marker, dek.toString('hex'), dek.toString('base64'), blob.toString('hex'), blob.toString('base64')]) {
    t.false(text.includes(needle));
  }
});
