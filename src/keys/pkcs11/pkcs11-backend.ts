/**
 * The PKCS#11 key backend (SoftHSM2 in tests, any HSM by module path in production).
 *
 * The KEK is an AES-256 secret key object on the token labelled `<kekLabel>-v<N>`; the highest N
 * is current. It is generated inside the token (CKA_TOKEN, CKA_SENSITIVE, CKA_EXTRACTABLE=false,
 * CKA_MODIFIABLE=false), so its value never exists outside the HSM.
 *
 * Blobs (header = format ‖ KEK version, uint32 BE):
 *  - 'aes-gcm'           0x11 ‖ v ‖ IV (12, fresh random) ‖ C_Encrypt(CKM_AES_GCM, DEK) incl. 16-byte tag;
 *                        GCM AAD = header ‖ workspace id.
 *  - 'aes-key-wrap-pad'  0x12 ‖ v ‖ C_WrapKey(CKM_AES_KEY_WRAP_PAD, K) where K is a transient session
 *                        object holding DEK ‖ SHA-256("custos-kwp-aad-v1" ‖ 0 ‖ header ‖ workspace id).
 *                        KWP takes no AAD, so the AAD digest rides inside the wrapped value: KWP
 *                        authenticates its whole input, so a blob moved to another workspace
 *                        unwraps to a digest that no longer matches and is refused. Deterministic:
 *                        wrapping one DEK twice for one workspace gives the same blob.
 * Unwrap dispatches on the format byte, so switching `mechanism` keeps old blobs readable.
 *
 * Availability: the backend connects lazily and single-flight. Any failure to load the module,
 * find the token or log in is CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE and leaves the backend
 * disconnected, so the next call tries again (a corrected PIN file, a token that appeared). A
 * session-level failure mid-operation (device removed, session closed, logged out) drops the whole
 * connection for the same reason. There is never a fallback: no HSM, no key.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Handle, Template } from 'pkcs11js';
import { CustosError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { RotatableKeyBackend } from '../key-backend.ts';
import {
  WRAP_FORMAT,
  backendUnavailable,
  checkAadInput,
  checkDekInput,
  readWrapHeader,
  wrapHeader,
  wrapIntegrityError,
} from '../wrapped-blob.ts';
import { ckrName, cryptokiFor, pkcs11js, type CryptokiModule, type Pkcs11Lib } from './cryptoki.ts';
import { SessionPool } from './session-pool.ts';

export type Pkcs11Mechanism = 'aes-gcm' | 'aes-key-wrap-pad';

export interface Pkcs11BackendConfig {
  module: string;
  tokenLabel: string;
  pin: string | null;
  pinFile: string | null;
  kekLabel: string;
  mechanism: Pkcs11Mechanism;
  sessions: number;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;
const DEK_BYTES = 32;
const KWP_DOMAIN = Buffer.from('custos-kwp-aad-v1\0', 'utf8');

/** CKR codes that mean "the connection is gone", not "this blob is bad". */
const CONNECTION_ERRORS = new Set([
  'CKR_CRYPTOKI_NOT_INITIALIZED',
  'CKR_SESSION_HANDLE_INVALID',
  'CKR_SESSION_CLOSED',
  'CKR_SESSION_COUNT',
  'CKR_DEVICE_REMOVED',
  'CKR_DEVICE_ERROR',
  'CKR_DEVICE_MEMORY',
  'CKR_HOST_MEMORY',
  'CKR_TOKEN_NOT_PRESENT',
  'CKR_TOKEN_NOT_RECOGNIZED',
  'CKR_USER_NOT_LOGGED_IN',
  'CKR_PIN_EXPIRED',
  'CKR_OPERATION_ACTIVE',
  'CKR_KEY_HANDLE_INVALID',
  'CKR_OBJECT_HANDLE_INVALID',
]);

interface Connection {
  generation: number;
  slot: Handle;
  pool: SessionPool;
  /** version → key handles (normally one; two if two nodes raced to create the same version). */
  keks: Map<number, Handle[]>;
  current: number;
  dead: boolean;
}

