/**
 * One Cryptoki library per process. PKCS#11 state (initialisation, login) is per process, not per
 * object: a second C_Initialize throws CKR_CRYPTOKI_ALREADY_INITIALIZED and a login is shared by
 * every session on the token. So every backend instance that names the same module path shares
 * one loaded, initialised library through this module-level registry.
 *
 * SoftHSM (and some real modules) read their configuration and enumerate tokens only in
 * C_Initialize. `restart()` finalises and re-initialises to pick up a token created after start;
 * it is only used while no backend holds sessions on the library (finalising closes every
 * session in the process), and it bumps `generation` so stale handles are never reused.
 */
import pkcs11js from 'pkcs11js';
import { backendUnavailable } from '../wrapped-blob.ts';

export type Pkcs11Lib = InstanceType<typeof pkcs11js.PKCS11>;
export { pkcs11js };

export class CryptokiModule {
  readonly modulePath: string;
  #lib: Pkcs11Lib | null = null;
  #generation = 0;
  /** Backends currently holding sessions on this library. */
  #users = 0;

  constructor(modulePath: string) {
    this.modulePath = modulePath;
  }

  get generation(): number {
    return this.#generation;
  }

  get users(): number {
    return this.#users;
  }

  /** Loads and initialises the library once; throws CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE if it cannot. */
  ensure(): Pkcs11Lib {
    if (this.#lib) return this.#lib;
    const lib = new pkcs11js.PKCS11();
    try {
      lib.load(this.modulePath);
    } catch (err) {
      throw backendUnavailable(`Cannot load the PKCS#11 module ${this.modulePath} (missing or not a PKCS#11 library).`, err);
    }
    try {
      // OS locking: pkcs11js runs the *Async calls on libuv worker threads, concurrently on
      // different sessions, so the module must do its own locking.
      lib.C_Initialize({ flags: pkcs11js.CKF_OS_LOCKING_OK });
    } catch (err) {
      if (ckrName(err) !== 'CKR_CRYPTOKI_ALREADY_INITIALIZED') {
        throw backendUnavailable(`Cannot initialise the PKCS#11 module ${this.modulePath} (${ckrName(err) ?? 'error'}).`, err);
      }
      // Someone else in this process initialised the same library: share it.
    }
    this.#lib = lib;
    this.#generation += 1;
    return lib;
  }

  /**
   * Finalises and re-initialises so the module re-enumerates its tokens. Only when the caller is
   * the sole user (it has no sessions yet); otherwise it would close other backends' sessions.
   */
  restart(): Pkcs11Lib {
    if (this.#users > 1) return this.ensure();
    this.finalize();
    return this.ensure();
  }

  /** Ends Cryptoki for this process (closes every session). For process shutdown and restart(). */
  finalize(): void {
    if (!this.#lib) return;
    try {
      this.#lib.C_Finalize();
    } catch {
      // Already finalised elsewhere: nothing left to release.
    }
    this.#lib = null;
  }

  /** Anything holding sessions on the library (backends, tools) registers here while it does. */
  addUser(): void {
    this.#users += 1;
  }

  removeUser(): void {
    this.#users = Math.max(0, this.#users - 1);
  }
}

const modules = new Map<string, CryptokiModule>();

/** The process-wide library for `modulePath` (created on first use, never duplicated). */
export function cryptokiFor(modulePath: string): CryptokiModule {
  let mod = modules.get(modulePath);
  if (!mod) {
    mod = new CryptokiModule(modulePath);
    modules.set(modulePath, mod);
  }
  return mod;
}

/** "CKR_PIN_INCORRECT" for a Pkcs11Error, undefined for anything else. Never the error text. */
export function ckrName(err: unknown): string | undefined {
  if (err instanceof pkcs11js.Pkcs11Error) {
    const m = /^CKR_[A-Z0-9_]+/.exec(err.message);
    return m ? m[0] : undefined;
  }
  return undefined;
}
