/**
 * Authentication for the app API. People use a session cookie (HttpOnly, SameSite=Strict, Secure
 * behind TLS) and must echo the session's CSRF token in X-CSRF-Token on state-changing requests;
 * machines use `Authorization: Bearer custos_<type>_…` and each route family accepts one type only.
 */
import type Koa from 'koa';
import { CustosError } from '../errors.ts';
import { csrfMatches, type AccountService } from '../core/accounts.ts';
import type { TokenType } from '../core/token-format.ts';
import type { Principal } from '../core/context.ts';
import type { State } from './middleware.ts';

export const SESSION_COOKIE = 'custos_session';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export interface TokenResolver {
  /** Resolves a bearer token of the given type to its principal; throws CUSTOS_ERR_TOKEN_INVALID. */
  resolve(token: string, type: TokenType, ip: string): Promise<Principal>;
}

/** Loads the session principal if a valid cookie is present (does not require one). */
export function sessionLoader(accounts: AccountService): Koa.Middleware<State> {
  return async function sessionLoader(ctx, next) {
    const token = ctx.cookies.get(SESSION_COOKIE);
    if (token) {
      const s = await accounts.resolveSession(token);
      if (s) {
        ctx.state.principal = s.principal;
        ctx.state.csrfHash = s.csrfHash;
        ctx.state.sessionToken = token;
      }
    }
    await next();
  };
}

/** Requires a session; on unsafe methods also a matching CSRF token and an allowed Origin. */
export function requireSession(allowedOrigins: () => Set<string>): Koa.Middleware<State> {
  return async function requireSession(ctx, next) {
    if (ctx.state.principal?.type !== 'account' || !ctx.state.csrfHash) {
      throw new CustosError('CUSTOS_ERR_UNAUTHENTICATED', 'Sign in first.');
    }
    if (!SAFE_METHODS.has(ctx.method)) {
      const origin = ctx.get('origin');
      if (origin && !allowedOrigins().has(origin)) {
        throw new CustosError('CUSTOS_ERR_ORIGIN_REFUSED', 'Requests from this Origin are not accepted.');
      }
      const csrf = ctx.get('x-csrf-token');
      if (!csrf || !csrfMatches(csrf, ctx.state.csrfHash)) {
        throw new CustosError('CUSTOS_ERR_CSRF', 'Missing or wrong X-CSRF-Token header for this session.');
      }
    }
    await next();
  };
}

export function bearerToken(ctx: Koa.Context): string | null {
  const h = ctx.get('authorization');
  const m = /^Bearer ([^\s]+)$/.exec(h);
  return m ? m[1]! : null;
}

/** Requires a bearer token of exactly this type (agent tokens never open SSH routes, and so on). */
export function requireToken(tokens: TokenResolver, type: TokenType): Koa.Middleware<State> {
  return async function requireToken(ctx, next) {
    const token = bearerToken(ctx);
    if (!token) {
      ctx.set('WWW-Authenticate', `Bearer realm="custos", error="invalid_request"`);
      throw new CustosError('CUSTOS_ERR_UNAUTHENTICATED', `This endpoint needs Authorization: Bearer custos_${type}_….`);
    }
    ctx.state.principal = await tokens.resolve(token, type, ctx.ip);
    await next();
  };
}
