/**
 * Table definitions as TypeORM EntitySchemas (tsx emits no decorator metadata; PLATFORM.md).
 * Every column has an explicit, portable type so one schema serves SQLite and PostgreSQL:
 * timestamps are ISO-8601 strings, JSON is text, binary (wrapped keys, ciphertext) is base64 text.
 * Storage is untrusted (DESIGN.md §2): it only ever holds ciphertext and wrapped keys.
 */
import { EntitySchema } from 'typeorm';

export interface AccountRow { id: string; email: string; password_hash: string; created_at: string }
export interface OrganizationRow { id: string; name: string; plan: string; owner_id: string; created_at: string }
export interface MembershipRow { org_id: string; account_id: string; role: string; created_at: string }
export interface SessionRow { id: string; account_id: string; csrf_hash: string; created_at: string; expires_at: string }
export interface LoginFailureRow { id: string; email: string; ip: string | null; at: string }
export interface WorkspaceRow {
  id: string; org_id: string; name: string; created_by: string;
  wrapped_dek: string | null; key_backend_id: string | null; dek_version: number;
  created_at: string; updated_at: string;
}
export interface GrantRow {
  workspace_id: string; account_id: string; permissions: string; granted_by: string; created_at: string; updated_at: string;
}
export interface CredentialRow {
  id: string; workspace_id: string; name: string; service: string; auth_scheme: string; base_url: string | null;
  config: string; secret: string | null; secret_version: number; dek_version: number; status: string; health: string;
  health_reason: string | null; env_name: string | null; created_by: string; updated_by: string;
  created_at: string; updated_at: string;
}
export interface TokenRow {
  id: string; type: string; name: string; token_hash: string; prefix: string; creator_id: string;
  workspace_id: string | null; scopes: string; expires_at: string | null; last_used_at: string | null;
  revoked_at: string | null; created_at: string;
}
export interface AuditChainRow { id: string; last_seq: number; last_hash: string }
export interface AuditEventRow {
  chain_id: string; seq: number; id: string; at: string; actor: string; action: string; target: string;
  outcome: string; details: string; prev_hash: string; hash: string;
}

const id = { type: 'varchar', length: 64, primary: true } as const;
const ref = { type: 'varchar', length: 64 } as const;
const ts = { type: 'varchar', length: 32 } as const;
const tsNull = { type: 'varchar', length: 32, nullable: true } as const;

export const AccountEntity = new EntitySchema<AccountRow>({
  name: 'Account', tableName: 'accounts',
  columns: { id, email: { type: 'varchar', length: 320, unique: true }, password_hash: { type: 'varchar', length: 255 }, created_at: ts },
});
export const OrganizationEntity = new EntitySchema<OrganizationRow>({
  name: 'Organization', tableName: 'organizations',
  columns: { id, name: { type: 'varchar', length: 200 }, plan: { type: 'varchar', length: 16 }, owner_id: ref, created_at: ts },
});
export const MembershipEntity = new EntitySchema<MembershipRow>({
  name: 'Membership', tableName: 'memberships',
  columns: { org_id: { ...ref, primary: true }, account_id: { ...ref, primary: true }, role: { type: 'varchar', length: 16 }, created_at: ts },
});
export const SessionEntity = new EntitySchema<SessionRow>({
  name: 'Session', tableName: 'sessions',
  columns: { id, account_id: ref, csrf_hash: { type: 'varchar', length: 64 }, created_at: ts, expires_at: ts },
});
export const LoginFailureEntity = new EntitySchema<LoginFailureRow>({
  name: 'LoginFailure', tableName: 'login_failures',
  columns: { id, email: { type: 'varchar', length: 320 }, ip: { type: 'varchar', length: 64, nullable: true }, at: ts },
});
export const WorkspaceEntity = new EntitySchema<WorkspaceRow>({
  name: 'Workspace', tableName: 'workspaces',
  columns: {
    id, org_id: ref, name: { type: 'varchar', length: 100 }, created_by: ref,
    wrapped_dek: { type: 'text', nullable: true }, key_backend_id: { type: 'varchar', length: 100, nullable: true },
    dek_version: { type: 'integer' }, created_at: ts, updated_at: ts,
  },
});
export const GrantEntity = new EntitySchema<GrantRow>({
  name: 'Grant', tableName: 'workspace_grants',
  columns: {
    workspace_id: { ...ref, primary: true }, account_id: { ...ref, primary: true },
    permissions: { type: 'varchar', length: 64 }, granted_by: ref, created_at: ts, updated_at: ts,
  },
});
export const CredentialEntity = new EntitySchema<CredentialRow>({
  name: 'Credential', tableName: 'credentials',
  columns: {
    id, workspace_id: ref, name: { type: 'varchar', length: 100 }, service: { type: 'varchar', length: 64 },
    auth_scheme: { type: 'varchar', length: 16 }, base_url: { type: 'varchar', length: 2048, nullable: true },
    config: { type: 'text' }, secret: { type: 'text', nullable: true }, secret_version: { type: 'integer' },
    dek_version: { type: 'integer' }, status: { type: 'varchar', length: 16 }, health: { type: 'varchar', length: 24 },
    health_reason: { type: 'varchar', length: 500, nullable: true }, env_name: { type: 'varchar', length: 100, nullable: true },
    created_by: ref, updated_by: ref, created_at: ts, updated_at: ts,
  },
});
export const TokenEntity = new EntitySchema<TokenRow>({
  name: 'Token', tableName: 'tokens',
  columns: {
    id, type: { type: 'varchar', length: 8 }, name: { type: 'varchar', length: 100 },
    token_hash: { type: 'varchar', length: 64, unique: true }, prefix: { type: 'varchar', length: 32 },
    creator_id: ref, workspace_id: { ...ref, nullable: true }, scopes: { type: 'text' },
    expires_at: tsNull, last_used_at: tsNull, revoked_at: tsNull, created_at: ts,
  },
});
export const AuditChainEntity = new EntitySchema<AuditChainRow>({
  name: 'AuditChain', tableName: 'audit_chains',
  columns: { id: { type: 'varchar', length: 80, primary: true }, last_seq: { type: 'integer' }, last_hash: { type: 'varchar', length: 64 } },
});
export const AuditEventEntity = new EntitySchema<AuditEventRow>({
  name: 'AuditEvent', tableName: 'audit_events',
  columns: {
    chain_id: { type: 'varchar', length: 80, primary: true }, seq: { type: 'integer', primary: true },
    id: { type: 'varchar', length: 64 }, at: ts, actor: { type: 'text' }, action: { type: 'varchar', length: 64 },
    target: { type: 'text' }, outcome: { type: 'varchar', length: 16 }, details: { type: 'text' },
    prev_hash: { type: 'varchar', length: 64 }, hash: { type: 'varchar', length: 64 },
  },
});

export const ENTITIES = [
  AccountEntity, OrganizationEntity, MembershipEntity, SessionEntity, LoginFailureEntity, WorkspaceEntity,
  GrantEntity, CredentialEntity, TokenEntity, AuditChainEntity, AuditEventEntity,
];
