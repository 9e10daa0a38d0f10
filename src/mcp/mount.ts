/**
 * /mcp on Koa. Before the SDK sees a request: Host and Origin are validated (DNS-rebinding defence;
 * the SDK's own options are deprecated), only `Authorization: Bearer custos_agent_…` is accepted,
 * the body is capped, and each token is rate-limited. Then the request goes to the process's one
 * McpServer through a stateless JSON transport (transport.ts), with the principal attached as
 * authInfo (tools read it as extra.authInfo).
 */
import type Koa from 'koa';
import { CustosError } from '../errors.ts';
import { bearerToken, type TokenResolver } from '../http/auth.ts';
import { readJsonBody, type State } from '../http/middleware.ts';
import type { RequestContext } from '../core/context.ts';
import type { ToolDeps } from './context.ts';
import { StatelessJsonTransport } from './transport.ts';
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

export function mcpMiddleware(opts: McpMountOptions): Koa.Middleware<State> {
  const limiter = new RateLimiter(opts.ratePerMinute);
  // One server and one transport for the whole process: the transport keeps concurrent requests
  // apart (transport.ts), and nothing about a caller lives on the server.
  const transport = new StatelessJsonTransport({
    staticMethods: ['tools/list'],
    // An agent sees only the tools its token may call (authInfo.scopes is the token's tool scope).
    shapeResult: (method, result, authInfo) => (method === 'tools/list' && Array.isArray(result.tools)
      ? { ...result, tools: (result.tools as Array<{ name: string }>).filter((tool) => authInfo.scopes.includes(tool.name)) }
      : result),
  });
  const connected = buildMcpServer(opts.deps).connect(transport);
  connected.catch(() => undefined); // awaited per request (a failure there is a 500), never unhandled
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
    await connected;
    // The principal is handed to the tools as authInfo; the token itself never goes further.
    const res = await transport.handle({
      accept: ctx.get('accept') || undefined,
      contentType: ctx.get('content-type') || undefined,
      protocolVersion: ctx.get('mcp-protocol-version') || undefined,
      body,
      authInfo: { token: '[redacted]', clientId: principal.tokenId, scopes: principal.scopes.tools, extra: { custos } },
    });
    if (res.body === undefined) {
      ctx.body = null;
      ctx.status = res.status; // after the body: a null body would otherwise turn it into 204
    } else {
      ctx.status = res.status;
      ctx.type = 'application/json';
      ctx.body = res.body;
    }
  };
}
