import type { CredentialKind, Injector } from '../credential-kind.ts';
import { describeOauth2, oauth2ConfigSchema, oauth2SecretSchema, type Oauth2Config } from './kind.ts';
import { injectOauth2 } from './inject.ts';

export { oauth2ConfigSchema, oauth2SecretSchema, type Oauth2Config } from './kind.ts';
export { accessTokenCacheKey, accessTokenTtlMs, DEFAULT_ACCESS_TOKEN_TTL_MS } from './inject.ts';

export const oauth2Kind: CredentialKind<Oauth2Config> & Injector<Oauth2Config> = {
  scheme: 'oauth2',
  secretFields: ['clientId', 'clientSecret', 'refreshToken'],
  secretSchema: oauth2SecretSchema,
  configSchema: oauth2ConfigSchema,
  describe: describeOauth2,
  inject: injectOauth2,
};
