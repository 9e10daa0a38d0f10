/**
 * The key backends by name: an explicit map, no discovery. Adding a backend is one folder under
 * src/keys/ and one line here. Every backend comes back wrapped by withStats() so callers can
 * count HSM/KMS calls.
 */
import type { Config } from '../config/schema.ts';
import { CustosError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { createAwsKmsBackend } from './aws-kms/aws-kms-backend.ts';
import type { KeyBackend } from './key-backend.ts';
import { createLocalDevBackend } from './local-dev/local-dev-backend.ts';
import { createPkcs11Backend } from './pkcs11/pkcs11-backend.ts';
import { withStats, type CountedKeyBackend } from './stats.ts';

export type KeysConfig = Config['keys'];
export type KeyBackendName = KeysConfig['backend'];

export interface KeyBackendFactoryOptions {
  dataDir: string;
  log: Logger;
  env?: NodeJS.ProcessEnv;
}

type Factory = (keys: KeysConfig, opts: KeyBackendFactoryOptions) => Promise<KeyBackend>;

export const KEY_BACKEND_FACTORIES: Readonly<Record<KeyBackendName, Factory>> = {
  'local-dev': (keys, opts) =>
    createLocalDevBackend({ keyFile: keys.localDev.keyFile, dataDir: opts.dataDir, log: opts.log, ...(opts.env ? { env: opts.env } : {}) }),
  pkcs11: (keys, opts) => createPkcs11Backend(keys.pkcs11, { log: opts.log }),
  'aws-kms': (keys, opts) => createAwsKmsBackend(keys.awsKms, { log: opts.log, ...(opts.env ? { env: opts.env } : {}) }),
};

/** Builds the configured backend. Throws CUSTOS_ERR_CONFIG for a refused or incomplete config. */
export async function createKeyBackend(keys: KeysConfig, opts: KeyBackendFactoryOptions): Promise<CountedKeyBackend> {
  const factory = Object.hasOwn(KEY_BACKEND_FACTORIES, keys.backend) ? KEY_BACKEND_FACTORIES[keys.backend] : undefined;
  if (!factory) {
    throw new CustosError('CUSTOS_ERR_CONFIG', `Unknown key backend "${String(keys.backend)}"; use one of: ${Object.keys(KEY_BACKEND_FACTORIES).join(', ')}.`);
  }
  const backend = await factory(keys, opts);
  opts.log.info({ keyBackend: keys.backend, id: backend.id }, 'key backend ready');
  return withStats(backend);
}
