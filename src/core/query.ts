/**
 * query_db (DESIGN.md §10): tool scope → resolve service → `use` → database credential → plan →
 * actor (guard, read-only transaction, caps, masking) → audit → result. Every query and every
 * refusal is audited with the SQL text, the number of parameters (never their values), row count,
 * masked columns, duration and outcome.
 */
import { CustosError } from '../errors.ts';
import { workspaceChain } from '../audit/audit-log.ts';
import { actorOf, type RequestContext } from './context.ts';
import type { BrokerService } from './broker.ts';
import type { PlanService } from './plans.ts';
import type { QueryDbRequest, QueryDbResult, QueryPort, Store } from './ports.ts';

export interface QueryDbInput extends QueryDbRequest {
  service: string;
}

const AUDIT_SQL_MAX = 4000;

export class QueryService {
  constructor(
    private readonly store: Store,
    private readonly broker: BrokerService,
    private readonly plans: PlanService,
    private readonly port: QueryPort,
  ) {}

  async query(ctx: RequestContext, input: QueryDbInput): Promise<QueryDbResult & { service: string }> {
    const { row, workspace, permissions } = await this.broker.resolve(ctx, input.service);
    const base = { chain: workspaceChain(workspace.id), actor: actorOf(ctx), action: 'mcp.query_db', target: { type: 'credential', id: row.id, name: row.name } };
    const sqlText = input.sql.length > AUDIT_SQL_MAX ? `${input.sql.slice(0, AUDIT_SQL_MAX)}…` : input.sql;
    const details = (extra: Record<string, unknown>): Record<string, unknown> => ({ sql: sqlText, paramCount: input.params?.length ?? 0, ...extra });
    const started = performance.now();
    try {
      if (!permissions.includes('use')) throw new CustosError('CUSTOS_ERR_FORBIDDEN', "query_db needs the 'use' permission on the service's workspace.");
      if (row.auth_scheme !== 'database') throw new CustosError('CUSTOS_ERR_VALIDATION', `Service '${row.name}' is not a database credential; use call_api for HTTP services.`);
      const org = await this.store.read.findOrganization(workspace.org_id);
      this.plans.assertQueryDb(org?.plan ?? 'free');
      if (row.status !== 'ready') throw new CustosError('CUSTOS_ERR_NOT_READY', `Service '${row.name}' is not ready: a person must supply the connection string in the Custos app first.`);
    } catch (err) {
      await this.store.audit({ ...base, outcome: 'denied', details: details({ code: err instanceof CustosError ? err.code : 'CUSTOS_ERR_INTERNAL' }) });
      throw err;
    }
    let result: QueryDbResult;
    try {
      result = await this.port.queryDb(row, { sql: input.sql, params: input.params, maxRows: input.maxRows });
    } catch (err) {
      const code = err instanceof CustosError ? err.code : 'CUSTOS_ERR_INTERNAL';
      await this.store.audit({ ...base, outcome: code === 'CUSTOS_ERR_SQL_REFUSED' ? 'denied' : 'failure',
        details: details({ code, durationMs: Math.round(performance.now() - started) }) });
      throw err;
    }
    await this.store.audit({ ...base, outcome: 'success', details: details({
      statementType: result.statementType, rowCount: result.rowCount, truncated: result.truncated,
      maskedColumns: result.masked.columns, maskedValues: result.masked.values, durationMs: Math.round(result.durationMs),
    }) });
    return { service: row.name, ...result };
  }
}
