/** TypeORM implementation of core/ports.ts. Raw SQL only where TypeORM cannot say it portably. */
import type { EntityManager } from 'typeorm';
import type { Repos, Store, Tx } from '../core/ports.ts';
import type { AuditLog } from '../audit/audit-log.ts';
import type { Database } from './data-source.ts';
import {
  AccountEntity, CredentialEntity, GrantEntity, LoginFailureEntity, MembershipEntity, OrganizationEntity,
  SessionEntity, TokenEntity, WorkspaceEntity,
  type AccountRow, type CredentialRow, type GrantRow, type OrganizationRow, type SessionRow, type TokenRow, type WorkspaceRow,
} from './entities.ts';
import { randomUUID } from 'node:crypto';

/**
 * Hot single-statement reads on SQLite outside a transaction go straight to better-sqlite3 through a
 * prepared-statement cache: TypeORM prepares the statement again on every call, which cost more
 * than the read. Inside a transaction (or on PostgreSQL) reads go through the EntityManager.
 */
const statementCache = new WeakMap<object, Map<string, ReturnType<NonNullable<Database['sqlite']>['prepare']>>>();

function rawAll(em: EntityManager, db: Database, sql: string, params: unknown[]): Promise<Array<Record<string, unknown>>> {
  if (db.sqlite && em === db.dataSource.manager) {
    let cache = statementCache.get(db.sqlite);
    if (!cache) statementCache.set(db.sqlite, (cache = new Map()));
    let stmt = cache.get(sql);
    if (!stmt) cache.set(sql, (stmt = db.sqlite.prepare(sql)));
    return Promise.resolve(stmt.all(...params) as Array<Record<string, unknown>>);
  }
  return em.query(sql, params) as Promise<Array<Record<string, unknown>>>;
}

