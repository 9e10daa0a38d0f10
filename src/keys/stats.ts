/**
 * Call counting at the key-backend seam. The actor system proves "0 backend calls per
 * steady-state use" by reading `stats` before and after a burst of uses; benchmarks read it too.
 * Every call is counted when it is made, whether it succeeds or not: a failed unwrap still reached
 * the HSM/KMS.
 */
import { isRotatable, type KeyBackend, type KeyBackendStats, type RotatableKeyBackend } from './key-backend.ts';

export interface CountedKeyBackend extends KeyBackend {
  /** Live counters (the same object throughout; copy it to take a snapshot). */
  readonly stats: KeyBackendStats;
  /** The backend being counted (e.g. to reach pkcs11-only tooling in tests). */
  readonly inner: KeyBackend;
  resetStats(): void;
}

export type CountedRotatableKeyBackend = CountedKeyBackend & RotatableKeyBackend;

export function withStats<B extends KeyBackend>(backend: B): B extends RotatableKeyBackend ? CountedRotatableKeyBackend : CountedKeyBackend;
export function withStats(backend: KeyBackend): CountedKeyBackend {
  const stats: KeyBackendStats = { wraps: 0, unwraps: 0 };
  const counted: CountedKeyBackend = {
    get id() {
      return backend.id;
    },
    stats,
    inner: backend,
    resetStats() {
      stats.wraps = 0;
      stats.unwraps = 0;
    },
    wrap(dek, aad) {
      stats.wraps += 1;
      return backend.wrap(dek, aad);
    },
    unwrap(blob, aad) {
      stats.unwraps += 1;
      return backend.unwrap(blob, aad);
    },
    health: () => backend.health(),
    close: () => backend.close(),
  };
  if (isRotatable(backend)) {
    // Only rotatable backends get rotateKek, so isRotatable() keeps telling the truth.
    (counted as CountedRotatableKeyBackend).rotateKek = () => backend.rotateKek();
  }
  return counted;
}