export interface Pkcs11BackendOptions {
  log: Logger;
  /** Connect now (default true). A failure is logged and retried on the next call, not thrown. */
  eager?: boolean;
}

export async function createPkcs11Backend(
  config: Pkcs11BackendConfig,
  options: Pkcs11BackendOptions,
): Promise<Pkcs11KeyBackend> {
  if (config.pin === null && config.pinFile === null) {
    throw new CustosError('CUSTOS_ERR_CONFIG', 'keys.pkcs11 needs a PIN: set keys.pkcs11.pinFile (preferred) or keys.pkcs11.pin.');
  }
  if (!/^[\x20-\x7e]+$/.test(config.kekLabel) || /-v[0-9]+$/.test(config.kekLabel)) {
    throw new CustosError('CUSTOS_ERR_CONFIG', 'keys.pkcs11.kekLabel must be printable ASCII and must not end in -v<N>.');
  }
  const backend = new Pkcs11KeyBackend(config, options.log);
  if (options.eager ?? true) {
    try {
      await backend.health();
    } catch (err) {
      if (!(err instanceof CustosError) || err.code !== 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE') throw err;
      options.log.warn({ keyBackend: 'pkcs11', err }, 'PKCS#11 key backend not reachable yet; will retry on the next key operation');
    }
  }
  return backend;
}

export class Pkcs11KeyBackend implements RotatableKeyBackend {
  readonly #config: Pkcs11BackendConfig;
  readonly #log: Logger;
  readonly #module: CryptokiModule;
  #connecting: Promise<Connection> | null = null;
  #conn: Connection | null = null;
  #lastVersion = 0;
  #closed = false;

  constructor(config: Pkcs11BackendConfig, log: Logger) {
    this.#config = config;
    this.#log = log;
    this.#module = cryptokiFor(config.module);
  }

  /** `pkcs11:<kekLabel>-v<N>` once connected; `pkcs11:<kekLabel>` before the first connection. */
  get id(): string {
    const v = this.#conn?.current ?? this.#lastVersion;
    return v > 0 ? `pkcs11:${this.#config.kekLabel}-v${v}` : `pkcs11:${this.#config.kekLabel}`;
  }

  get mechanism(): Pkcs11Mechanism {
    return this.#config.mechanism;
  }

  async wrap(dek: Buffer, aad: Buffer): Promise<Buffer> {
    checkDekInput(dek);
    checkAadInput(aad);
    return this.#withSession(async (lib, session, conn) => {
      const version = conn.current;
      const kek = conn.keks.get(version)![0]!;
      if (this.#config.mechanism === 'aes-gcm') {
        const header = wrapHeader(WRAP_FORMAT.pkcs11AesGcm, version);
        const iv = randomBytes(IV_BYTES);
        lib.C_EncryptInit(session, gcmMechanism(iv, Buffer.concat([header, aad])), kek);
        const out = await lib.C_EncryptAsync(session, dek, Buffer.alloc(dek.length + TAG_BYTES));
        return Buffer.concat([header, iv, out]);
      }
      const header = wrapHeader(WRAP_FORMAT.pkcs11AesKwp, version);
      const value = Buffer.concat([dek, kwpAadDigest(header, aad)]);
      let transient: Handle | null = null;
      try {
        // A session object (CKA_TOKEN=false) that exists only for this call and is destroyed below.
        transient = lib.C_CreateObject(session, transientSecretTemplate(value));
        const wrapped = await lib.C_WrapKeyAsync(
          session,
          { mechanism: pkcs11js.CKM_AES_KEY_WRAP_PAD },
          kek,
          transient,
          Buffer.alloc(value.length + 16),
        );
        return Buffer.concat([header, wrapped]);
      } finally {
        value.fill(0);
        if (transient) destroyQuietly(lib, session, transient);
      }
    });
  }

  async unwrap(blob: Buffer, aad: Buffer): Promise<Buffer> {
    checkAadInput(aad);
    const { format, version, header, body } = readWrapHeader(blob, [WRAP_FORMAT.pkcs11AesGcm, WRAP_FORMAT.pkcs11AesKwp]);
    if (format === WRAP_FORMAT.pkcs11AesGcm && body.length !== IV_BYTES + DEK_BYTES + TAG_BYTES) throw wrapIntegrityError();
    if (format === WRAP_FORMAT.pkcs11AesKwp && body.length !== DEK_BYTES + 32 + 8) throw wrapIntegrityError();
    return this.#withSession(async (lib, session, conn) => {
      let keks = conn.keks.get(version);
      if (!keks && version > conn.current) {
        // Another node may have rotated the KEK since we connected: look again, once.
        this.#loadKeks(lib, session, conn);
        keks = conn.keks.get(version);
      }
      if (!keks) throw wrapIntegrityError();
      let lastError: unknown;
      for (const kek of keks) {
        try {
          return format === WRAP_FORMAT.pkcs11AesGcm
            ? await this.#unwrapGcm(lib, session, kek, header, body, aad)
            : await this.#unwrapKwp(lib, session, kek, header, body, aad);
        } catch (err) {
          if (isConnectionError(err)) throw err;
          lastError = err;
        }
      }
      throw wrapIntegrityError(lastError);
    });
  }

  async #unwrapGcm(lib: Pkcs11Lib, session: Handle, kek: Handle, header: Buffer, body: Buffer, aad: Buffer): Promise<Buffer> {
    const iv = body.subarray(0, IV_BYTES);
    const out = Buffer.alloc(DEK_BYTES + TAG_BYTES);
    try {
      lib.C_DecryptInit(session, gcmMechanism(iv, Buffer.concat([header, aad])), kek);
      const plain = await lib.C_DecryptAsync(session, body.subarray(IV_BYTES), out);
      if (plain.length !== DEK_BYTES) throw wrapIntegrityError();
      const dek = Buffer.from(plain);
      out.fill(0);
      return dek;
    } catch (err) {
      out.fill(0);
      throw err;
    }
  }

  async #unwrapKwp(lib: Pkcs11Lib, session: Handle, kek: Handle, header: Buffer, body: Buffer, aad: Buffer): Promise<Buffer> {
    let transient: Handle | null = null;
    let value: Buffer | null = null;
    try {
      transient = await lib.C_UnwrapKeyAsync(
        session,
        { mechanism: pkcs11js.CKM_AES_KEY_WRAP_PAD },
        kek,
        body,
        transientSecretTemplate(),
      );
      value = lib.C_GetAttributeValue(session, transient, [{ type: pkcs11js.CKA_VALUE }])[0]!.value;
      const expected = kwpAadDigest(header, aad);
      if (value.length !== DEK_BYTES + expected.length || !timingSafeEqual(value.subarray(DEK_BYTES), expected)) {
        throw wrapIntegrityError();
      }
      return Buffer.from(value.subarray(0, DEK_BYTES));
    } finally {
      value?.fill(0);
      if (transient) destroyQuietly(lib, session, transient);
    }
  }

  async rotateKek(): Promise<string> {
    return this.#withSession(async (lib, session, conn) => {
      this.#loadKeks(lib, session, conn);
      const next = conn.current + 1;
      const handle = this.#generateKek(lib, session, next);
      conn.keks.set(next, [handle]);
      conn.current = next;
      this.#lastVersion = next;
      this.#log.info({ keyBackend: 'pkcs11', kek: `${this.#config.kekLabel}-v${next}` }, 'PKCS#11 KEK rotated');
      return this.id;
    });
  }

  async health(): Promise<void> {
    await this.#withSession(async (lib, session) => {
      lib.C_GetSessionInfo(session);
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    const conn = this.#conn;
    this.#conn = null;
    this.#connecting = null;
    if (conn) this.#drop(conn);
  }

  /** For tests and `custos hsm` tooling: every KEK version on the token, ascending. */
  async kekVersions(): Promise<number[]> {
    return this.#withSession(async (lib, session, conn) => {
      this.#loadKeks(lib, session, conn);
      return [...conn.keks.keys()].sort((a, b) => a - b);
    });
  }

  async #withSession<T>(fn: (lib: Pkcs11Lib, session: Handle, conn: Connection) => Promise<T>): Promise<T> {
    if (this.#closed) throw backendUnavailable('The PKCS#11 key backend is closed.');
    const conn = await this.#connect();
    const lib = this.#module.ensure();
    const session = await conn.pool.acquire();
    try {
      return await fn(lib, session, conn);
    } catch (err) {
      if (err instanceof CustosError) throw err;
      if (isConnectionError(err) || conn.generation !== this.#module.generation) {
        this.#invalidate(conn);
        throw backendUnavailable(`The PKCS#11 token "${this.#config.tokenLabel}" stopped answering (${ckrName(err) ?? 'error'}); retry.`, err);
      }
      // Anything else from the token during a key operation: treat as an integrity failure
      // (SoftHSM reports a wrong AAD or a tampered blob as CKR_GENERAL_ERROR).
      throw wrapIntegrityError(err);
    } finally {
      conn.pool.release(session);
    }
  }

  #connect(): Promise<Connection> {
    if (this.#conn && !this.#conn.dead && this.#conn.generation === this.#module.generation) {
      return Promise.resolve(this.#conn);
    }
    if (this.#conn) this.#invalidate(this.#conn);
    if (!this.#connecting) {
      this.#connecting = this.#open().then(
        (conn) => {
          this.#connecting = null;
          if (this.#closed) {
            this.#drop(conn);
            throw backendUnavailable('The PKCS#11 key backend is closed.');
          }
          this.#conn = conn;
          return conn;
        },
        (err: unknown) => {
          this.#connecting = null;
          throw err;
        },
      );
    }
    return this.#connecting;
  }

  async #open(): Promise<Connection> {
    const cfg = this.#config;
    // Count ourselves as a user from the start, so no other backend finalises the library (and
    // with it our half-open sessions) while we are connecting.
    this.#module.addUser();
    try {
      return await this.#openCounted(cfg);
    } catch (err) {
      this.#module.removeUser();
      throw err;
    }
  }

  async #openCounted(cfg: Pkcs11BackendConfig): Promise<Connection> {
    let lib = this.#module.ensure();
    let slot = findSlot(lib, cfg.tokenLabel);
    if (!slot && this.#module.users === 1) {
      // The module may have enumerated tokens before this one was created: re-initialise, once.
      lib = this.#module.restart();
      slot = findSlot(lib, cfg.tokenLabel);
    }
    if (!slot) {
      throw backendUnavailable(`PKCS#11 token "${cfg.tokenLabel}" was not found in module ${cfg.module}.`);
    }
    const generation = this.#module.generation;
    const sessions: Handle[] = [];
    try {
      for (let i = 0; i < cfg.sessions; i += 1) {
        sessions.push(lib.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION | pkcs11js.CKF_RW_SESSION));
      }
      await this.#login(lib, sessions[0]!);
      const conn: Connection = { generation, slot, pool: new SessionPool(sessions), keks: new Map(), current: 0, dead: false };
      this.#loadKeks(lib, sessions[0]!, conn);
      if (conn.current === 0) {
        conn.keks.set(1, [this.#generateKek(lib, sessions[0]!, 1)]);
        conn.current = 1;
        this.#log.info({ keyBackend: 'pkcs11', kek: `${cfg.kekLabel}-v1` }, 'PKCS#11 KEK generated on the token');
      }
      this.#lastVersion = conn.current;
      return conn;
    } catch (err) {
      for (const s of sessions) closeQuietly(lib, s);
      if (err instanceof CustosError) throw err;
      throw backendUnavailable(`Cannot open PKCS#11 token "${cfg.tokenLabel}" (${ckrName(err) ?? 'error'}).`, err);
    }
  }

  async #login(lib: Pkcs11Lib, session: Handle): Promise<void> {
    const pinBytes = await this.#readPin();
    try {
      // pkcs11js takes the PIN as a string: built here, at the last moment, and dropped at once.
      lib.C_Login(session, pkcs11js.CKU_USER, pinBytes.toString('utf8'));
    } catch (err) {
      const code = ckrName(err);
      if (code === 'CKR_USER_ALREADY_LOGGED_IN') return; // login is per token per process
      const why =
        code === 'CKR_PIN_INCORRECT' ? 'wrong PIN'
        : code === 'CKR_PIN_LOCKED' ? 'PIN locked'
        : code === 'CKR_PIN_LEN_RANGE' ? 'PIN has the wrong length'
        : (code ?? 'error');
      throw backendUnavailable(`Login to PKCS#11 token "${this.#config.tokenLabel}" failed: ${why}.`, err);
    } finally {
      pinBytes.fill(0);
    }
  }

  async #readPin(): Promise<Buffer> {
    const { pin, pinFile } = this.#config;
    if (pinFile !== null) {
      let raw: Buffer;
      try {
        raw = await readFile(pinFile);
      } catch (err) {
        throw backendUnavailable(`Cannot read the PKCS#11 PIN file ${pinFile}.`, err);
      }
      // A trailing newline from `echo PIN > file` is not part of the PIN.
      let end = raw.length;
      while (end > 0 && (raw[end - 1] === 0x0a || raw[end - 1] === 0x0d)) end -= 1;
      const out = Buffer.from(raw.subarray(0, end));
      raw.fill(0);
      return out;
    }
    return Buffer.from(pin ?? '', 'utf8');
  }

  /** Reads every `<kekLabel>-v<N>` AES key on the token into `conn.keks`; sets `current` to the max. */
  #loadKeks(lib: Pkcs11Lib, session: Handle, conn: Connection): void {
    const prefix = `${this.#config.kekLabel}-v`;
    lib.C_FindObjectsInit(session, [
      { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_SECRET_KEY },
      { type: pkcs11js.CKA_KEY_TYPE, value: pkcs11js.CKK_AES },
      { type: pkcs11js.CKA_TOKEN, value: true },
    ]);
    const handles: Handle[] = [];
    try {
      for (;;) {
        const batch = lib.C_FindObjects(session, 64);
        if (batch.length === 0) break;
        handles.push(...batch);
      }
    } finally {
      lib.C_FindObjectsFinal(session);
    }
    const keks = new Map<number, Handle[]>();
    for (const h of handles) {
      const label = lib.C_GetAttributeValue(session, h, [{ type: pkcs11js.CKA_LABEL }])[0]!.value.toString('utf8');
      if (!label.startsWith(prefix)) continue;
      const rest = label.slice(prefix.length);
      if (!/^[1-9][0-9]{0,8}$/.test(rest)) continue;
      const v = Number(rest);
      keks.set(v, [...(keks.get(v) ?? []), h]);
    }
    conn.keks = keks;
    conn.current = Math.max(0, ...keks.keys());
    if (conn.current > 0) this.#lastVersion = conn.current;
  }

  #generateKek(lib: Pkcs11Lib, session: Handle, version: number): Handle {
    return lib.C_GenerateKey(session, { mechanism: pkcs11js.CKM_AES_KEY_GEN }, kekTemplate(`${this.#config.kekLabel}-v${version}`));
  }

  #invalidate(conn: Connection): void {
    if (conn.dead) return;
    if (this.#conn === conn) this.#conn = null;
    this.#drop(conn);
  }

  #drop(conn: Connection): void {
    if (conn.dead) return;
    conn.dead = true;
    const sessions = conn.pool.close();
    this.#module.removeUser();
    if (conn.generation !== this.#module.generation) return; // handles from a finalised library
    let lib: Pkcs11Lib;
    try {
      lib = this.#module.ensure();
    } catch {
      return;
    }
    for (const s of sessions) closeQuietly(lib, s);
  }
}

