/**
 * /mcp on Koa. Before the SDK sees a request: Host and Origin are validated (DNS-rebinding defence;
 * the SDK's own options are deprecated), only `Authorization: Bearer custos_agent_…` is accepted,
 * the body is capped, and each token is rate-limited. Then the request goes to a fresh stateless
 * transport with the principal attached as `req.auth` (tools read it as extra.authInfo).
 */
import type Koa from 'koa';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CustosError } from '../errors.ts';
import { bearerToken, type TokenResolver } from '../http/auth.ts';
import { readJsonBody, type State } from '../http/middleware.ts';
import type { RequestContext } from '../core/context.ts';
import type { ToolDeps } from './context.ts';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { buildMcpServer } from './server.ts';

export interface McpMountOptions {
  deps: ToolDeps;
  tokens: TokenResolver;
  bodyLimitBytes: number;
  ratePerMinute: number;
  /** Host header values accepted (host:port). */
  allowedHosts: () => Set<string>;
  allowedOrigins: () => Set<string>;
}

/** A fixed-window counter per token, per node. */
class RateLimiter {
  readonly #windows = new Map<string, { start: number; count: number }>();
  constructor(private readonly perMinute: number) {}
  take(key: string, now = Date.now()): number | null {
    const w = this.#windows.get(key);
    if (!w || now - w.start >= 60_000) {
      if (this.#windows.size > 100_000) this.#windows.clear();
      this.#windows.set(key, { start: now, count: 1 });
      return null;
    }
    w.count++;
    return w.count > this.perMinute ? Math.ceil((w.start + 60_000 - now) / 1000) : null;
  }
}

/**
 * Building an McpServer (tool registrations, schema conversion, a JSON-schema validator) costs far
 * more than a call; a stateless transport, though, serves exactly one request. So servers are
 * pooled and each request connects a free one to a fresh transport, closing it afterwards. Nothing
 * about the caller lives on the server: the principal travels on the request (`req.auth`).
 */
/** Request headers the MCP transport reads (content negotiation, protocol version). */
const FORWARDED_HEADERS = ['accept', 'content-type', 'mcp-protocol-version', 'last-event-id'] as const;

export class ServerPool {
  readonly #free: McpServer[] = [];
  constructor(private readonly build: () => McpServer, private readonly max = 64) {}
  acquire(): McpServer {
    return this.#free.pop() ?? this.build();
  }
  release(server: McpServer): void {
    if (this.#free.length < this.max) this.#free.push(server);
  }
}

export function mcpMiddleware(opts: McpMountOptions): Koa.Middleware<State> {
  const limiter = new RateLimiter(opts.ratePerMinute);
  const pool = new ServerPool(() => buildMcpServer(opts.deps));
  return async function mcp(ctx, next) {
    if (ctx.path !== '/mcp') return next();
    const host = ctx.get('host');
    if (!opts.allowedHosts().has(host)) throw new CustosError('CUSTOS_ERR_ORIGIN_REFUSED', 'Host not accepted for /mcp.');
    const origin = ctx.get('origin');
    if (origin && !opts.allowedOrigins().has(origin)) throw new CustosError('CUSTOS_ERR_ORIGIN_REFUSED', 'Origin not accepted for /mcp.');
    const token = bearerToken(ctx);
    if (!token) {
      // Header values must be Latin-1 (Node throws ERR_INVALID_CHAR otherwise, turning this 401 into a 500): no '…' here.
      ctx.set('WWW-Authenticate', 'Bearer realm="custos", error="invalid_request", error_description="send Authorization: Bearer <agent token>"');
      throw new CustosError('CUSTOS_ERR_UNAUTHENTICATED', '/mcp needs Authorization: Bearer <agent token>.');
    }
    let principal;
    try {
      principal = await opts.tokens.resolve(token, 'agent', ctx.ip);
    } catch (err) {
      ctx.set('WWW-Authenticate', 'Bearer realm="custos", error="invalid_token"');
      throw err;
    }
    if (principal.type !== 'agent_token') throw new CustosError('CUSTOS_ERR_TOKEN_INVALID', 'Only agent tokens open /mcp.');
    const retryAfter = limiter.take(principal.tokenId);
    if (retryAfter !== null) {
      ctx.set('Retry-After', String(retryAfter));
      throw new CustosError('CUSTOS_ERR_RATE_LIMITED', `This agent token is over its rate limit (${opts.ratePerMinute}/min); retry in ${retryAfter}s.`);
    }
    if (ctx.method !== 'POST') {
      ctx.set('Allow', 'POST');
      ctx.status = 405;
      ctx.body = { jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this endpoint is stateless; use POST.' }, id: null };
      return;
    }
    const body = await readJsonBody(ctx, opts.bodyLimitBytes);
    const custos: RequestContext = { principal, ip: ctx.ip, requestId: ctx.state.requestId };
    // The SDK's web-standard transport, driven directly: the body is already parsed and capped, and
    // only the headers the transport reads are passed on (never Authorization: the principal is
    // handed over as authInfo). The SDK's Node adapter would re-wrap every request through a
    // Node→Fetch conversion layer, which dominated the per-call cost.
    const headers = new Headers();
    for (const name of FORWARDED_HEADERS) {
      const v = ctx.get(name);
      if (v) headers.set(name, v);
    }
    const request = new Request(`http://${host}/mcp`, { method: 'POST', headers });
    const server = pool.acquire();
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    try {
      await server.connect(transport);
      const response = await transport.handleRequest(request, {
        parsedBody: body,
        authInfo: { token: '[redacted]', clientId: principal.tokenId, scopes: principal.scopes.tools, extra: { custos } },
      });
      ctx.status = response.status;
      response.headers.forEach((value, name) => ctx.set(name, value));
      ctx.body = response.body ? Buffer.from(await response.arrayBuffer()) : '';
    } finally {
      // Detach off the response path; back to the pool only once fully detached from this transport.
      void server.close().then(() => pool.release(server), () => undefined);
    }
  };
}
