/**
 * The actor system: one WorkspaceActor per active workspace, activated on first message (like an
 * Orleans grain). Activation unwraps the workspace DEK through the key backend exactly once even
 * when many calls arrive together (single-flight); idle actors passivate and zero their keys;
 * shutdown zeroes everything. Correctness never depends on passivation having run: after a crash
 * nothing but wrapped keys and ciphertext exist.
 */
import type { Logger } from '../log.ts';
import { CustosError } from '../errors.ts';
import { generateDek } from '../keys/envelope.ts';
import type { KeyBackend } from '../keys/key-backend.ts';
import type { Store, WorkspaceKeys } from '../core/ports.ts';
import { ActorGoneError, StaleKeyError } from './mailbox.ts';
import { workspaceAad, WorkspaceActor } from './workspace-actor.ts';

export interface ActorSystemOptions {
  backend: KeyBackend;
  store: Store;
  log: Logger;
  idleSeconds: number;
  useConcurrency: number;
}

export interface ActorSystemStats {
  activations: number;
  passivations: number;
  active: number;
}

export class ActorSystem implements WorkspaceKeys {
  readonly #opts: ActorSystemOptions;
  readonly #actors = new Map<string, WorkspaceActor>();
  readonly #activating = new Map<string, Promise<WorkspaceActor>>();
  readonly #sweeper: NodeJS.Timeout;
  readonly stats: ActorSystemStats = { activations: 0, passivations: 0, active: 0 };
  #shutdown = false;

  constructor(opts: ActorSystemOptions) {
    this.#opts = opts;
    const every = Math.max(250, Math.min(30_000, (opts.idleSeconds * 1000) / 4));
    this.#sweeper = setInterval(() => void this.passivateIdle(), every);
    this.#sweeper.unref();
  }

  get backend(): KeyBackend {
    return this.#opts.backend;
  }

  /** New workspace: a fresh DEK is generated here, wrapped, zeroed; only the wrapped form leaves. */
  async provision(workspaceId: string): Promise<{ wrappedDek: string; keyBackendId: string }> {
    const dek = generateDek();
    try {
      const wrapped = await this.#opts.backend.wrap(dek, workspaceAad(workspaceId));
      return { wrappedDek: wrapped.toString('base64'), keyBackendId: this.#opts.backend.id };
    } finally {
      dek.fill(0);
    }
  }

  async forget(workspaceId: string): Promise<void> {
    const actor = this.#actors.get(workspaceId);
    if (!actor) return;
    this.#actors.delete(workspaceId);
    await actor.mailbox.exclusive(() => actor.passivate()).catch(() => actor.passivate());
    this.stats.passivations++;
    this.stats.active = this.#actors.size;
  }

  /** The active actor for a workspace, activating it if needed (single-flight). */
  async actor(workspaceId: string): Promise<WorkspaceActor> {
    if (this.#shutdown) throw new CustosError('CUSTOS_ERR_UNAVAILABLE', 'The service is shutting down.');
    const active = this.#actors.get(workspaceId);
    if (active && !active.closed) return active;
    let pending = this.#activating.get(workspaceId);
    if (!pending) {
      pending = this.#activate(workspaceId).finally(() => this.#activating.delete(workspaceId));
      this.#activating.set(workspaceId, pending);
    }
    return pending;
  }

  /** Runs `fn` against the workspace's actor; retried once if the actor passivated under it. */
  async with<T>(workspaceId: string, fn: (actor: WorkspaceActor) => Promise<T>): Promise<T> {
    try {
      return await fn(await this.actor(workspaceId));
    } catch (err) {
      if (err instanceof StaleKeyError) await this.forget(workspaceId);
      else if (!(err instanceof ActorGoneError)) throw err;
      return fn(await this.actor(workspaceId));
    }
  }

  async #activate(workspaceId: string): Promise<WorkspaceActor> {
    const row = await this.#opts.store.read.findWorkspace(workspaceId);
    if (!row || !row.wrapped_dek) throw new CustosError('CUSTOS_ERR_NOT_FOUND', 'Workspace not found.');
    let dek: Buffer;
    try {
      dek = await this.#opts.backend.unwrap(Buffer.from(row.wrapped_dek, 'base64'), workspaceAad(workspaceId));
    } catch (err) {
      // No fallback of any kind: without the backend there is no plaintext.
      if (err instanceof CustosError) throw err;
      throw new CustosError('CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE', 'The key backend is unavailable; try again shortly.', { cause: err });
    }
    const actor = new WorkspaceActor(workspaceId, dek, Number(row.dek_version), this.#opts.useConcurrency, this.#opts.log.child({ workspace: workspaceId }));
    this.#actors.set(workspaceId, actor);
    this.stats.activations++;
    this.stats.active = this.#actors.size;
    return actor;
  }

  /** Passivates actors idle longer than idleSeconds with nothing running or queued. */
  async passivateIdle(now = Date.now()): Promise<number> {
    let n = 0;
    for (const [id, actor] of [...this.#actors]) {
      if (now - actor.lastUsed < this.#opts.idleSeconds * 1000) continue;
      if (actor.mailbox.activeUses > 0 || actor.mailbox.queued > 0) continue;
      const done = await actor.mailbox.exclusive(async () => {
        if (actor.mailbox.queued > 0 || Date.now() - actor.lastUsed < this.#opts.idleSeconds * 1000) return false;
        if (this.#actors.get(id) === actor) this.#actors.delete(id);
        await actor.passivate();
        return true;
      }).catch(() => false);
      if (done) {
        n++;
        this.stats.passivations++;
      }
    }
    this.stats.active = this.#actors.size;
    return n;
  }

  /** Zeroes every key and stops. */
  async shutdown(): Promise<void> {
    this.#shutdown = true;
    clearInterval(this.#sweeper);
    await Promise.allSettled([...this.#activating.values()]);
    const actors = [...this.#actors.values()];
    this.#actors.clear();
    await Promise.allSettled(actors.map((a) => a.mailbox.exclusive(() => a.passivate()).catch(() => a.passivate())));
    this.stats.active = 0;
  }

  /** For tests and metrics. */
  peek(workspaceId: string): WorkspaceActor | undefined {
    return this.#actors.get(workspaceId);
  }
}
