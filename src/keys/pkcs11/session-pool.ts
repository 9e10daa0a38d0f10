/**
 * A fixed set of PKCS#11 sessions, lent out one caller at a time. A session runs one
 * cryptographic operation at a time (Init then Encrypt/Decrypt/Wrap); two callers interleaving on
 * one session would get CKR_OPERATION_ACTIVE or, worse, each other's operation. Callers wait in
 * FIFO order when every session is busy.
 */
import type { Handle } from 'pkcs11js';
import { backendUnavailable } from '../wrapped-blob.ts';

export class SessionPool {
  readonly #free: Handle[];
  readonly #all: Handle[];
  readonly #waiters: Array<{ resolve: (s: Handle) => void; reject: (e: Error) => void }> = [];
  #closed = false;

  constructor(sessions: Handle[]) {
    this.#all = [...sessions];
    this.#free = [...sessions];
  }

  get sessions(): readonly Handle[] {
    return this.#all;
  }

  acquire(): Promise<Handle> {
    if (this.#closed) return Promise.reject(backendUnavailable('The PKCS#11 session pool is closed.'));
    const s = this.#free.pop();
    if (s) return Promise.resolve(s);
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  release(session: Handle): void {
    if (this.#closed) return;
    const waiter = this.#waiters.shift();
    if (waiter) waiter.resolve(session);
    else this.#free.push(session);
  }

  /** Stops lending; waiting callers get CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE. Returns every session. */
  close(): Handle[] {
    this.#closed = true;
    for (const w of this.#waiters.splice(0)) w.reject(backendUnavailable('The PKCS#11 connection was reset; retry.'));
    return this.#all;
  }
}
