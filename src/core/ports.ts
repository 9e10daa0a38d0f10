/**
 * What core services need from storage and key custody, as interfaces. core/ imports nothing from
 * storage/, http/, mcp/ or cli/ (DESIGN.md §3); storage/repos.ts implements these over TypeORM.
 */
import type { AuditInput } from '../audit/audit-log.ts';
import type { AuditRecord } from '../audit/chain.ts';
import type { MaskedQueryResult } from '../sql/pool.ts';
import type {
  AccountRow, CredentialRow, GrantRow, OrganizationRow, SessionRow, TokenRow, WorkspaceRow,
} from '../storage/entities.ts';

export type { AccountRow, CredentialRow, GrantRow, OrganizationRow, SessionRow, TokenRow, WorkspaceRow };

export interface Repos {
  // accounts and organizations
  findAccountByEmail(email: string): Promise<AccountRow | null>;
  findAccountById(id: string): Promise<AccountRow | null>;
  insertAccount(row: AccountRow): Promise<void>;
  insertOrganization(row: OrganizationRow): Promise<void>;
  insertMembership(orgId: string, accountId: string, role: string, at: string): Promise<void>;
  findOrganization(id: string): Promise<OrganizationRow | null>;
  findPersonalOrganization(accountId: string): Promise<OrganizationRow | null>;
  setOrganizationPlan(id: string, plan: string): Promise<void>;
  // sessions and login throttling
  insertSession(row: SessionRow): Promise<void>;
  findSession(id: string): Promise<SessionRow | null>;
  deleteSession(id: string): Promise<void>;
  insertLoginFailure(email: string, ip: string | null, at: string): Promise<void>;
  countLoginFailures(email: string, sinceIso: string): Promise<number>;
  clearLoginFailures(email: string): Promise<void>;
  // workspaces and grants
  insertWorkspace(row: WorkspaceRow): Promise<void>;
  findWorkspace(id: string): Promise<WorkspaceRow | null>;
  /** The workspace row under a row lock (FOR UPDATE on PostgreSQL; SQLite transactions are serialised). */
  lockWorkspace(id: string): Promise<WorkspaceRow | null>;
  findWorkspaceByName(orgId: string, name: string): Promise<WorkspaceRow | null>;
  countWorkspacesInOrg(orgId: string): Promise<number>;
  listWorkspacesGranted(accountId: string): Promise<Array<WorkspaceRow & { permissions: string }>>;
  listAllWorkspaces(): Promise<WorkspaceRow[]>;
  updateWorkspace(id: string, patch: Partial<WorkspaceRow>): Promise<void>;
  deleteWorkspace(id: string): Promise<void>;
  findGrant(workspaceId: string, accountId: string): Promise<GrantRow | null>;
  listGrants(workspaceId: string): Promise<Array<GrantRow & { email: string }>>;
  upsertGrant(row: GrantRow): Promise<void>;
  deleteGrant(workspaceId: string, accountId: string): Promise<void>;
  // credentials
  insertCredential(row: CredentialRow): Promise<void>;
  findCredential(id: string): Promise<CredentialRow | null>;
  findCredentialByName(workspaceId: string, name: string): Promise<CredentialRow | null>;
  listCredentials(workspaceId: string): Promise<CredentialRow[]>;
  countCredentials(workspaceId: string): Promise<number>;
  updateCredential(id: string, patch: Partial<CredentialRow>): Promise<void>;
  deleteCredential(id: string): Promise<void>;
  /** Row lock on the credential (FOR UPDATE on PostgreSQL; SQLite transactions are serialised). */
  lockCredential(id: string): Promise<CredentialRow | null>;
  // tokens
  insertToken(row: TokenRow): Promise<void>;
  findTokenByHash(hash: string): Promise<TokenRow | null>;
  findToken(id: string): Promise<TokenRow | null>;
  listTokens(creatorId: string, type: string): Promise<TokenRow[]>;
  updateToken(id: string, patch: Partial<TokenRow>): Promise<void>;
}

