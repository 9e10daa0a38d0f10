import type { CredentialKind, Injector } from '../credential-kind.ts';
import { bearerConfigSchema, bearerSecretSchema, describeBearer, type BearerConfig } from './kind.ts';
import { injectBearer } from './inject.ts';

export { bearerConfigSchema, bearerSecretSchema, type BearerConfig } from './kind.ts';

export const bearerKind: CredentialKind<BearerConfig> & Injector<BearerConfig> = {
  scheme: 'bearer',
  secretFields: ['value'],
  secretSchema: bearerSecretSchema,
  configSchema: bearerConfigSchema,
  describe: describeBearer,
  inject: injectBearer,
};
