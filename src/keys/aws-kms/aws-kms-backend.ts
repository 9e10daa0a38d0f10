/**
 * The AWS KMS key backend: the KEK is a KMS symmetric key that never leaves KMS. A DEK (made by
 * us, see envelope.ts) is wrapped with kms:Encrypt and unwrapped with kms:Decrypt, both with the
 * EncryptionContext {workspace: <workspace id>}: KMS authenticates the context, so a wrapped DEK
 * copied onto another workspace fails to decrypt (InvalidCiphertextException), and the context
 * shows up in CloudTrail for every unwrap.
 *
 * Blob: 0x21 ‖ version 1 (uint32 BE) ‖ KMS CiphertextBlob. KMS key rotation (automatic or
 * RotateKeyOnDemand) happens inside KMS and old ciphertexts keep decrypting, so this backend has
 * no rotateKek(); the version field stays 1.
 *
 * Decrypt always names the configured KeyId, so a blob made under some other key (one an
 * attacker controls, say) is refused instead of being decrypted with it.
 *
 * Errors: InvalidCiphertextException / IncorrectKeyException → CUSTOS_ERR_INTEGRITY; anything
 * else (connection refused, timeouts, 5xx, throttling, access denied, disabled key) →
 * CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE naming only the error class. The SDK client reconnects by
 * itself, so the next call after KMS comes back simply works.
 *
 * Honesty note: the SDK serialises Plaintext as a base64 string inside its JSON request and
 * response; those transient strings are out of our reach and cannot be zeroed.
 */
