/**
 * Reading the audit log through the API. Decision (docs/api.md): holders of `manage` or `reveal`
 * on a workspace may read its chain: managers answer for the workspace, and reveal holders can
 * already see every secret, so the log tells them nothing more sensitive.
 */
import { CustosError } from '../errors.ts';
import { workspaceChain, type AuditLog } from '../audit/audit-log.ts';
import type { AuditRecord } from '../audit/chain.ts';
import type { AccessService } from './access.ts';
import type { RequestContext } from './context.ts';

export class AuditReader {
  constructor(private readonly log: AuditLog, private readonly access: AccessService) {}

  async #check(ctx: RequestContext, workspaceId: string): Promise<void> {
    const { permissions } = await this.access.require(ctx, workspaceId, null, 'audit.read');
    if (!permissions.includes('manage') && !permissions.includes('reveal')) {
      await this.access.require(ctx, workspaceId, 'manage', 'audit.read'); // audits the denial and throws
      throw new CustosError('CUSTOS_ERR_FORBIDDEN', "Reading the audit log needs 'manage' or 'reveal'.");
    }
  }

  async list(ctx: RequestContext, workspaceId: string, limit: number, beforeSeq?: number): Promise<AuditRecord[]> {
    await this.#check(ctx, workspaceId);
    return this.log.list(workspaceChain(workspaceId), { limit, ...(beforeSeq ? { beforeSeq } : {}) });
  }

  async export(ctx: RequestContext, workspaceId: string): Promise<AsyncGenerator<string>> {
    await this.#check(ctx, workspaceId);
    return this.log.exportJsonLines([workspaceChain(workspaceId)]);
  }
}
