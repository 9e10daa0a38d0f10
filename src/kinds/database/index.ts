import type { CredentialKind } from '../credential-kind.ts';
import { databaseConfigSchema, databaseSecretSchema, deriveDatabaseConfig, describeDatabase, type DatabaseConfig } from './kind.ts';
import { createDatabasePool, queryDatabase, type Querier } from './querier.ts';

export { databaseConfigSchema, databaseSecretSchema, type DatabaseConfig } from './kind.ts';
export { isQuerier, effectiveMaxRows, type Querier, type QueryDbInput, type QueryDbLimits } from './querier.ts';

export const databaseKind: CredentialKind<DatabaseConfig> & Querier<DatabaseConfig> = {
  scheme: 'database',
  secretFields: ['dsn'],
  secretSchema: databaseSecretSchema,
  configSchema: databaseConfigSchema,
  deriveConfig: deriveDatabaseConfig,
  describe: describeDatabase,
  createPool: createDatabasePool,
  query: queryDatabase,
};