import { DecryptCommand, EncryptCommand, KMSClient } from '@aws-sdk/client-kms';
import { CustosError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { KeyBackend } from '../key-backend.ts';
import {
  WRAP_FORMAT,
  backendUnavailable,
  checkAadInput,
  checkDekInput,
  readWrapHeader,
  wrapHeader,
  wrapIntegrityError,
} from '../wrapped-blob.ts';

export interface AwsKmsBackendConfig {
  keyId: string | null;
  region: string;
  endpoint: string | null;
}

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface AwsKmsBackendOptions {
  log: Logger;
  /** Static credentials (tests). Default: AWS_* from `env` when given, else the SDK default chain. */
  credentials?: AwsCredentials;
  env?: NodeJS.ProcessEnv;
  /** SDK attempts per call, including retries (default 3). */
  maxAttempts?: number;
  /** Per-attempt socket timeouts in ms (default 5000). */
  timeoutMs?: number;
}

const KMS_VERSION = 1;
const DEK_BYTES = 32;
const INTEGRITY_ERRORS = new Set(['InvalidCiphertextException', 'IncorrectKeyException']);

export async function createAwsKmsBackend(config: AwsKmsBackendConfig, options: AwsKmsBackendOptions): Promise<AwsKmsKeyBackend> {
  if (config.keyId === null) {
    throw new CustosError('CUSTOS_ERR_CONFIG', 'keys.awsKms.keyId is required for the aws-kms key backend (a key id, ARN or alias/…).');
  }
  const credentials = options.credentials ?? credentialsFromEnv(options.env);
  const timeout = options.timeoutMs ?? 5000;
  const client = new KMSClient({
    region: config.region,
    ...(config.endpoint ? { endpoint: config.endpoint } : {}),
    ...(credentials ? { credentials } : {}),
    maxAttempts: options.maxAttempts ?? 3,
    requestHandler: { connectionTimeout: timeout, requestTimeout: timeout },
  });
  options.log.info({ keyBackend: 'aws-kms', keyId: config.keyId, region: config.region, endpoint: config.endpoint }, 'AWS KMS key backend configured');
  return new AwsKmsKeyBackend(client, config.keyId);
}

export class AwsKmsKeyBackend implements KeyBackend {
  readonly #client: KMSClient;
  readonly #keyId: string;
  #closed = false;

  constructor(client: KMSClient, keyId: string) {
    this.#client = client;
    this.#keyId = keyId;
  }

  get id(): string {
    return `aws-kms:${this.#keyId}`;
  }

  async wrap(dek: Buffer, aad: Buffer): Promise<Buffer> {
    this.#checkOpen();
    checkDekInput(dek);
    const context = encryptionContext(aad);
    try {
      const out = await this.#client.send(
        new EncryptCommand({ KeyId: this.#keyId, Plaintext: dek, EncryptionContext: context }),
      );
      if (!out.CiphertextBlob || out.CiphertextBlob.length === 0) {
        throw backendUnavailable('AWS KMS returned no ciphertext.');
      }
      return Buffer.concat([wrapHeader(WRAP_FORMAT.awsKms, KMS_VERSION), out.CiphertextBlob]);
    } catch (err) {
      throw mapKmsError(err);
    }
  }

  async unwrap(blob: Buffer, aad: Buffer): Promise<Buffer> {
    this.#checkOpen();
    const context = encryptionContext(aad);
    const { version, body } = readWrapHeader(blob, [WRAP_FORMAT.awsKms]);
    if (version !== KMS_VERSION) throw wrapIntegrityError();
    let plain: Uint8Array | undefined;
    try {
      const out = await this.#client.send(
        new DecryptCommand({ KeyId: this.#keyId, CiphertextBlob: body, EncryptionContext: context }),
      );
      plain = out.Plaintext;
      if (!plain || plain.length !== DEK_BYTES) throw wrapIntegrityError();
      return Buffer.from(plain);
    } catch (err) {
      throw mapKmsError(err);
    } finally {
      plain?.fill(0);
    }
  }

  /** One Encrypt of a 1-byte probe: needs only the kms:Encrypt permission the backend needs anyway. */
  async health(): Promise<void> {
    this.#checkOpen();
    try {
      await this.#client.send(
        new EncryptCommand({ KeyId: this.#keyId, Plaintext: Buffer.from([0]), EncryptionContext: { custos: 'health' } }),
      );
    } catch (err) {
      const mapped = mapKmsError(err);
      if (mapped.code === 'CUSTOS_ERR_INTEGRITY') throw backendUnavailable('AWS KMS health probe failed.', err);
      throw mapped;
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#client.destroy();
  }

  #checkOpen(): void {
    if (this.#closed) throw backendUnavailable('The AWS KMS key backend is closed.');
  }
}

/** EncryptionContext values are strings: the workspace id must round-trip through UTF-8. */
function encryptionContext(aad: Buffer): Record<string, string> {
  checkAadInput(aad);
  const workspace = aad.toString('utf8');
  if (!Buffer.from(workspace, 'utf8').equals(aad)) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'The aws-kms backend needs UTF-8 associated data (the workspace id).');
  }
  return { workspace };
}

function mapKmsError(err: unknown): CustosError {
  if (err instanceof CustosError) return err;
  const name = errorName(err);
  if (INTEGRITY_ERRORS.has(name)) return wrapIntegrityError(err);
  return backendUnavailable(`AWS KMS is unavailable (${name}).`, err);
}

/** The error class or errno code only: SDK messages can quote request details. */
function errorName(err: unknown): string {
  if (typeof err !== 'object' || err === null) return 'error';
  const e = err as { name?: unknown; code?: unknown; $metadata?: { httpStatusCode?: number } };
  const code = typeof e.code === 'string' ? e.code : undefined;
  const name = typeof e.name === 'string' ? e.name : undefined;
  if (name && name !== 'Error' && /^[A-Za-z][A-Za-z0-9_.]*$/.test(name)) return name;
  if (code && /^[A-Z0-9_]+$/.test(code)) return code;
  const status = e.$metadata?.httpStatusCode;
  return status ? `HTTP ${status}` : 'error';
}

function credentialsFromEnv(env: NodeJS.ProcessEnv | undefined): AwsCredentials | undefined {
  if (!env?.AWS_ACCESS_KEY_ID || !env.AWS_SECRET_ACCESS_KEY) return undefined;
  return {
    accessKeyId: env.AWS_ACCESS_KEY_ID,
    secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
    ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
  };
}
