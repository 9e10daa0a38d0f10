/**
 * One workspace's actor: the only holder of that workspace's DEK and of any plaintext secret
 * (DESIGN.md invariant 3). Front ends and core services send it work and get results back.
 *
 * Plaintext discipline: secret fields are decrypted into Buffers immediately before a kind uses
 * them and zeroed in a `finally` right after, whatever happens.
 */
import type { Logger } from '../log.ts';
import { CustosError } from '../errors.ts';
import { decryptField, encryptField, generateDek } from '../keys/envelope.ts';
import type { KeyBackend } from '../keys/key-backend.ts';
import type { KindContext, RefreshPort, SecretFields } from '../kinds/credential-kind.ts';
import type { Resealed, CredentialRow } from '../core/ports.ts';
import { ActorCache } from './actor-cache.ts';
import { Mailbox, StaleKeyError } from './mailbox.ts';

/** Ciphertext per secret field, base64, as stored in credentials.secret. */
export type SealedSecret = Record<string, string>;

export interface ActorHooks {
  /** Something the actor must close when the credential's secret changes or the actor passivates. */
  onCredentialReset(credentialId: string, fn: () => Promise<void>): void;
}

export interface UseContext {
  secret: SecretFields;
  kind: KindContext;
}

export function workspaceAad(workspaceId: string): Buffer {
  return Buffer.from(`custos-workspace:${workspaceId}`, 'utf8');
}

export class WorkspaceActor implements ActorHooks {
  readonly workspaceId: string;
  readonly mailbox: Mailbox;
  readonly cache = new ActorCache();
  #dek: Buffer;
  #dekVersion: number;
  #lastUsed = Date.now();
  #closed = false;
  readonly #resets = new Map<string, Array<() => Promise<void>>>();
  readonly #log: Logger;

  constructor(workspaceId: string, dek: Buffer, dekVersion: number, useConcurrency: number, log: Logger) {
    this.workspaceId = workspaceId;
    this.#dek = dek;
    this.#dekVersion = dekVersion;
    this.mailbox = new Mailbox(useConcurrency);
    this.#log = log;
  }

  get dekVersion(): number {
    return this.#dekVersion;
  }
  get lastUsed(): number {
    return this.#lastUsed;
  }
  get closed(): boolean {
    return this.#closed;
  }
  /** For tests: a view of the DEK bytes to prove they are zeroed on passivation. */
  dekForTests(): Buffer {
    return this.#dek;
  }

  readonly #resources = new Map<string, unknown>();

  /**
   * A per-credential resource that outlives one call (a database pool). Created on first need with
   * the decrypted secret, kept until the credential's secret changes or the actor passivates, then
   * closed. Keyed by secret version too, so a replaced secret never reuses an old pool.
   */
  resource<T>(credentialId: string, version: number, create: () => T, close: (r: T) => Promise<void>): T {
    const key = `${credentialId}\u0000${version}`;
    const existing = this.#resources.get(key);
    if (existing !== undefined) return existing as T;
    const created = create();
    this.#resources.set(key, created);
    this.onCredentialReset(credentialId, async () => {
      this.#resources.delete(key);
      await close(created);
    });
    return created;
  }

  onCredentialReset(credentialId: string, fn: () => Promise<void>): void {
    const list = this.#resets.get(credentialId) ?? [];
    list.push(fn);
    this.#resets.set(credentialId, list);
  }

