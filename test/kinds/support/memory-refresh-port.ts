/**
 * An in-memory RefreshPort for tests: a mutex and a Map standing in for the credential row, its
 * row lock and its transaction. Changes made through `tx` are applied only when the callback
 * resolves (like a transaction that commits), so tests see what a database would keep. The lead's
 * production port does the same with a PostgreSQL/SQLite row lock.
 */
import type { RefreshPort, RefreshTx, SecretFields } from '../../../src/kinds/credential-kind.ts';

export type Health = 'unknown' | 'ok' | 'reauth_required';

export class MemoryRefreshPort implements RefreshPort {
  readonly #stored = new Map<string, Buffer>();
  #tail: Promise<void> = Promise.resolve();
  health: Health = 'unknown';
  healthReason: string | undefined;
  /** lock, persist:<field>, health:<state>, commit, rollback, unlock: in order. */
  readonly events: string[] = [];
  /** Every `fresh` Buffer handed to a callback, to prove they are zeroed afterwards. */
  readonly handedOut: Buffer[] = [];
  holders = 0;
  maxHolders = 0;
  /** Called inside persistSecret, before it takes effect (tests look at the world at that moment). */
  onPersist: (() => void) | undefined;
  failPersist = false;

  constructor(initial: Record<string, string>) {
    for (const [k, v] of Object.entries(initial)) this.#stored.set(k, Buffer.from(v, 'latin1'));
  }

  stored(field: string): string | undefined {
    return this.#stored.get(field)?.toString('latin1');
  }

  async withLock<T>(fn: (fresh: SecretFields, tx: RefreshTx) => Promise<T>): Promise<T> {
    const previous = this.#tail;
    let release!: () => void;
    this.#tail = new Promise<void>((resolve) => (release = resolve));
    await previous;
    this.holders += 1;
    this.maxHolders = Math.max(this.maxHolders, this.holders);
    this.events.push('lock');
    const fresh: Record<string, Buffer> = {};
    for (const [k, v] of this.#stored) fresh[k] = Buffer.from(v);
    this.handedOut.push(...Object.values(fresh));
    const staged: Array<() => void> = [];
    const tx: RefreshTx = {
      persistSecret: async (fields) => {
        this.onPersist?.();
        if (this.failPersist) throw new Error('storage unavailable');
        const copies = Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, Buffer.from(v)]));
        this.events.push(...Object.keys(fields).map((k) => `persist:${k}`));
        staged.push(() => {
          for (const [k, v] of Object.entries(copies)) {
            this.#stored.get(k)?.fill(0);
            this.#stored.set(k, v);
          }
        });
      },
      setHealth: async (health, reason) => {
        this.events.push(`health:${health}`);
        staged.push(() => {
          this.health = health;
          this.healthReason = reason;
        });
      },
    };
    try {
      const result = await fn(fresh, tx);
      for (const apply of staged) apply();
      this.events.push('commit');
      return result;
    } catch (err) {
      this.events.push('rollback');
      throw err;
    } finally {
      for (const b of Object.values(fresh)) b.fill(0);
      this.holders -= 1;
      this.events.push('unlock');
      release();
    }
  }
}