/**
 * The KEK template. Generated on the token, never leaves it: SENSITIVE (value unreadable),
 * EXTRACTABLE=false (cannot be wrapped out, even by another key), MODIFIABLE=false (nobody can
 * relax that later), PRIVATE (only visible after login). ENCRYPT/DECRYPT serve aes-gcm,
 * WRAP/UNWRAP serve aes-key-wrap-pad, so the mechanism can change without a new key.
 */
export function kekTemplate(label: string): Template {
  return [
    { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_SECRET_KEY },
    { type: pkcs11js.CKA_KEY_TYPE, value: pkcs11js.CKK_AES },
    { type: pkcs11js.CKA_VALUE_LEN, value: 32 },
    { type: pkcs11js.CKA_LABEL, value: label },
    { type: pkcs11js.CKA_ID, value: Buffer.from(label, 'utf8') },
    { type: pkcs11js.CKA_TOKEN, value: true },
    { type: pkcs11js.CKA_PRIVATE, value: true },
    { type: pkcs11js.CKA_SENSITIVE, value: true },
    { type: pkcs11js.CKA_EXTRACTABLE, value: false },
    { type: pkcs11js.CKA_MODIFIABLE, value: false },
    { type: pkcs11js.CKA_ENCRYPT, value: true },
    { type: pkcs11js.CKA_DECRYPT, value: true },
    { type: pkcs11js.CKA_WRAP, value: true },
    { type: pkcs11js.CKA_UNWRAP, value: true },
    { type: pkcs11js.CKA_SIGN, value: false },
    { type: pkcs11js.CKA_VERIFY, value: false },
    { type: pkcs11js.CKA_DERIVE, value: false },
  ];
}