  /** Encrypts secret fields under the current DEK. Call inside an exclusive or use message. */
  seal(credentialId: string, fields: Record<string, Buffer>): { sealed: SealedSecret; dekVersion: number } {
    const sealed: SealedSecret = {};
    for (const [field, value] of Object.entries(fields)) {
      sealed[field] = encryptField(this.#dek, value, { workspaceId: this.workspaceId, credentialId, field }).toString('base64');
    }
    return { sealed, dekVersion: this.#dekVersion };
  }

  /** Decrypts a credential's fields into fresh Buffers; the caller must zero them (see withSecret). */
  #open(row: CredentialRow, dek: Buffer = this.#dek): Record<string, Buffer> {
    if (row.workspace_id !== this.workspaceId) throw new CustosError('CUSTOS_ERR_INTEGRITY', 'Stored secret failed its integrity check.');
    if (!row.secret || row.status !== 'ready') {
      throw new CustosError('CUSTOS_ERR_NOT_READY', `Service '${row.name}' is not ready: a person must supply the secret in the Custos app first.`);
    }
    const sealed = JSON.parse(row.secret) as SealedSecret;
    const out: Record<string, Buffer> = {};
    try {
      for (const [field, blob] of Object.entries(sealed)) {
        out[field] = decryptField(dek, Buffer.from(blob, 'base64'), { workspaceId: this.workspaceId, credentialId: row.id, field });
      }
    } catch (err) {
      for (const b of Object.values(out)) b.fill(0);
      throw err;
    }
    return out;
  }

  /**
   * Runs `fn` with the credential's decrypted secret as a use message (concurrent, capped). The
   * Buffers are zeroed when `fn` settles; `fn` must not keep them.
   */
  use<T>(row: CredentialRow, refresh: RefreshPort | undefined, fn: (u: UseContext) => Promise<T>, reload: () => Promise<CredentialRow | null>): Promise<T> {
    return this.mailbox.use(async () => {
      this.#lastUsed = Date.now();
      let current = row;
      if (current.dek_version !== this.#dekVersion) {
        // The row was read before a DEK rotation finished; read it again under the new key.
        const again = await reload();
        if (!again) throw new CustosError('CUSTOS_ERR_NOT_FOUND', 'Service not found.');
        current = again;
        if (current.dek_version > this.#dekVersion) throw new StaleKeyError();
      }
      const secret = this.#open(current);
      try {
        return await fn({ secret, kind: this.kindContext(current.id, refresh) });
      } finally {
        for (const b of Object.values(secret)) b.fill(0);
      }
    });
  }

  kindContext(credentialId: string, refresh?: RefreshPort): KindContext {
    return {
      workspaceId: this.workspaceId, credentialId, cache: this.cache.scope(credentialId), log: this.#log,
      now: Date.now, ...(refresh ? { refresh } : {}),
    };
  }

  /** Decrypts under the lock a refresh holds (used by the RefreshPort implementation). */
  openForRefresh(row: CredentialRow): Record<string, Buffer> {
    return this.#open(row);
  }

  /** A secret changed: drop everything cached or pooled for that credential. */
  async resetCredential(credentialId: string): Promise<void> {
    this.cache.scope(credentialId).clear();
    const fns = this.#resets.get(credentialId) ?? [];
    this.#resets.delete(credentialId);
    await Promise.allSettled(fns.map((f) => f()));
  }

  /**
   * Re-encrypts every secret of the workspace under a new DEK (exclusive message). `persist` stores
   * the new wrapped DEK and the re-encrypted rows in one transaction; only when it commits does the
   * actor switch keys, and the old DEK is zeroed.
   */
  async rotateDek(
    backend: KeyBackend,
    rows: CredentialRow[],
    persist: (wrappedDek: string, keyBackendId: string, newVersion: number, resealed: Resealed[]) => Promise<void>,
  ): Promise<number> {
    const newDek = generateDek();
    const newVersion = this.#dekVersion + 1;
    try {
      const wrapped = await backend.wrap(newDek, workspaceAad(this.workspaceId));
      const resealed: Resealed[] = [];
      for (const row of rows) {
        if (!row.secret) continue;
        const open = this.#open({ ...row, status: 'ready' });
        try {
          const sealed: SealedSecret = {};
          for (const [field, value] of Object.entries(open)) {
            sealed[field] = encryptField(newDek, value, { workspaceId: this.workspaceId, credentialId: row.id, field }).toString('base64');
          }
          resealed.push({ id: row.id, secret: JSON.stringify(sealed), before: row.secret });
        } finally {
          for (const b of Object.values(open)) b.fill(0);
        }
      }
      await persist(wrapped.toString('base64'), backend.id, newVersion, resealed);
    } catch (err) {
      newDek.fill(0);
      throw err;
    }
    this.#dek.fill(0);
    this.#dek = newDek;
    this.#dekVersion = newVersion;
    this.cache.clear();
    return newVersion;
  }

  /** Zeroes the DEK and everything derived; closes pools. Called as an exclusive message. */
  async passivate(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.mailbox.close();
    const all = [...this.#resets.values()].flat();
    this.#resets.clear();
    await Promise.allSettled(all.map((f) => f()));
    this.cache.clear();
    this.#dek.fill(0);
  }
}
