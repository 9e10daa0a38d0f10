/**
 * Shared fixtures for the /mcp end-to-end tests: people, credentials and agent tokens made through
 * the real app API, raw HTTP to /mcp (for transport-level refusals the SDK client hides), marker
 * secrets, and audit look-ups. Everything goes through the running service; nothing is stubbed.
 */
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Client, type Res, type TestCustos } from './custos.ts';

export type Person = Awaited<ReturnType<typeof Client.signup>>;

/** A unique, recognisable secret: if it shows up anywhere it must not, the test names it. */
export function marker(label = ''): string {
  return `MARKER-${label}${label ? '-' : ''}${randomBytes(10).toString('hex')}`;
}

/** A short unique tag for paths and names, so concurrent tests never read each other's requests. */
export function tag(): string {
  return randomBytes(5).toString('hex');
}

export function signup(inst: TestCustos): Promise<Person> {
  return Client.signup(inst.url);
}

function must<T>(r: Res<T>, status: number, what: string): Res<T> {
  if (r.status !== status) throw new Error(`${what}: expected ${status}, got ${r.status} ${r.text}`);
  return r;
}

export interface CredentialInput {
  name: string;
  authScheme: 'bearer' | 'header' | 'sigv4' | 'oauth2';
  baseUrl: string;
  config?: Record<string, unknown>;
  secret?: Record<string, unknown>;
}

/** Creates a credential as the person (cookie + CSRF) and returns its id. */
export async function addCredential(p: Person, input: CredentialInput, workspaceId = p.workspaceId): Promise<string> {
  const r = must(await p.client.post(`/workspaces/${workspaceId}/credentials`, { service: 'custom', ...input }), 201, `create credential ${input.name}`);
  return r.body.credential.id as string;
}

export interface AgentTokenOptions {
  name?: string;
  tools?: string[];
  methods?: string[];
  workspaceId?: string | null;
  grants?: Record<string, string[]>;
  defaultPermissions?: string[];
  expiresAt?: string | null;
}

/** The raw POST /tokens/agent answer (tests of refusals look at the status). */
export function postAgentToken(p: Person, opts: AgentTokenOptions = {}): Promise<Res> {
  return p.client.post('/tokens/agent', {
    name: opts.name ?? 'agent',
    tools: opts.tools ?? ['list_services', 'create_service', 'call_api'],
    methods: opts.methods ?? ['GET', 'POST'],
    ...(opts.workspaceId !== undefined ? { workspaceId: opts.workspaceId } : {}),
    ...(opts.grants ? { grants: opts.grants } : {}),
    ...(opts.defaultPermissions ? { defaultPermissions: opts.defaultPermissions } : {}),
    ...(opts.expiresAt !== undefined ? { expiresAt: opts.expiresAt } : {}),
  });
}

export async function mintAgent(p: Person, opts: AgentTokenOptions = {}): Promise<{ token: string; id: string; prefix: string }> {
  const r = must(await postAgentToken(p, opts), 201, 'mint agent token');
  return { token: r.body.token as string, id: r.body.id as string, prefix: r.body.prefix as string };
}

export interface AuditEntry {
  action: string;
  outcome: string;
  actor: { type: string; id?: string | null; creatorId?: string };
  target: { type: string; id?: string; name?: string };
  details: Record<string, any>;
}

/** The workspace's audit entries (newest first, as the API returns them). */
export async function auditOf(p: Person, workspaceId = p.workspaceId): Promise<AuditEntry[]> {
  const r = must(await p.client.get(`/workspaces/${workspaceId}/audit?limit=1000`), 200, 'read audit');
  return r.body.entries as AuditEntry[];
}

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any;
}

/**
 * A raw HTTP request with node:http, which (unlike fetch) lets a test set Host and Origin freely,
 * as an attacker's client or a DNS-rebinding browser would.
 */
export function rawHttp(url: string, opts: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {}): Promise<RawResponse> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: u.hostname, port: u.port, path: u.pathname + u.search, method: opts.method ?? 'POST',
      headers: { ...(opts.body !== undefined ? { 'content-length': String(Buffer.byteLength(opts.body)) } : {}), ...opts.headers },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = text ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    if (opts.body !== undefined) req.write(opts.body);
    req.end();
  });
}

export const MCP_ACCEPT = 'application/json, text/event-stream';

/** A JSON-RPC POST to /mcp, as an MCP client sends it (the stateless transport needs no session). */
export function mcpPost(baseUrl: string, opts: { token?: string | null; authorization?: string; headers?: Record<string, string>; body?: unknown } = {}): Promise<RawResponse> {
  const body = JSON.stringify(opts.body ?? {
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw-test', version: '1.0.0' } },
  });
  const auth = opts.authorization ?? (opts.token ? `Bearer ${opts.token}` : undefined);
  return rawHttp(`${baseUrl}/mcp`, {
    body,
    headers: { 'content-type': 'application/json', accept: MCP_ACCEPT, ...(auth ? { authorization: auth } : {}), ...opts.headers },
  });
}

/** The forms an upstream plausibly echoes a secret in; none may reach an agent. */
export function echoForms(secret: string): string[] {
  const b = Buffer.from(secret, 'utf8');
  return [secret, b.toString('base64'), b.toString('base64url'), encodeURIComponent(secret), b.toString('hex'), JSON.stringify(secret).slice(1, -1)];
}

/** Waits until `check` holds (polling; no timing assertion), or fails after `ms`. */
export async function eventually(check: () => Promise<boolean> | boolean, ms = 5000, what = 'condition'): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
