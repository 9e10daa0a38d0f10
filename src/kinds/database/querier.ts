/**
 * The Querier capability (query_db): how the workspace actor turns a `database` credential into
 * rows. Lives with the database kind; kept as a small interface with a type guard, like Injector
 * and Signer in credential-kind.ts.
 *
 * Lifecycle the actor follows:
 *   - `createPool(secret, config, options)` on first query_db for a credential; the pool copies
 *     what it needs from the secret, so the actor zeroes its Buffers right after, as usual;
 *   - `query(pool, input, config, limits)` per call (concurrent calls share the pool);
 *   - `pool.close()` when the actor passivates, when the credential's secret changes, and when
 *     the credential is deleted.
 */
import type { CredentialKind, SecretFields } from '../credential-kind.ts';
import { secretField } from '../credential-kind.ts';
import { CustosError } from '../../errors.ts';
import { DatabasePool, type DatabasePoolOptions, type MaskedQueryResult } from '../../sql/pool.ts';
import type { DatabaseConfig } from './kind.ts';

/** What the agent sends (the tool's `service` is resolved to a credential before this point). */
export interface QueryDbInput {
  sql: string;
  params?: unknown[] | undefined;
  /** Bounded by the server's cap (`limits.maxRows`). */
  maxRows?: number | undefined;
}

/** The server's limits: the `queryDb` config section. */
export interface QueryDbLimits {
  maxRows: number;
  maxBytes: number;
  statementTimeoutMs: number;
  connectTimeoutMs: number;
}

export interface Querier<Config extends Record<string, unknown> = Record<string, unknown>> {
  createPool(secret: SecretFields, config: Config, options: DatabasePoolOptions): DatabasePool;
  query(pool: DatabasePool, input: QueryDbInput, config: Config, limits: QueryDbLimits): Promise<MaskedQueryResult>;
}

export function isQuerier(kind: CredentialKind<any>): kind is CredentialKind<any> & Querier<any> {
  return typeof (kind as Partial<Querier>).query === 'function' && typeof (kind as Partial<Querier>).createPool === 'function';
}

/** The row cap for one call: the agent's `max_rows` if given, never above the server's cap. */
export function effectiveMaxRows(requested: number | undefined, cap: number): number {
  if (requested === undefined) return cap;
  if (!Number.isInteger(requested) || requested < 1) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'max_rows must be a positive integer.');
  }
  return Math.min(requested, cap);
}

export function createDatabasePool(secret: SecretFields, _config: DatabaseConfig, options: DatabasePoolOptions): DatabasePool {
  return new DatabasePool(secretField(secret, 'dsn'), options);
}

export function queryDatabase(pool: DatabasePool, input: QueryDbInput, config: DatabaseConfig, limits: QueryDbLimits): Promise<MaskedQueryResult> {
  const maxRows = effectiveMaxRows(input.maxRows, limits.maxRows);
  return pool.query(input.sql, input.params ?? [], { ...limits, maxRows }, {
    ...(config.maskColumns ? { maskColumns: config.maskColumns } : {}),
    ...(config.allowColumns ? { allowColumns: config.allowColumns } : {}),
  });
}
