/**
 * The dev-only key backend: the KEK is a 32-byte file on the same disk as the data, so it protects
 * nothing against anyone who can read the data directory. It exists so `npm start` works without
 * an HSM. It logs a loud warning at start and is refused outright when NODE_ENV=production.
 *
 * Wrapped-DEK blob: 0x01 ‖ KEK version (uint32 BE) ‖ nonce (12) ‖ ciphertext (32) ‖ tag (16),
 * AES-256-GCM with AAD = header (5 bytes) ‖ caller AAD (the workspace id).
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import path from 'node:path';
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
import {
  createKeyFileIfMissing,
  directoryIsPrivate,
  listVersions,
  readKeyFile,
  versionFilePath,
} from './keyring-files.ts';

const NONCE_BYTES = 12;
const TAG_BYTES = 16;

export const LOCAL_DEV_DEFAULT_KEY_FILE = 'local-dev-kek.key';

export interface LocalDevBackendOptions {
  /** keys.localDev.keyFile; null = `<dataDir>/local-dev-kek.key`. */
  keyFile: string | null;
  dataDir: string;
  log: Logger;
  env?: NodeJS.ProcessEnv;
}

export async function createLocalDevBackend(options: LocalDevBackendOptions): Promise<LocalDevKeyBackend> {
  const env = options.env ?? process.env;
  if (env.NODE_ENV === 'production') {
    throw new CustosError(
      'CUSTOS_ERR_CONFIG',
      'The local-dev key backend is refused when NODE_ENV=production: configure keys.backend = "pkcs11" or "aws-kms".',
    );
  }
  const keyFile = path.resolve(options.keyFile ?? path.join(options.dataDir, LOCAL_DEV_DEFAULT_KEY_FILE));
  const created = await createKeyFileIfMissing(keyFile);
  const backend = new LocalDevKeyBackend(keyFile);
  await backend.reload();
  options.log.warn(
    { keyBackend: 'local-dev', keyFile, created, kekVersion: backend.currentVersion },
    '!!! LOCAL-DEV KEY BACKEND: workspace keys are wrapped by a key FILE on this disk. ' +
      'This is for development only and is refused when NODE_ENV=production. ' +
      'Use keys.backend = "pkcs11" (HSM) or "aws-kms" for real secrets. !!!',
  );
  if (!(await directoryIsPrivate(path.dirname(keyFile)))) {
    options.log.warn({ keyBackend: 'local-dev', dir: path.dirname(keyFile) }, 'local-dev key directory is accessible to other users; chmod 700 it');
  }
  return backend;
}

export class LocalDevKeyBackend implements RotatableKeyBackend {
  readonly #keyFile: string;
  readonly #keys = new Map<number, Buffer>();
  #current = 0;
  #closed = false;

  constructor(keyFile: string) {
    this.#keyFile = keyFile;
  }

  get id(): string {
    return `local-dev:kek-v${this.#current}`;
  }

  get currentVersion(): number {
    return this.#current;
  }

  get keyFile(): string {
    return this.#keyFile;
  }

  /** (Re)reads every version on disk; picks up versions another process created. */
  async reload(): Promise<void> {
    const versions = await listVersions(this.#keyFile);
    if (!versions.includes(1)) {
      throw new CustosError('CUSTOS_ERR_CONFIG', `The local-dev key file ${this.#keyFile} is missing.`);
    }
    for (const v of versions) {
      if (this.#keys.has(v)) continue;
      this.#keys.set(v, await readKeyFile(versionFilePath(this.#keyFile, v)));
    }
    this.#current = Math.max(this.#current, ...versions);
  }

  async wrap(dek: Buffer, aad: Buffer): Promise<Buffer> {
    this.#checkOpen();
    checkDekInput(dek);
    checkAadInput(aad);
    const key = this.#keys.get(this.#current)!;
    const header = wrapHeader(WRAP_FORMAT.localDevAesGcm, this.#current);
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.concat([header, aad]));
    const body = Buffer.concat([cipher.update(dek), cipher.final()]);
    return Buffer.concat([header, nonce, body, cipher.getAuthTag()]);
  }

  async unwrap(blob: Buffer, aad: Buffer): Promise<Buffer> {
    this.#checkOpen();
    checkAadInput(aad);
    const { version, header, body } = readWrapHeader(blob, [WRAP_FORMAT.localDevAesGcm]);
    if (body.length !== NONCE_BYTES + 32 + TAG_BYTES) throw wrapIntegrityError();
    let key = this.#keys.get(version);
    if (!key && version > this.#current) {
      // Another process may have rotated since we loaded the ring.
      await this.reload();
      key = this.#keys.get(version);
    }
    if (!key) throw wrapIntegrityError();
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, body.subarray(0, NONCE_BYTES), {
        authTagLength: TAG_BYTES,
      });
      decipher.setAAD(Buffer.concat([header, aad]));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      const part = decipher.update(body.subarray(NONCE_BYTES, body.length - TAG_BYTES));
      try {
        decipher.final();
      } catch (err) {
        part.fill(0); // never hand back (or keep) unauthenticated plaintext
        throw err;
      }
      return part;
    } catch (err) {
      throw wrapIntegrityError(err);
    }
  }

  async rotateKek(): Promise<string> {
    this.#checkOpen();
    await this.reload();
    const next = this.#current + 1;
    await createKeyFileIfMissing(versionFilePath(this.#keyFile, next));
    await this.reload();
    return this.id;
  }

  async health(): Promise<void> {
    this.#checkOpen();
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const key of this.#keys.values()) key.fill(0);
    this.#keys.clear();
  }

  #checkOpen(): void {
    if (this.#closed) throw backendUnavailable('The local-dev key backend is closed.');
  }
}
