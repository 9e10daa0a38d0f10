/**
 * Resolves what a principal may do on a workspace, and refuses (with an audit record) when it may
 * not. A principal with no grant gets the same 404 as for a workspace that does not exist, so
 * workspace ids cannot be probed (no existence oracle).
 */
import { CustosError, notFound } from '../errors.ts';
import { workspaceChain } from '../audit/audit-log.ts';
import { actorOf, type Principal, type RequestContext } from './context.ts';
import { intersect, parsePermissions, type Permission } from './policy.ts';
import type { Repos, Store, WorkspaceRow } from './ports.ts';

export class AccessService {
  readonly #store: Store;
  constructor(store: Store) {
    this.#store = store;
  }

  /** Effective permissions, or null when the principal has no standing on the workspace at all. */
  async permissionsOn(principal: Principal, workspaceId: string, repos: Repos = this.#store.read): Promise<Permission[] | null> {
    if (principal.type === 'system') return ['read', 'write', 'use', 'reveal', 'manage'];
    const accountId = principal.type === 'account' ? principal.accountId : principal.creatorId;
    const grant = await repos.findGrant(workspaceId, accountId);
    return grant ? effectivePermissions(principal, workspaceId, parsePermissions(grant.permissions)) : null;
  }

  /**
   * Every workspace the principal has standing on, with its effective permissions there: one query
   * (the grant is joined in), then the pure rules. Used wherever a principal names things by name.
   */
  async visibleWorkspaces(principal: Principal): Promise<Array<{ workspace: WorkspaceRow; permissions: Permission[] }>> {
    if (principal.type === 'system') return [];
    const accountId = principal.type === 'account' ? principal.accountId : principal.creatorId;
    const out: Array<{ workspace: WorkspaceRow; permissions: Permission[] }> = [];
    for (const ws of await this.#store.read.listWorkspacesGranted(accountId)) {
      const permissions = effectivePermissions(principal, ws.id, parsePermissions(ws.permissions));
      if (permissions) out.push({ workspace: ws, permissions });
    }
    return out;
  }

  /**
   * Loads the workspace and checks `needed`. Denials are audited on the workspace's chain when it
   * exists (so its auditors see probing), and answered 404 when the principal has no standing.
   */
  async require(ctx: RequestContext, workspaceId: string, needed: Permission | null, action: string): Promise<{ workspace: WorkspaceRow; permissions: Permission[] }> {
    const workspace = await this.#store.read.findWorkspace(workspaceId);
    const permissions = workspace ? await this.permissionsOn(ctx.principal, workspaceId) : null;
    if (!workspace || permissions === null) {
      if (workspace) await this.#deny(ctx, workspace.id, action, 'no grant');
      throw notFound('Workspace');
    }
    if (needed && !permissions.includes(needed)) {
      await this.#deny(ctx, workspace.id, action, `missing permission ${needed}`);
      throw new CustosError('CUSTOS_ERR_FORBIDDEN', `This action needs the '${needed}' permission on the workspace.`, {
        details: { needed },
      });
    }
    return { workspace, permissions };
  }

  async #deny(ctx: RequestContext, workspaceId: string, action: string, reason: string): Promise<void> {
    await this.#store.audit({
      chain: workspaceChain(workspaceId), actor: actorOf(ctx), action, target: { type: 'workspace', id: workspaceId },
      outcome: 'denied', details: { reason },
    });
  }
}

/**
 * What a principal may do on a workspace, given the grant its account (or its token's creator)
 * holds there right now. Pure: the deny-by-default rules of DESIGN.md §1.5 in one place.
 */
export function effectivePermissions(principal: Principal, workspaceId: string, mine: Permission[]): Permission[] | null {
  switch (principal.type) {
    case 'system':
      return ['read', 'write', 'use', 'reveal', 'manage'];
    case 'account':
      return mine;
    case 'agent_token': {
      const s = principal.scopes;
      if (s.workspaceId && s.workspaceId !== workspaceId) return null;
      const perms = intersect(mine, s.grants[workspaceId] ?? s.defaultPermissions);
      return perms.length ? perms : null;
    }
    case 'ssh_token': {
      if (principal.scopes.workspaceId && principal.scopes.workspaceId !== workspaceId) return null;
      const perms = intersect(mine, ['read', 'use']);
      return perms.includes('use') ? perms : null;
    }
    case 'ci_token':
      // A CI token names its workspace, so existence is no secret to it: answer with what it may
      // do (possibly nothing) and let the caller refuse with a clear 403 naming `reveal`.
      if (principal.scopes.workspaceId !== workspaceId) return null;
      return intersect(mine, ['read', 'reveal']);
  }
}
