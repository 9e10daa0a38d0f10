/**
 * The agent-facing operations (DESIGN.md §9): token scopes → resolve service → policy → actor use
 * → audit → result. Every refusal is audited; every use is audited before its result is returned
 * (fail closed: if the audit write fails, the agent gets an error, not the upstream's answer).
 */
import { isIP } from 'node:net';
import { CustosError, notFound } from '../errors.ts';
import { workspaceChain } from '../audit/audit-log.ts';
import { buildUpstreamUrl, checkMethod, isBlockedAddress, sanitizeAgentHeaders } from '../broker/index.ts';
import { isHttpScheme, type AuthScheme, type PublicView } from '../kinds/credential-kind.ts';
import { actorOf, type RequestContext } from './context.ts';
import { canSeeConfig, HTTP_METHODS, type Permission, type Tool } from './policy.ts';
import type { AccessService } from './access.ts';
import { credentialView, type CredentialService } from './credentials.ts';
import type { CallApiResult, CredentialRow, Store, UsePort, WorkspaceRow } from './ports.ts';

export interface ServiceView {
  id: string;
  name: string;
  workspace: string;
  workspaceId: string;
  service: string;
  authScheme: AuthScheme;
  baseUrl: string | null;
  status: 'pending' | 'ready';
  health: 'ok' | 'reauth_required';
  allowedMethods: string[];
  config: PublicView;
}

export interface CallApiInput {
  service: string;
  method: string;
  path: string;
  headers?: Record<string, string> | undefined;
  body?: unknown;
}

export interface CreateServiceInput {
  name: string;
  baseUrl: string;
  authScheme: 'bearer' | 'header' | 'sigv4' | 'oauth2';
  headerName?: string | undefined;
  service?: string | undefined;
  workspace?: string | undefined;
}


/** `/v1/x?a=1&b=2` → `/v1/x?a=[redacted]&b=[redacted]`: query values may be secrets of their own. */
export function redactQuery(path: string): string {
  const q = path.indexOf('?');
  if (q < 0) return path;
  const params = path.slice(q + 1).split('&').map((kv) => `${kv.split('=')[0]}=[redacted]`);
  return `${path.slice(0, q)}?${params.join('&')}`;
}

/** A credential as an agent sees it: non-secret config, and the methods it may call with it. */
function serviceView(row: CredentialRow, workspace: WorkspaceRow, permissions: Permission[], methods: readonly string[]): ServiceView {
  const view = credentialView(row);
  return {
    id: row.id, name: row.name, workspace: workspace.name, workspaceId: workspace.id, service: row.service,
    authScheme: view.authScheme, baseUrl: row.base_url, status: view.status, health: view.health,
    allowedMethods: isHttpScheme(row.auth_scheme) && permissions.includes('use') ? [...methods] : [],
    config: view.config,
  };
}

export class BrokerService {
  constructor(
    private readonly store: Store,
    private readonly access: AccessService,
    private readonly credentials: CredentialService,
    private readonly uses: UsePort,
    private readonly appUrl: () => string,
  ) {}

  /** Tool scope: a token may use only its tools. Refusals are audited on the token creator's chains. */
  async requireTool(ctx: RequestContext, tool: Tool): Promise<void> {
    const p = ctx.principal;
    if (p.type !== 'agent_token') throw new CustosError('CUSTOS_ERR_UNAUTHENTICATED', 'MCP tools need an agent token.');
    if (p.scopes.tools.includes(tool)) return;
    const target = { type: 'tool', name: tool };
    for (const ws of await this.access.visibleWorkspaces(ctx.principal)) {
      await this.store.audit({ chain: workspaceChain(ws.workspace.id), actor: actorOf(ctx), action: `mcp.${tool}`, target, outcome: 'denied', details: { reason: 'tool not in token scope' } });
    }
    throw new CustosError('CUSTOS_ERR_TOOL_NOT_ALLOWED', `This agent token may not use ${tool}; its tools are: ${p.scopes.tools.join(', ')}.`);
  }