function transientSecretTemplate(value?: Buffer): Template {
  const t: Template = [
    { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_SECRET_KEY },
    { type: pkcs11js.CKA_KEY_TYPE, value: pkcs11js.CKK_GENERIC_SECRET },
    { type: pkcs11js.CKA_TOKEN, value: false },
    { type: pkcs11js.CKA_PRIVATE, value: true },
    { type: pkcs11js.CKA_SENSITIVE, value: false },
    { type: pkcs11js.CKA_EXTRACTABLE, value: true },
  ];
  if (value) t.push({ type: pkcs11js.CKA_VALUE, value });
  return t;
}

function gcmMechanism(iv: Buffer, aad: Buffer): { mechanism: number; parameter: { type: number; iv: Buffer; ivBits: number; aad: Buffer; tagBits: number } } {
  return {
    mechanism: pkcs11js.CKM_AES_GCM,
    parameter: { type: pkcs11js.CK_PARAMS_AES_GCM, iv, ivBits: IV_BYTES * 8, aad, tagBits: TAG_BYTES * 8 },
  };
}

function kwpAadDigest(header: Buffer, aad: Buffer): Buffer {
  return createHash('sha256').update(KWP_DOMAIN).update(header).update(aad).digest();
}

function findSlot(lib: Pkcs11Lib, tokenLabel: string): Handle | null {
  for (const slot of lib.C_GetSlotList(true)) {
    let label: string;
    try {
      label = lib.C_GetTokenInfo(slot).label;
    } catch {
      continue;
    }
    // Token labels are blank-padded to 32 bytes.
    if (label.replace(/[ \0]+$/, '') === tokenLabel) return slot;
  }
  return null;
}

function isConnectionError(err: unknown): boolean {
  const code = ckrName(err);
  return code !== undefined && CONNECTION_ERRORS.has(code);
}

function destroyQuietly(lib: Pkcs11Lib, session: Handle, object: Handle): void {
  try {
    lib.C_DestroyObject(session, object);
  } catch {
    // The session is gone, and session objects with it.
  }
}

function closeQuietly(lib: Pkcs11Lib, session: Handle): void {
  try {
    lib.C_CloseSession(session);
  } catch {
    // Already closed or library finalised.
  }
}
