/** Workspaces and their grants. Every change is audited in the same transaction. */
import { randomUUID } from 'node:crypto';
import { CustosError, notFound } from '../errors.ts';
import { orgChain, workspaceChain } from '../audit/audit-log.ts';
import { actorOf, type RequestContext } from './context.ts';
import { formatPermissions, parsePermissions, PERMISSIONS, type Permission } from './policy.ts';
import type { AccessService } from './access.ts';
import type { PlanService } from './plans.ts';
import type { AccountRow, OrganizationRow, Store, Tx, WorkspaceKeys, WorkspaceRow } from './ports.ts';

export interface WorkspaceView {
  id: string;
  name: string;
  organizationId: string;
  permissions: Permission[];
  createdAt: string;
  updatedAt: string;
}

export interface GrantView {
  accountId: string;
  email: string;
  permissions: Permission[];
  grantedBy: string;
  updatedAt: string;
}

export function workspaceView(w: WorkspaceRow, permissions: Permission[]): WorkspaceView {
  return { id: w.id, name: w.name, organizationId: w.org_id, permissions, createdAt: w.created_at, updatedAt: w.updated_at };
}

export class WorkspaceService {
  constructor(
    private readonly store: Store,
    private readonly access: AccessService,
    private readonly plans: PlanService,
    private readonly keys: WorkspaceKeys,
  ) {}

  /** Creates a workspace inside `tx`: wrapped DEK, full grant for the creator, audit on both chains. */
  async createInTx(tx: Tx, ctx: RequestContext, org: OrganizationRow, accountId: string, name: string, provisioned: { id: string; wrappedDek: string; keyBackendId: string }): Promise<WorkspaceRow> {
    if (await tx.findWorkspaceByName(org.id, name)) {
      throw new CustosError('CUSTOS_ERR_CONFLICT', `A workspace named '${name}' already exists.`);
    }
    const now = new Date().toISOString();
    const row: WorkspaceRow = {
      id: provisioned.id, org_id: org.id, name, created_by: accountId, wrapped_dek: provisioned.wrappedDek,
      key_backend_id: provisioned.keyBackendId, dek_version: 1, created_at: now, updated_at: now,
    };
    await tx.insertWorkspace(row);
    await tx.upsertGrant({ workspace_id: row.id, account_id: accountId, permissions: formatPermissions(PERMISSIONS), granted_by: accountId, created_at: now, updated_at: now });
    const actor = actorOf(ctx);
    await tx.audit({ chain: orgChain(org.id), actor, action: 'workspace.create', target: { type: 'workspace', id: row.id, name }, outcome: 'success' });
    await tx.audit({ chain: workspaceChain(row.id), actor, action: 'workspace.create', target: { type: 'workspace', id: row.id, name }, outcome: 'success',
      details: { keyBackend: provisioned.keyBackendId, dekVersion: 1 } });
    return row;
  }

  async provision(): Promise<{ id: string; wrappedDek: string; keyBackendId: string }> {
    const id = randomUUID();
    return { id, ...(await this.keys.provision(id)) };
  }

  async create(ctx: RequestContext, name: string): Promise<WorkspaceView> {
    if (ctx.principal.type !== 'account') throw new CustosError('CUSTOS_ERR_FORBIDDEN', 'Only people can create workspaces here.');
    const accountId = ctx.principal.accountId;
    const org = await this.store.read.findPersonalOrganization(accountId);
    if (!org) throw new CustosError('CUSTOS_ERR_INTERNAL', 'Account has no organization.', { expose: false });
    try {
      this.plans.assertWorkspaceCount(org.plan, await this.store.read.countWorkspacesInOrg(org.id));
    } catch (err) {
      await this.store.audit({ chain: orgChain(org.id), actor: actorOf(ctx), action: 'workspace.create', target: { type: 'workspace', name },
        outcome: 'denied', details: { reason: 'plan limit', limit: 'workspacesPerAccount' } });
      throw err;
    }
    const provisioned = await this.provision();
    const row = await this.store.tx(async (tx) => {
      // Re-check inside the transaction so two concurrent creates cannot both pass the limit.
      this.plans.assertWorkspaceCount(org.plan, await tx.countWorkspacesInOrg(org.id));
      return this.createInTx(tx, ctx, org, accountId, name, provisioned);
    });
    return workspaceView(row, [...PERMISSIONS]);
  }

  async list(ctx: RequestContext): Promise<WorkspaceView[]> {
    if (ctx.principal.type !== 'account') throw new CustosError('CUSTOS_ERR_FORBIDDEN', 'Only people can list workspaces here.');
    const rows = await this.store.read.listWorkspacesGranted(ctx.principal.accountId);
    return rows.map((r) => workspaceView(r, parsePermissions(r.permissions)));
  }

  async get(ctx: RequestContext, id: string): Promise<WorkspaceView> {
    const { workspace, permissions } = await this.access.require(ctx, id, null, 'workspace.get');
    return workspaceView(workspace, permissions);
  }