  /**
   * Finds a service by credential id, `workspace/name`, or a name unique among visible workspaces.
   * A service in a workspace the principal cannot see is exactly as missing as one that does not exist.
   */
  async resolve(ctx: RequestContext, ref: string): Promise<{ row: CredentialRow; workspace: WorkspaceRow; permissions: Permission[] }> {
    const visible = await this.access.visibleWorkspaces(ctx.principal);
    const slash = ref.indexOf('/');
    const wsName = slash > 0 ? ref.slice(0, slash) : null;
    const name = slash > 0 ? ref.slice(slash + 1) : ref;
    const matches: Array<{ row: CredentialRow; workspace: WorkspaceRow; permissions: Permission[] }> = [];
    for (const v of visible) {
      if (wsName !== null && v.workspace.name !== wsName) continue;
      if (!canSeeConfig(v.permissions)) continue;
      const row = (await this.store.read.findCredentialByName(v.workspace.id, name))
        ?? (wsName === null && /^[0-9a-f-]{36}$/.test(ref) ? await this.store.read.findCredential(ref) : null);
      if (row && row.workspace_id === v.workspace.id) matches.push({ row, ...v });
    }
    if (matches.length === 0) throw notFound(`Service '${ref.slice(0, 100)}'`);
    if (matches.length > 1) {
      throw new CustosError('CUSTOS_ERR_VALIDATION', `Service name '${name}' exists in several workspaces (${matches.map((m) => m.workspace.name).join(', ')}); call it as '<workspace>/${name}'.`);
    }
    return matches[0]!;
  }

  async listServices(ctx: RequestContext): Promise<ServiceView[]> {
    const methods = ctx.principal.type === 'agent_token' ? ctx.principal.scopes.methods : [...HTTP_METHODS];
    const out: ServiceView[] = [];
    for (const v of await this.access.visibleWorkspaces(ctx.principal)) {
      if (!canSeeConfig(v.permissions)) continue;
      for (const row of await this.store.read.listCredentials(v.workspace.id)) out.push(serviceView(row, v.workspace, v.permissions, methods));
    }
    return out;
  }

  /** Pre-registers a service with the secret left blank (pending); a person supplies it in the app. */
  async createService(ctx: RequestContext, input: CreateServiceInput): Promise<{ service: ServiceView; supplySecretAt: string }> {
    const visible = (await this.access.visibleWorkspaces(ctx.principal)).filter((v) => v.permissions.includes('write'));
    const target = input.workspace
      ? visible.find((v) => v.workspace.id === input.workspace || v.workspace.name === input.workspace)
      : visible.length === 1 ? visible[0] : undefined;
    if (!target) {
      if (input.workspace) throw notFound(`Workspace '${input.workspace.slice(0, 100)}'`);
      throw new CustosError('CUSTOS_ERR_VALIDATION', visible.length === 0
        ? "This agent token has no workspace where it may create services (it needs 'write')."
        : `Name the workspace: one of ${visible.map((v) => v.workspace.name).join(', ')}.`);
    }
    // An agent may not point a credential at a private, loopback or metadata address: only a person
    // may bind a credential to such an address (the SSRF guard trusts what the base URL names).
    const host = new URL(input.baseUrl).hostname.replace(/^\[|\]$/g, '');
    if (host === 'localhost' || host.endsWith('.localhost') || (isIP(host) !== 0 && isBlockedAddress(host))) {
      await this.store.audit({ chain: workspaceChain(target.workspace.id), actor: actorOf(ctx), action: 'mcp.create_service', target: { type: 'credential', name: input.name },
        outcome: 'denied', details: { reason: 'private base URL' } });
      throw new CustosError('CUSTOS_ERR_DESTINATION_REFUSED', 'Agents cannot register services on private, loopback or link-local addresses; a person can, in the app.');
    }
    const created = await this.credentials.create(ctx, target.workspace.id, {
      name: input.name, service: input.service ?? 'custom', authScheme: input.authScheme, baseUrl: input.baseUrl,
      config: input.authScheme === 'header' && input.headerName ? { headerName: input.headerName } : undefined,
    }, 'mcp.create_service');
    const row = (await this.store.read.findCredential(created.id))!;
    const methods = ctx.principal.type === 'agent_token' ? ctx.principal.scopes.methods : [...HTTP_METHODS];
    return { service: serviceView(row, target.workspace, target.permissions, methods), supplySecretAt: `${this.appUrl()}/api/v1/credentials/${row.id}/secret` };
  }

