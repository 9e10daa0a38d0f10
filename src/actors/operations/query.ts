/**
 * query_db inside the actor (DESIGN.md §10): the credential's pool (created once from the decrypted
 * DSN, closed on passivation or secret change) runs the guarded, read-only, capped statement, and
 * every row is masked before the result leaves the actor.
 */
import { CustosError } from '../../errors.ts';
import { kindFor } from '../../kinds/registry.ts';
import { isQuerier, type QueryDbInput, type QueryDbLimits } from '../../kinds/database/index.ts';
import type { DatabasePool, MaskedQueryResult } from '../../sql/pool.ts';
import type { CredentialRow } from '../../core/ports.ts';
import type { UseContext, WorkspaceActor } from '../workspace-actor.ts';

export async function queryInActor(actor: WorkspaceActor, row: CredentialRow, input: QueryDbInput, limits: QueryDbLimits & { poolSize: number }, use: UseContext): Promise<MaskedQueryResult> {
  const kind = kindFor(row.auth_scheme);
  if (!isQuerier(kind)) throw new CustosError('CUSTOS_ERR_VALIDATION', `Service '${row.name}' is not a database credential; query_db needs one.`);
  const config = JSON.parse(row.config) as Record<string, unknown>;
  const pool = actor.resource<DatabasePool>(row.id, Number(row.secret_version),
    () => kind.createPool(use.secret, config, { poolSize: limits.poolSize, connectTimeoutMs: limits.connectTimeoutMs }),
    (p) => p.close());
  return kind.query(pool, input, config, limits);
}
