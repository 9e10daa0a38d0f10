import type { CredentialKind, Injector } from '../credential-kind.ts';
import { describeSigv4, sigv4ConfigSchema, sigv4SecretSchema, type Sigv4Config } from './kind.ts';
import { injectSigv4 } from './inject.ts';

export { sigv4ConfigSchema, sigv4SecretSchema, type Sigv4Config } from './kind.ts';

export const sigv4Kind: CredentialKind<Sigv4Config> & Injector<Sigv4Config> = {
  scheme: 'sigv4',
  secretFields: ['accessKeyId', 'secretAccessKey', 'sessionToken'],
  secretSchema: sigv4SecretSchema,
  configSchema: sigv4ConfigSchema,
  describe: describeSigv4,
  inject: injectSigv4,
};