  async callApi(ctx: RequestContext, input: CallApiInput): Promise<CallApiResult & { service: string }> {
    const p = ctx.principal;
    const scopeMethods = p.type === 'agent_token' ? p.scopes.methods : [...HTTP_METHODS];
    const { row, workspace, permissions } = await this.resolve(ctx, input.service);
    const chain = workspaceChain(workspace.id);
    const base = { chain, actor: actorOf(ctx), action: 'mcp.call_api', target: { type: 'credential', id: row.id, name: row.name } };
    const details = (extra: Record<string, unknown>): Record<string, unknown> => ({
      method: input.method.slice(0, 16), host: row.base_url ? new URL(row.base_url).host : null, path: redactQuery(input.path.slice(0, 512)), ...extra,
    });
    const started = performance.now();
    let prepared;
    try {
      if (!permissions.includes('use')) throw new CustosError('CUSTOS_ERR_FORBIDDEN', "Using a service needs the 'use' permission on its workspace.");
      const method = checkMethod(input.method, scopeMethods);
      if (row.status !== 'ready') throw new CustosError('CUSTOS_ERR_NOT_READY', `Service '${row.name}' is not ready: a person must supply the secret in the Custos app before it can be used.`);
      if (row.health === 'reauth_required') {
        throw new CustosError('CUSTOS_ERR_REAUTH_REQUIRED', `Service '${row.name}' needs a person to re-authorise it (its OAuth2 refresh failed${row.health_reason ? `: ${row.health_reason}` : ''}); supply a new secret in the Custos app.`);
      }
      if (!row.base_url || !isHttpScheme(row.auth_scheme)) throw new CustosError('CUSTOS_ERR_VALIDATION', `Service '${row.name}' is a ${row.auth_scheme} credential; use ${row.auth_scheme === 'database' ? 'query_db' : 'the SSH agent'} instead.`);
      const config = JSON.parse(row.config) as { headerName?: string };
      const headers = sanitizeAgentHeaders(input.headers, ['authorization', ...(config.headerName ? [config.headerName] : [])]);
      const url = buildUpstreamUrl(row.base_url, input.path);
      let body: Buffer | undefined;
      if (input.body !== undefined && input.body !== null) {
        if (typeof input.body === 'string') body = Buffer.from(input.body, 'utf8');
        else {
          body = Buffer.from(JSON.stringify(input.body), 'utf8');
          if (!Object.keys(headers).includes('content-type')) headers['content-type'] = 'application/json';
        }
      }
      prepared = { method, url, headers, body };
    } catch (err) {
      await this.store.audit({ ...base, outcome: 'denied', details: details({ code: err instanceof CustosError ? err.code : 'CUSTOS_ERR_INTERNAL' }) });
      throw err;
    }
    let result: CallApiResult;
    try {
      result = await this.uses.callApi(row, prepared);
    } catch (err) {
      await this.store.audit({ ...base, outcome: 'failure', details: details({ code: err instanceof CustosError ? err.code : 'CUSTOS_ERR_INTERNAL', latencyMs: Math.round(performance.now() - started) }) });
      throw err;
    }
    await this.store.audit({ ...base, outcome: 'success', details: details({ status: result.status, latencyMs: Math.round(result.latencyMs), truncated: result.truncated }) });
    return { service: row.name, ...result };
  }
}