export interface Tx extends Repos {
  /** Appends an audit record inside this transaction. */
  audit(input: AuditInput): Promise<AuditRecord>;
}

export interface Store {
  /** Non-transactional reads. */
  readonly read: Repos;
  tx<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /** Group-committed audit append for uses and denials; resolves once durable. */
  audit(input: AuditInput): Promise<AuditRecord>;
  /**
   * Makes rows deleted or overwritten so far physically unrecoverable from the database's own files
   * where the engine allows it (SQLite: secure_delete is on, and the WAL is checkpointed and
   * truncated). PostgreSQL keeps dead tuples until VACUUM (docs/operations.md).
   */
  purgeDeleted(): Promise<void>;
}

/**
 * Key custody as core sees it: it gets wrapped keys and opaque events, never a plaintext key.
 * Implemented by the actor system (src/actors), the only place that holds DEKs.
 */
export interface WorkspaceKeys {
  /** Generates a DEK for a new workspace inside the key boundary; returns only its wrapped form. */
  provision(workspaceId: string): Promise<{ wrappedDek: string; keyBackendId: string }>;
  /** The workspace was deleted: drop its actor and zero its keys. */
  forget(workspaceId: string): Promise<void>;
}

/** A credential's secret re-encrypted under a new DEK, with the ciphertext it replaces. */
export interface Resealed {
  id: string;
  secret: string;
  /** The stored ciphertext this was made from: the rotation commits only if it is still current. */
  before: string;
}

/** A sealed secret as stored: JSON of field → base64 ciphertext, with the DEK version that made it. */
export interface SealedSecretRecord {
  secret: string;
  dekVersion: number;
  /** Non-secret config derived from the secret (SSH public key, database host/user…). */
  derivedConfig: Record<string, unknown>;
}

/**
 * The actor boundary as core sees it: core hands over what a person typed and gets back ciphertext,
 * or hands over a stored row and gets back a result. Implemented by src/actors/vault.ts.
 */
export interface SecretVault {
  /**
   * Validates `input` with the kind's schema, seals each field under the workspace DEK and calls
   * `persist` while the actor holds its mailbox exclusively (so no DEK rotation can interleave).
   */
  seal(workspaceId: string, credentialId: string, scheme: string, input: unknown, config: Record<string, unknown>,
    persist: (sealed: SealedSecretRecord) => Promise<void>): Promise<void>;
  /** Plaintext fields as strings, for `reveal` only (built at the last moment). */
  reveal(row: CredentialRow): Promise<Record<string, string>>;
  /** A credential's secret changed or it was deleted: drop caches and pools for it. */
  reset(workspaceId: string, credentialId: string): Promise<void>;
  /** Re-encrypts all of a workspace's secrets under a new DEK; `persist` stores everything in one tx. */
  rotateDek(workspaceId: string, persist: (wrappedDek: string, keyBackendId: string, version: number, resealed: Resealed[]) => Promise<void>): Promise<number>;
}

/** An outbound call already checked by core (URL under the base, method allowed, agent headers safe). */
export interface PreparedCall {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body: Buffer | undefined;
}

export interface CallApiResult {
  status: number;
  headers: Record<string, string>;
  body: unknown;
  encoding: 'json' | 'text' | 'base64';
  truncated: boolean;
  latencyMs: number;
}

/** Use operations that need plaintext; each runs inside the workspace actor. */
export interface UsePort {
  callApi(row: CredentialRow, call: PreparedCall): Promise<CallApiResult>;
}

/** SSH signing inside the actor: returns only the SSH signature blob. */
export interface SignPort {
  sign(row: CredentialRow, data: Buffer, flags: number): Promise<Buffer>;
}

export interface QueryDbRequest { sql: string; params?: unknown[] | undefined; maxRows?: number | undefined }
/** What query_db returns: columns, capped rows (masked), counts, and what was masked. */
export type QueryDbResult = MaskedQueryResult;

/** query_db inside the actor. */
export interface QueryPort {
  queryDb(row: CredentialRow, input: QueryDbRequest): Promise<QueryDbResult>;
}
