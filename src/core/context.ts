/** Who is asking, and from where. Every core call takes one; audit records are built from it. */
import type { AuditActor } from '../audit/chain.ts';
import type { Permission, Tool, HttpMethod } from './policy.ts';

export interface AgentScopes {
  tools: Tool[];
  methods: HttpMethod[];
  /** Bound to one workspace, or null for every workspace its grants cover. */
  workspaceId: string | null;
  /** Per-workspace permissions; workspaces not listed get `defaultPermissions`. */
  grants: Record<string, Permission[]>;
  defaultPermissions: Permission[];
}
export interface SshScopes { workspaceId: string | null; credentialIds: string[] | null }
export interface CiScopes { workspaceId: string; credentialNames: string[] | null }

export type Principal =
  | { type: 'account'; accountId: string; email: string }
  | { type: 'agent_token'; tokenId: string; creatorId: string; scopes: AgentScopes }
  | { type: 'ssh_token'; tokenId: string; creatorId: string; scopes: SshScopes }
  | { type: 'ci_token'; tokenId: string; creatorId: string; scopes: CiScopes }
  | { type: 'system' };

export interface RequestContext {
  principal: Principal;
  ip?: string;
  requestId?: string;
}

export function actorOf(ctx: RequestContext): AuditActor {
  const base = { ...(ctx.ip ? { ip: ctx.ip } : {}), ...(ctx.requestId ? { requestId: ctx.requestId } : {}) };
  const p = ctx.principal;
  switch (p.type) {
    case 'account':
      return { type: 'account', id: p.accountId, ...base };
    case 'system':
      return { type: 'system', id: null, ...base };
    default:
      return { type: p.type, id: p.tokenId, creatorId: p.creatorId, ...base };
  }
}

/** The account on whose authority a principal acts (tokens act for their creator). */
export function accountIdOf(p: Principal): string | null {
  if (p.type === 'account') return p.accountId;
  if (p.type === 'system') return null;
  return p.creatorId;
}

export const systemContext: RequestContext = { principal: { type: 'system' } };
