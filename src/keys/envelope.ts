/**
 * Field encryption under a workspace data key (DEK): AES-256-GCM from node:crypto.
 *
 * Blob layout (version 0x01):  0x01 ‖ nonce (12 bytes, random) ‖ ciphertext ‖ tag (16 bytes)
 *
 * The associated data binds a blob to (workspace id, credential id, field name) and to the
 * version byte, so a ciphertext row copied into another workspace, onto another credential or
 * into another field fails authentication. Each string is length-prefixed (uint32 BE) so that
 * ("ab","c") and ("a","bc") can never produce the same AAD.
 *
 * A fresh random 96-bit nonce per encryption: with one DEK per workspace and far fewer than 2^32
 * encryptions under it, the random-nonce collision bound stays negligible; `rotate-dek` resets it.
 *
 * Every failure is the same generic CUSTOS_ERR_INTEGRITY: the caller learns nothing about which
 * part was wrong (no oracle), and no message ever quotes key, nonce or data.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { CustosError } from '../errors.ts';

export interface FieldAad {
  workspaceId: string;
  credentialId: string;
  field: string;
}

export const FIELD_BLOB_VERSION = 0x01;
export const DEK_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 1 + NONCE_BYTES;

/** A fresh 256-bit data key. The caller owns it and zeroes it when done. */
export function generateDek(): Buffer {
  return randomBytes(DEK_BYTES);
}

/** The unambiguous AAD: version ‖ (len ‖ utf8) × 3. Exported for tests and documentation. */
export function encodeFieldAad(aad: FieldAad, version: number = FIELD_BLOB_VERSION): Buffer {
  const parts: Buffer[] = [Buffer.from([version])];
  for (const value of [aad.workspaceId, aad.credentialId, aad.field]) {
    if (typeof value !== 'string' || value.length === 0) throw integrityError();
    const bytes = Buffer.from(value, 'utf8');
    const len = Buffer.alloc(4);
    len.writeUInt32BE(bytes.length);
    parts.push(len, bytes);
  }
  return Buffer.concat(parts);
}

export function encryptField(dek: Buffer, plaintext: Buffer, aad: FieldAad): Buffer {
  try {
    checkDek(dek);
    if (!Buffer.isBuffer(plaintext)) throw integrityError();
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', dek, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(encodeFieldAad(aad));
    const body = cipher.update(plaintext);
    const tail = cipher.final();
    return Buffer.concat([Buffer.from([FIELD_BLOB_VERSION]), nonce, body, tail, cipher.getAuthTag()]);
  } catch (err) {
    throw asIntegrity(err);
  }
}

/** Returns the plaintext in a fresh Buffer; the caller zeroes it right after use. */
export function decryptField(dek: Buffer, blob: Buffer, aad: FieldAad): Buffer {
  try {
    checkDek(dek);
    if (!Buffer.isBuffer(blob) || blob.length < HEADER_BYTES + TAG_BYTES) throw integrityError();
    if (blob[0] !== FIELD_BLOB_VERSION) throw integrityError();
    const nonce = blob.subarray(1, HEADER_BYTES);
    const body = blob.subarray(HEADER_BYTES, blob.length - TAG_BYTES);
    const tag = blob.subarray(blob.length - TAG_BYTES);
    const decipher = createDecipheriv('aes-256-gcm', dek, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(encodeFieldAad(aad, blob[0]));
    decipher.setAuthTag(tag);
    const part = decipher.update(body);
    try {
      // final() authenticates; on failure the unauthenticated `part` must not survive.
      const tail = decipher.final();
      if (tail.length === 0) return part;
      const out = Buffer.concat([part, tail]);
      tail.fill(0);
      part.fill(0);
      return out;
    } catch (err) {
      part.fill(0);
      throw err;
    }
  } catch (err) {
    throw asIntegrity(err);
  }
}

function checkDek(dek: Buffer): void {
  if (!Buffer.isBuffer(dek) || dek.length !== DEK_BYTES) throw integrityError();
}

function integrityError(cause?: unknown): CustosError {
  return new CustosError('CUSTOS_ERR_INTEGRITY', 'Stored secret failed its integrity check.', {
    cause,
  });
}

function asIntegrity(err: unknown): CustosError {
  if (err instanceof CustosError && err.code === 'CUSTOS_ERR_INTEGRITY') return err;
  // The library's message is dropped: only the generic error leaves this module.
  return integrityError(err);
}
