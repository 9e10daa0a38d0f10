/**
 * The actor's mailbox discipline. Lifecycle messages (rotate, secret writes, passivate) are handled
 * one at a time, in arrival order, and exclusively: no use runs while one is handled, so a use never
 * sees a key being replaced. Use messages (call_api, query_db, sign, reveal) run concurrently, up
 * to a cap, so one slow upstream cannot stall the workspace; beyond the cap they queue (FIFO).
 */
import { CustosError } from '../errors.ts';

type Waiter = { kind: 'use' | 'exclusive'; run: () => void; reject: (e: unknown) => void };

/** The workspace's DEK was rotated elsewhere (another node, the CLI): this actor must reload. */
export class StaleKeyError extends CustosError {
  constructor() {
    super('CUSTOS_ERR_UNAVAILABLE', 'The workspace key changed while the request ran; retry.');
  }
}

/** Thrown to messages still queued when an actor passivates; the actor system retries them once. */
export class ActorGoneError extends CustosError {
  constructor() {
    super('CUSTOS_ERR_UNAVAILABLE', 'The workspace was unloaded while the request waited; retry.');
  }
}

export class Mailbox {
  readonly #cap: number;
  #activeUses = 0;
  #exclusiveActive = false;
  readonly #queue: Waiter[] = [];
  #closed = false;

  constructor(useConcurrency: number) {
    this.#cap = useConcurrency;
  }

  get activeUses(): number {
    return this.#activeUses;
  }

  get queued(): number {
    return this.#queue.length;
  }

  /** Run a use operation (shared). */
  use<T>(fn: () => Promise<T>): Promise<T> {
    return this.#enqueue('use', fn);
  }

  /** Run a lifecycle message (exclusive, serialised). */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.#enqueue('exclusive', fn);
  }

  /** Refuses everything still queued and everything sent later (the actor is gone). */
  close(): void {
    this.#closed = true;
    for (const w of this.#queue.splice(0)) w.reject(new ActorGoneError());
  }

  #enqueue<T>(kind: Waiter['kind'], fn: () => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(new ActorGoneError());
    return new Promise<T>((resolve, reject) => {
      const run = (): void => {
        if (kind === 'use') this.#activeUses++;
        else this.#exclusiveActive = true;
        fn().then(resolve, reject).finally(() => {
          if (kind === 'use') this.#activeUses--;
          else this.#exclusiveActive = false;
          this.#pump();
        });
      };
      this.#queue.push({ kind, run, reject });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#queue.length > 0 && !this.#exclusiveActive) {
      const head = this.#queue[0]!;
      if (head.kind === 'exclusive') {
        if (this.#activeUses > 0) return; // wait for uses to drain; later uses queue behind it (FIFO)
        this.#queue.shift();
        head.run();
        return;
      }
      if (this.#activeUses >= this.#cap) return;
      this.#queue.shift();
      head.run();
    }
  }
}
