/**
 * Machine tokens: agent (MCP), SSH (signing) and CI (injection). Shown once; stored as a peppered
 * hash with a display prefix; revocable with immediate effect (every request re-reads the row);
 * re-checked on every call against the creator's current permissions (AccessService).
 */
import { randomUUID } from 'node:crypto';
import { CustosError, notFound } from '../errors.ts';
import { orgChain, workspaceChain } from '../audit/audit-log.ts';
import { actorOf, type AgentScopes, type CiScopes, type Principal, type RequestContext, type SshScopes } from './context.ts';
import { intersect, parsePermissions, type HttpMethod, type Permission, type Tool } from './policy.ts';
import { displayPrefix, hashToken, mintToken, parseToken, type TokenType } from './token-format.ts';
import type { AccessService } from './access.ts';
import type { Store, TokenRow } from './ports.ts';

export interface AgentTokenInput {
  name: string;
  tools: Tool[];
  methods: HttpMethod[];
  workspaceId?: string | null;
  grants?: Record<string, Permission[]>;
  defaultPermissions?: Permission[];
  expiresAt?: string | null;
}
export interface SshTokenInput { name: string; workspaceId?: string | null; credentialIds?: string[] | null; expiresAt?: string | null }
export interface CiTokenInput { name: string; workspaceId: string; credentials?: string[] | null; expiresAt: string }

export interface TokenView {
  id: string;
  type: TokenType;
  name: string;
  prefix: string;
  scopes: AgentScopes | SshScopes | CiScopes;
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt: string | null;
  revokedAt: string | null;
}

/** last_used_at is written at most this often per token, to keep the hot path free of writes. */
const LAST_USED_RESOLUTION_MS = 60_000;

export function tokenView(row: TokenRow): TokenView {
  return {
    id: row.id, type: row.type as TokenType, name: row.name, prefix: row.prefix, scopes: JSON.parse(row.scopes) as TokenView['scopes'],
    createdAt: row.created_at, lastUsedAt: row.last_used_at, expiresAt: row.expires_at, revokedAt: row.revoked_at,
  };
}

export class TokenService {
  constructor(
    private readonly store: Store,
    private readonly access: AccessService,
    private readonly pepper: Buffer,
  ) {}

  async createAgent(ctx: RequestContext, input: AgentTokenInput): Promise<{ token: string; view: TokenView }> {
    const creatorId = this.#person(ctx);
    const grants: Record<string, Permission[]> = {};
    for (const [ws, perms] of Object.entries(input.grants ?? {})) {
      const mine = await this.#requireStanding(ctx, ws, 'token.create');
      const excess = perms.filter((p) => !mine.includes(p));
      if (excess.length) {
        throw new CustosError('CUSTOS_ERR_FORBIDDEN', `A token cannot hold more than its creator: you lack ${excess.join(', ')} on workspace ${ws}.`);
      }
      grants[ws] = perms;
    }
    if (input.workspaceId) await this.#requireStanding(ctx, input.workspaceId, 'token.create');
    const scopes: AgentScopes = {
      tools: [...new Set(input.tools)], methods: [...new Set(input.methods)], workspaceId: input.workspaceId ?? null,
      grants, defaultPermissions: input.defaultPermissions ?? ['read', 'use'],
    };
    return this.#insert(ctx, creatorId, 'agent', input.name, scopes, scopes.workspaceId, input.expiresAt ?? null);
  }

  async createSsh(ctx: RequestContext, input: SshTokenInput): Promise<{ token: string; view: TokenView }> {
    const creatorId = this.#person(ctx);
    if (input.workspaceId) {
      const mine = await this.#requireStanding(ctx, input.workspaceId, 'token.create');
      if (!mine.includes('use')) throw new CustosError('CUSTOS_ERR_FORBIDDEN', "SSH tokens need the 'use' permission on the workspace.");
    }
    const scopes: SshScopes = { workspaceId: input.workspaceId ?? null, credentialIds: input.credentialIds ?? null };
    return this.#insert(ctx, creatorId, 'ssh', input.name, scopes, scopes.workspaceId, input.expiresAt ?? null);
  }

  /** CI tokens can be minted only by a holder of `reveal` on the workspace (spec §2). */
  async createCi(ctx: RequestContext, input: CiTokenInput): Promise<{ token: string; view: TokenView }> {
    const creatorId = this.#person(ctx);
    await this.access.require(ctx, input.workspaceId, 'reveal', 'token.create');
    const scopes: CiScopes = { workspaceId: input.workspaceId, credentialNames: input.credentials ?? null };
    return this.#insert(ctx, creatorId, 'ci', input.name, scopes, input.workspaceId, input.expiresAt);
  }

