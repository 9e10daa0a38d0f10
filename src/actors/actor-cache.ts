/**
 * The per-actor cache for values derived from secrets (SigV4 signing keys, OAuth2 access tokens).
 *
 * Why it exists: derived values are expensive or rate-limited to recompute (an OAuth2 refresh is a
 * network round trip), but they are still secret material. Keeping them here, inside the workspace
 * actor, means they share the actor's lifetime: they are zeroed when they expire, when they are
 * overwritten or deleted, when a credential's secret changes (`scope(id).clear()`), and when the
 * actor passivates or shuts down (`clear()`). Nothing derived from a secret is cached anywhere else.
 *
 * Ownership rule: `set()` takes ownership of the Buffer it is given (the cache will zero it later),
 * so callers hand over a Buffer they do not keep. `get()` returns the cached Buffer itself, not a
 * copy: callers use it synchronously (build the header, compute the HMAC) and neither keep nor
 * mutate it; if they need it past an `await`, they copy it and zero their copy.
 */
import type { ActorCache as ActorCachePort } from '../kinds/credential-kind.ts';

interface Entry {
  value: Buffer;
  expiresAtMs: number;
}

export interface ActorCacheOptions {
  /** Clock, for tests; defaults to Date.now. */
  now?: () => number;
  /** When set, expired entries are zeroed on this interval even if nobody reads them (timer is unref'd). */
  sweepIntervalMs?: number;
}

/** A credential's private view of the actor cache (keys are namespaced by credential id). */
export interface ScopedActorCache extends ActorCachePort {
  readonly credentialId: string;
  /** Zeroes and drops every entry of this credential (e.g. when its secret is replaced). */
  clear(): void;
  /** Live entries of this credential. */
  readonly size: number;
}

// NUL cannot occur in a credential id we accept, so `${id}\0${key}` cannot collide across credentials.
const SEP = '\u0000';

export class ActorCache implements ActorCachePort {
  readonly #entries = new Map<string, Entry>();
  readonly #views = new Map<string, ScopedActorCache>();
  readonly #now: () => number;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: ActorCacheOptions = {}) {
    this.#now = options.now ?? Date.now;
    if (options.sweepIntervalMs !== undefined) {
      this.#timer = setInterval(() => this.sweep(), options.sweepIntervalMs);
      this.#timer.unref();
    }
  }

  get(key: string): Buffer | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAtMs <= this.#now()) {
      this.#drop(key, entry);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: Buffer, expiresAtMs: number): void {
    if (!Buffer.isBuffer(value)) throw new TypeError('ActorCache values must be Buffers (so they can be zeroed).');
    if (!Number.isFinite(expiresAtMs)) throw new TypeError('ActorCache entries need a finite expiry.');
    // Sets are rare (a derivation, a refresh): a good moment to zero whatever else has expired,
    // e.g. yesterday's SigV4 key, which nobody will ever read again.
    this.sweep();
    const previous = this.#entries.get(key);
    if (previous && previous.value !== value) previous.value.fill(0);
    if (expiresAtMs <= this.#now()) {
      // Already expired: we own it now, so zero it rather than store it.
      this.#entries.delete(key);
      value.fill(0);
      return;
    }
    this.#entries.set(key, { value, expiresAtMs });
  }

  delete(key: string): void {
    const entry = this.#entries.get(key);
    if (entry) this.#drop(key, entry);
  }

  /** Zeroes and drops every entry (actor passivation, shutdown, DEK rotation). */
  clear(): void {
    for (const entry of this.#entries.values()) entry.value.fill(0);
    this.#entries.clear();
  }

  /** Zeroes and drops expired entries; returns how many were dropped. */
  sweep(): number {
    const now = this.#now();
    let dropped = 0;
    for (const [key, entry] of this.#entries) {
      if (entry.expiresAtMs <= now) {
        this.#drop(key, entry);
        dropped += 1;
      }
    }
    return dropped;
  }

  /** Live (unexpired) entries across all credentials. */
  get size(): number {
    this.sweep();
    return this.#entries.size;
  }

  /** Stops the sweep timer and zeroes everything. */
  close(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.clear();
  }

  /**
   * The view a kind gets as `ctx.cache`: keys are prefixed with the credential id, so one
   * credential can neither read nor evict another's derived keys. Views are memoised, so the same
   * object comes back for the same credential.
   */
  scope(credentialId: string): ScopedActorCache {
    if (typeof credentialId !== 'string' || credentialId.length === 0 || credentialId.includes(SEP)) {
      throw new TypeError('ActorCache.scope needs a non-empty credential id without NUL.');
    }
    const existing = this.#views.get(credentialId);
    if (existing) return existing;
    const prefix = credentialId + SEP;
    const root = this;
    const view: ScopedActorCache = {
      credentialId,
      get: (key) => root.get(prefix + key),
      set: (key, value, expiresAtMs) => root.set(prefix + key, value, expiresAtMs),
      delete: (key) => root.delete(prefix + key),
      clear: () => root.#clearPrefix(prefix),
      get size() {
        return root.#countPrefix(prefix);
      },
    };
    this.#views.set(credentialId, view);
    return view;
  }

  #drop(key: string, entry: Entry): void {
    entry.value.fill(0);
    this.#entries.delete(key);
  }

  #clearPrefix(prefix: string): void {
    for (const [key, entry] of this.#entries) {
      if (key.startsWith(prefix)) this.#drop(key, entry);
    }
  }

  #countPrefix(prefix: string): number {
    this.sweep();
    let n = 0;
    for (const key of this.#entries.keys()) if (key.startsWith(prefix)) n += 1;
    return n;
  }
}
