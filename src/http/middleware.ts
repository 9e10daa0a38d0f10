/**
 * Koa middleware, each a named function so stack traces read like the request's path through them.
 */
import { randomUUID } from 'node:crypto';
import type Koa from 'koa';
import { CustosError, toCustosError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { RequestContext, Principal } from '../core/context.ts';

export interface State {
  requestId: string;
  log: Logger;
  principal?: Principal;
  /** Set when the principal came from a session cookie (CSRF applies). */
  csrfHash?: string;
  sessionToken?: string;
  body?: unknown;
}
export type Ctx = Koa.ParameterizedContext<State>;

export function requestContext(ctx: Ctx): RequestContext {
  if (!ctx.state.principal) throw new CustosError('CUSTOS_ERR_UNAUTHENTICATED', 'Sign in first.');
  return { principal: ctx.state.principal, ip: ctx.ip, requestId: ctx.state.requestId };
}

export function requestIdAndLog(root: Logger): Koa.Middleware<State> {
  return async function requestIdAndLog(ctx, next) {
    const incoming = ctx.get('x-request-id');
    ctx.state.requestId = /^[A-Za-z0-9._-]{1,64}$/.test(incoming) ? incoming : randomUUID();
    ctx.set('X-Request-Id', ctx.state.requestId);
    ctx.state.log = root.child({ requestId: ctx.state.requestId });
    const started = performance.now();
    try {
      await next();
    } finally {
      // Path only, never the query string: query values may carry things that belong to upstreams.
      ctx.state.log.info({ method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(performance.now() - started) }, 'request');
    }
  };
}

/** The one error renderer: {"error": {"code", "message", "details"?}}; unknown errors say nothing. */
export function errorRenderer(): Koa.Middleware<State> {
  return async function errorRenderer(ctx, next) {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined && ctx.respond !== false) {
        throw new CustosError('CUSTOS_ERR_NOT_FOUND', 'No such endpoint.');
      }
    } catch (err) {
      const e = toCustosError(err);
      if (e.code === 'CUSTOS_ERR_INTERNAL') ctx.state.log?.error({ err }, 'unhandled error');
      if (ctx.respond === false) return; // a raw handler (MCP) already owns the response
      ctx.status = e.status;
      ctx.body = e.toJSON();
      if (e.status === 401 && !ctx.response.get('WWW-Authenticate')) ctx.set('WWW-Authenticate', 'Bearer realm="custos"');
    }
  };
}

export function securityHeaders(): Koa.Middleware<State> {
  return async function securityHeaders(ctx, next) {
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('Cache-Control', 'no-store');
    ctx.set('Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'");
    await next();
  };
}

/** Reads a JSON body with a size cap. Wrong media type, oversize and malformed JSON are 4xx. */
export async function readJsonBody(ctx: Ctx, limit: number): Promise<unknown> {
  const length = ctx.request.length;
  const hasBody = (length !== undefined && length > 0) || ctx.get('transfer-encoding') !== '';
  if (!hasBody) return undefined;
  if (!ctx.is('application/json')) {
    throw new CustosError('CUSTOS_ERR_UNSUPPORTED_MEDIA_TYPE', 'Request bodies must be application/json.');
  }
  if (length !== undefined && length > limit) {
    throw new CustosError('CUSTOS_ERR_BODY_TOO_LARGE', `Request body is larger than ${limit} bytes.`);
  }
  // Event listeners rather than `for await`: the async iterator costs more than the read itself
  // on small bodies, and every MCP call goes through here.
  const chunks = await new Promise<Buffer[]>((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    const req = ctx.req;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        for (const c of parts) c.fill(0);
        req.destroy();
        reject(new CustosError('CUSTOS_ERR_BODY_TOO_LARGE', `Request body is larger than ${limit} bytes.`));
        return;
      }
      parts.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(parts);
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(err);
    };
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
  const raw = Buffer.concat(chunks);
  try {
    return raw.length === 0 ? undefined : (JSON.parse(raw.toString('utf8')) as unknown);
  } catch {
    throw new CustosError('CUSTOS_ERR_MALFORMED_JSON', 'Request body is not valid JSON.');
  } finally {
    // The body may hold a secret being saved; drop our copy of the bytes.
    raw.fill(0);
    for (const c of chunks) c.fill(0);
  }
}

export function jsonBody(limit: number): Koa.Middleware<State> {
  return async function jsonBody(ctx, next) {
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD' && ctx.method !== 'OPTIONS') {
      ctx.state.body = await readJsonBody(ctx, limit);
    }
    await next();
  };
}