  async list(ctx: RequestContext, type: TokenType): Promise<TokenView[]> {
    const rows = await this.store.read.listTokens(this.#person(ctx), type);
    return rows.map(tokenView);
  }

  async revoke(ctx: RequestContext, type: TokenType, id: string): Promise<void> {
    const creatorId = this.#person(ctx);
    const row = await this.store.read.findToken(id);
    if (!row || row.type !== type || row.creator_id !== creatorId) throw notFound('Token');
    if (row.revoked_at) return;
    await this.store.tx(async (tx) => {
      const now = new Date().toISOString();
      await tx.updateToken(id, { revoked_at: now });
      await this.#auditTokenEvent(tx.audit.bind(tx), ctx, creatorId, row.workspace_id, 'token.revoke', row);
    });
  }

  /** Bearer token → principal. Cheap shape/checksum check first: garbage never reaches the database. */
  async resolve(token: string, type: TokenType, _ip: string): Promise<Principal> {
    const invalid = (why: string): CustosError => new CustosError('CUSTOS_ERR_TOKEN_INVALID', `The ${type} token is ${why}.`);
    if (parseToken(token) !== type) throw invalid('not valid');
    const row = await this.store.read.findTokenByHash(hashToken(token, this.pepper));
    if (!row || row.type !== type) throw invalid('not valid');
    if (row.revoked_at) throw invalid('revoked');
    const now = Date.now();
    if (row.expires_at && Date.parse(row.expires_at) <= now) throw invalid('expired');
    if (!row.last_used_at || now - Date.parse(row.last_used_at) > LAST_USED_RESOLUTION_MS) {
      // Best effort and off the request's critical path.
      void this.store.tx((tx) => tx.updateToken(row.id, { last_used_at: new Date(now).toISOString() })).catch(() => undefined);
    }
    const scopes = JSON.parse(row.scopes) as unknown;
    switch (type) {
      case 'agent': return { type: 'agent_token', tokenId: row.id, creatorId: row.creator_id, scopes: scopes as AgentScopes };
      case 'ssh': return { type: 'ssh_token', tokenId: row.id, creatorId: row.creator_id, scopes: scopes as SshScopes };
      case 'ci': return { type: 'ci_token', tokenId: row.id, creatorId: row.creator_id, scopes: scopes as CiScopes };
    }
  }

  #person(ctx: RequestContext): string {
    if (ctx.principal.type !== 'account') throw new CustosError('CUSTOS_ERR_FORBIDDEN', 'Only people can manage tokens.');
    return ctx.principal.accountId;
  }

  async #requireStanding(ctx: RequestContext, workspaceId: string, action: string): Promise<Permission[]> {
    const { permissions } = await this.access.require(ctx, workspaceId, null, action);
    return intersect(permissions, parsePermissions('read,write,use,reveal,manage'));
  }

  async #insert(ctx: RequestContext, creatorId: string, type: TokenType, name: string, scopes: object, workspaceId: string | null, expiresAt: string | null): Promise<{ token: string; view: TokenView }> {
    if (expiresAt && Date.parse(expiresAt) <= Date.now()) throw new CustosError('CUSTOS_ERR_VALIDATION', 'expiresAt must be in the future.');
    const token = mintToken(type);
    const now = new Date().toISOString();
    const row: TokenRow = {
      id: randomUUID(), type, name, token_hash: hashToken(token, this.pepper), prefix: displayPrefix(token), creator_id: creatorId,
      workspace_id: workspaceId, scopes: JSON.stringify(scopes), expires_at: expiresAt, last_used_at: null, revoked_at: null, created_at: now,
    };
    await this.store.tx(async (tx) => {
      await tx.insertToken(row);
      await this.#auditTokenEvent(tx.audit.bind(tx), ctx, creatorId, workspaceId, 'token.create', row);
    });
    return { token, view: tokenView(row) };
  }

  async #auditTokenEvent(audit: Store['audit'], ctx: RequestContext, creatorId: string, workspaceId: string | null, action: string, row: TokenRow): Promise<void> {
    const target = { type: `${row.type}_token`, id: row.id, name: row.name };
    const details = { prefix: row.prefix, scopes: JSON.parse(row.scopes) as unknown, expiresAt: row.expires_at };
    const org = await this.store.read.findPersonalOrganization(creatorId);
    if (org) await audit({ chain: orgChain(org.id), actor: actorOf(ctx), action, target, outcome: 'success', details });
    if (workspaceId) await audit({ chain: workspaceChain(workspaceId), actor: actorOf(ctx), action, target, outcome: 'success', details });
  }
}