export function createRepos(em: EntityManager, db: Database): Repos {
  const p = db.p;
  /** One row by raw SQL; integer columns come back as strings on PostgreSQL, so they are coerced. */
  const one = async <T>(sql: string, params: unknown[], ints: readonly string[] = []): Promise<T | null> => {
    const rows = await rawAll(em, db, sql, params);
    const row = rows[0];
    if (!row) return null;
    for (const k of ints) if (row[k] !== undefined && row[k] !== null) row[k] = Number(row[k]);
    return row as T;
  };
  return {
    findAccountByEmail: (email) => em.findOneBy(AccountEntity, { email }),
    findAccountById: (id) => em.findOneBy(AccountEntity, { id }),
    insertAccount: async (row) => { await em.insert(AccountEntity, row); },
    insertOrganization: async (row) => { await em.insert(OrganizationEntity, row); },
    insertMembership: async (org_id, account_id, role, created_at) => { await em.insert(MembershipEntity, { org_id, account_id, role, created_at }); },
    findOrganization: (id) => one<OrganizationRow>(`SELECT * FROM organizations WHERE id = ${p(1)}`, [id]),
    findPersonalOrganization: (owner_id) => em.findOne(OrganizationEntity, { where: { owner_id }, order: { created_at: 'ASC' } }),
    setOrganizationPlan: async (id, plan) => { await em.update(OrganizationEntity, { id }, { plan }); },

    insertSession: async (row) => { await em.insert(SessionEntity, row); },
    findSession: (id) => em.findOneBy(SessionEntity, { id }),
    deleteSession: async (id) => { await em.delete(SessionEntity, { id }); },
    insertLoginFailure: async (email, ip, at) => { await em.insert(LoginFailureEntity, { id: randomUUID(), email, ip, at }); },
    countLoginFailures: async (email, since) => {
      const rows = (await em.query(`SELECT COUNT(*) AS n FROM login_failures WHERE email = ${p(1)} AND at >= ${p(2)}`, [email, since])) as Array<{ n: number | string }>;
      return Number(rows[0]?.n ?? 0);
    },
    clearLoginFailures: async (email) => { await em.delete(LoginFailureEntity, { email }); },

    insertWorkspace: async (row) => { await em.insert(WorkspaceEntity, row); },
    findWorkspace: (id) => one<WorkspaceRow>(`SELECT * FROM workspaces WHERE id = ${p(1)}`, [id], ['dek_version']),
    lockWorkspace: (id) => one<WorkspaceRow>(`SELECT * FROM workspaces WHERE id = ${p(1)}${db.dialect === 'postgres' ? ' FOR UPDATE' : ''}`, [id], ['dek_version']),
    findWorkspaceByName: (org_id, name) => em.findOneBy(WorkspaceEntity, { org_id, name }),
    countWorkspacesInOrg: (org_id) => em.countBy(WorkspaceEntity, { org_id }),
    listWorkspacesGranted: async (accountId) => {
      const rows = (await rawAll(em, db,
        `SELECT w.*, g.permissions AS permissions FROM workspaces w JOIN workspace_grants g ON g.workspace_id = w.id
         WHERE g.account_id = ${p(1)} ORDER BY w.created_at, w.name`, [accountId],
      )) as unknown as Array<WorkspaceRow & { permissions: string }>;
      return rows.map((r) => ({ ...r, dek_version: Number(r.dek_version) }));
    },
    listAllWorkspaces: () => em.find(WorkspaceEntity, { order: { created_at: 'ASC' } }),
    updateWorkspace: async (id, patch) => { await em.update(WorkspaceEntity, { id }, patch); },
    deleteWorkspace: async (id) => {
      await em.delete(CredentialEntity, { workspace_id: id });
      await em.delete(GrantEntity, { workspace_id: id });
      await em.delete(WorkspaceEntity, { id });
    },
    findGrant: (workspace_id, account_id) => one<GrantRow>(`SELECT * FROM workspace_grants WHERE workspace_id = ${p(1)} AND account_id = ${p(2)}`, [workspace_id, account_id]),
    listGrants: (workspaceId) => em.query(
      `SELECT g.*, a.email AS email FROM workspace_grants g JOIN accounts a ON a.id = g.account_id
       WHERE g.workspace_id = ${p(1)} ORDER BY g.created_at, a.email`, [workspaceId],
    ) as Promise<Array<GrantRow & { email: string }>>,
    upsertGrant: async (row) => {
      const existing = await em.findOneBy(GrantEntity, { workspace_id: row.workspace_id, account_id: row.account_id });
      if (existing) {
        await em.update(GrantEntity, { workspace_id: row.workspace_id, account_id: row.account_id },
          { permissions: row.permissions, granted_by: row.granted_by, updated_at: row.updated_at });
      } else {
        await em.insert(GrantEntity, row);
      }
    },
    deleteGrant: async (workspace_id, account_id) => { await em.delete(GrantEntity, { workspace_id, account_id }); },

    insertCredential: async (row) => { await em.insert(CredentialEntity, row); },
    findCredential: (id) => one<CredentialRow>(`SELECT * FROM credentials WHERE id = ${p(1)}`, [id], ['secret_version', 'dek_version']),
    findCredentialByName: (workspace_id, name) => one<CredentialRow>(`SELECT * FROM credentials WHERE workspace_id = ${p(1)} AND name = ${p(2)}`, [workspace_id, name], ['secret_version', 'dek_version']),
    listCredentials: (workspace_id) => em.find(CredentialEntity, { where: { workspace_id }, order: { name: 'ASC' } }),
    countCredentials: (workspace_id) => em.countBy(CredentialEntity, { workspace_id }),
    updateCredential: async (id, patch) => { await em.update(CredentialEntity, { id }, patch); },
    deleteCredential: async (id) => { await em.delete(CredentialEntity, { id }); },
    lockCredential: async (id) => {
      const rows = (await em.query(
        `SELECT * FROM credentials WHERE id = ${p(1)}${db.dialect === 'postgres' ? ' FOR UPDATE' : ''}`, [id],
      )) as CredentialRow[];
      const row = rows[0];
      return row ? { ...row, secret_version: Number(row.secret_version), dek_version: Number(row.dek_version) } : null;
    },

    insertToken: async (row) => { await em.insert(TokenEntity, row); },
    findTokenByHash: (token_hash) => one<TokenRow>(`SELECT * FROM tokens WHERE token_hash = ${p(1)}`, [token_hash]),
    findToken: (id) => em.findOneBy(TokenEntity, { id }),
    listTokens: (creator_id, type) => em.find(TokenEntity, { where: { creator_id, type }, order: { created_at: 'DESC' } }),
    updateToken: async (id, patch) => { await em.update(TokenEntity, { id }, patch); },
  };
}

export function createStore(db: Database, audit: AuditLog): Store {
  return {
    read: createRepos(db.dataSource.manager, db),
    tx: (fn) => db.tx((em) => {
      const tx: Tx = { ...createRepos(em, db), audit: (input) => audit.appendInTx(em, input) };
      return fn(tx);
    }),
    audit: (input) => audit.append(input),
    purgeDeleted: () => db.purgeDeleted(),
  };
}

export type { AccountRow, CredentialRow, GrantRow, OrganizationRow, SessionRow, TokenRow, WorkspaceRow };