  async rename(ctx: RequestContext, id: string, name: string): Promise<WorkspaceView> {
    const { workspace, permissions } = await this.access.require(ctx, id, 'manage', 'workspace.rename');
    const updated = await this.store.tx(async (tx) => {
      const clash = await tx.findWorkspaceByName(workspace.org_id, name);
      if (clash && clash.id !== id) throw new CustosError('CUSTOS_ERR_CONFLICT', `A workspace named '${name}' already exists.`);
      const now = new Date().toISOString();
      await tx.updateWorkspace(id, { name, updated_at: now });
      await tx.audit({ chain: workspaceChain(id), actor: actorOf(ctx), action: 'workspace.rename', target: { type: 'workspace', id, name },
        outcome: 'success', details: { from: workspace.name, to: name } });
      return { ...workspace, name, updated_at: now };
    });
    return workspaceView(updated, permissions);
  }

  /**
   * Deletes a workspace. Its wrapped DEK is destroyed with the row (crypto-shredding: the ciphertext
   * of its credentials, and any backup copy of it, can no longer be decrypted once every backup
   * holding the wrapped key ages out). The workspace's audit chain is kept.
   */
  async delete(ctx: RequestContext, id: string): Promise<void> {
    const { workspace } = await this.access.require(ctx, id, 'manage', 'workspace.delete');
    await this.store.tx(async (tx) => {
      const credentials = await tx.countCredentials(id);
      await tx.deleteWorkspace(id);
      const actor = actorOf(ctx);
      await tx.audit({ chain: workspaceChain(id), actor, action: 'workspace.delete', target: { type: 'workspace', id, name: workspace.name },
        outcome: 'success', details: { credentialsDestroyed: credentials, dekDestroyed: true } });
      await tx.audit({ chain: orgChain(workspace.org_id), actor, action: 'workspace.delete', target: { type: 'workspace', id, name: workspace.name }, outcome: 'success' });
    });
    await this.keys.forget(id);
    // Crypto-shredding is only as good as the erasure of the wrapped DEK from the database's files.
    await this.store.purgeDeleted();
  }

  async listGrants(ctx: RequestContext, id: string): Promise<GrantView[]> {
    await this.access.require(ctx, id, 'manage', 'grant.list');
    const rows = await this.store.read.listGrants(id);
    return rows.map((g) => ({ accountId: g.account_id, email: g.email, permissions: parsePermissions(g.permissions), grantedBy: g.granted_by, updatedAt: g.updated_at }));
  }

  /** Grants or changes a teammate's permissions. `principal` is an account id or an email. */
  async putGrant(ctx: RequestContext, id: string, principal: string, permissions: Permission[]): Promise<GrantView> {
    await this.access.require(ctx, id, 'manage', 'grant.put');
    const account = await this.#findAccount(principal);
    if (!account) throw notFound('Account');
    const now = new Date().toISOString();
    return this.store.tx(async (tx) => {
      const before = await tx.findGrant(id, account.id);
      await tx.upsertGrant({ workspace_id: id, account_id: account.id, permissions: formatPermissions(permissions), granted_by: actorOf(ctx).id ?? 'system', created_at: now, updated_at: now });
      await this.#assertStillManaged(tx, id);
      await tx.audit({ chain: workspaceChain(id), actor: actorOf(ctx), action: before ? 'grant.change' : 'grant.create',
        target: { type: 'account', id: account.id, name: account.email }, outcome: 'success',
        details: { permissions: formatPermissions(permissions).split(',').filter(Boolean), previous: before ? parsePermissions(before.permissions) : [] } });
      return { accountId: account.id, email: account.email, permissions: parsePermissions(formatPermissions(permissions)), grantedBy: actorOf(ctx).id ?? 'system', updatedAt: now };
    });
  }

  async revokeGrant(ctx: RequestContext, id: string, principal: string): Promise<void> {
    await this.access.require(ctx, id, 'manage', 'grant.revoke');
    const account = await this.#findAccount(principal);
    const grant = account ? await this.store.read.findGrant(id, account.id) : null;
    if (!account || !grant) throw notFound('Grant');
    await this.store.tx(async (tx) => {
      await tx.deleteGrant(id, account.id);
      await this.#assertStillManaged(tx, id);
      await tx.audit({ chain: workspaceChain(id), actor: actorOf(ctx), action: 'grant.revoke', target: { type: 'account', id: account.id, name: account.email },
        outcome: 'success', details: { previous: parsePermissions(grant.permissions) } });
    });
  }

  /** A grantee named by account id or by email. */
  #findAccount(ref: string): Promise<AccountRow | null> {
    return ref.includes('@') ? this.store.read.findAccountByEmail(ref.toLowerCase()) : this.store.read.findAccountById(ref);
  }

  /** A workspace must keep at least one `manage` holder, or nobody could ever administer it again. */
  async #assertStillManaged(tx: Tx, id: string): Promise<void> {
    const grants = await tx.listGrants(id);
    if (!grants.some((g) => parsePermissions(g.permissions).includes('manage'))) {
      throw new CustosError('CUSTOS_ERR_CONFLICT', 'A workspace must keep at least one account with the manage permission.');
    }
  }
}
