/**
 * The shared shape of a wrapped-DEK blob and the errors every backend throws.
 *
 *   format (1 byte) ‖ KEK version (uint32 BE) ‖ backend-specific body
 *
 * Each backend and mechanism has its own format byte, so a blob handed to the wrong backend (or a
 * config switched from aes-gcm to key wrap) is recognised instead of misparsed; the version says
 * which KEK made it, so unwrap keeps working across rotations. Backends authenticate the header
 * together with the caller's AAD, so flipping the format or version bytes fails like any other
 * tampering.
 */
import { CustosError } from '../errors.ts';

export const WRAP_FORMAT = {
  localDevAesGcm: 0x01,
  pkcs11AesGcm: 0x11,
  pkcs11AesKwp: 0x12,
  awsKms: 0x21,
} as const;

export const WRAP_HEADER_BYTES = 5;
export const WRAPPED_DEK_BYTES = 32;

export function wrapHeader(format: number, version: number): Buffer {
  const header = Buffer.alloc(WRAP_HEADER_BYTES);
  header[0] = format;
  header.writeUInt32BE(version, 1);
  return header;
}

/** Parses the header; a short blob or an unexpected format byte is an integrity failure. */
export function readWrapHeader(
  blob: Buffer,
  formats: readonly number[],
): { format: number; version: number; header: Buffer; body: Buffer } {
  if (!Buffer.isBuffer(blob) || blob.length <= WRAP_HEADER_BYTES) throw wrapIntegrityError();
  const format = blob[0]!;
  if (!formats.includes(format)) throw wrapIntegrityError();
  const version = blob.readUInt32BE(1);
  if (version === 0) throw wrapIntegrityError();
  return {
    format,
    version,
    header: blob.subarray(0, WRAP_HEADER_BYTES),
    body: blob.subarray(WRAP_HEADER_BYTES),
  };
}

/** DEKs are 256-bit; anything else is a caller bug, refused before any key is touched. */
export function checkDekInput(dek: Buffer): void {
  if (!Buffer.isBuffer(dek) || dek.length !== WRAPPED_DEK_BYTES) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', `A data key must be ${WRAPPED_DEK_BYTES} bytes.`);
  }
}

export function checkAadInput(aad: Buffer): void {
  if (!Buffer.isBuffer(aad) || aad.length === 0) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'Wrapping a data key needs associated data (the workspace id).');
  }
}

/** One generic message for every unwrap failure: no oracle on which part was wrong. */
export function wrapIntegrityError(cause?: unknown): CustosError {
  return new CustosError('CUSTOS_ERR_INTEGRITY', 'Wrapped workspace key failed its integrity check.', { cause });
}

export function backendUnavailable(message: string, cause?: unknown): CustosError {
  return new CustosError('CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE', message, { cause });
}
