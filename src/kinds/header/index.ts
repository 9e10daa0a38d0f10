import type { CredentialKind, Injector } from '../credential-kind.ts';
import { describeHeader, headerConfigSchema, headerSecretSchema, type HeaderConfig } from './kind.ts';
import { injectHeader } from './inject.ts';

export { headerConfigSchema, headerSecretSchema, type HeaderConfig } from './kind.ts';

export const headerKind: CredentialKind<HeaderConfig> & Injector<HeaderConfig> = {
  scheme: 'header',
  secretFields: ['value'],
  secretSchema: headerSecretSchema,
  configSchema: headerConfigSchema,
  describe: describeHeader,
  inject: injectHeader,
};
