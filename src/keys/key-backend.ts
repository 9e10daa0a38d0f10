/**
 * The key-backend seam. A backend holds the key-encryption key (KEK) and wraps/unwraps workspace
 * data keys (DEKs). The KEK never leaves the backend: for pkcs11 it is a non-extractable,
 * sensitive object inside the token; for aws-kms it stays in KMS; local-dev keeps it in a 0600
 * file and is refused in production.
 *
 * `aad` binds a wrapped DEK to its workspace (the workspace id's UTF-8 bytes): a wrapped DEK copied
 * onto another workspace fails to unwrap.
 *
 * Blobs are self-describing: they carry a format byte and the KEK version that made them, so that
 * `unwrap` works across KEK rotations. Any failure to unwrap (wrong aad, tampered blob, wrong KEK)
 * throws CustosError CUSTOS_ERR_INTEGRITY; a backend that cannot be reached (HSM login failure,
 * token missing, KMS down) throws CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE. Never a fallback.
 */
export interface KeyBackend {
  /** Backend kind and current KEK version, e.g. "pkcs11:kek-v1", stored beside each wrapped DEK. */
  readonly id: string;
  /** Wraps a DEK under the current KEK. The caller still owns (and zeroes) `dek`. */
  wrap(dek: Buffer, aad: Buffer): Promise<Buffer>;
  /** Unwraps a blob made by any KEK version this backend knows. Caller zeroes the result. */
  unwrap(blob: Buffer, aad: Buffer): Promise<Buffer>;
  /** Throws CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE when the backend cannot serve. */
  health(): Promise<void>;
  close(): Promise<void>;
}

/** Optional capability: the backend can create a new KEK version and make it current. */
export interface RotatableKeyBackend extends KeyBackend {
  /** Creates (or finds) the next KEK version and makes it current; returns the new `id`. */
  rotateKek(): Promise<string>;
}

export function isRotatable(backend: KeyBackend): backend is RotatableKeyBackend {
  return typeof (backend as Partial<RotatableKeyBackend>).rotateKek === 'function';
}

/** Counts calls, for the "0 backend calls per steady-state use" proof and benchmarks. */
export interface KeyBackendStats {
  wraps: number;
  unwraps: number;
}
