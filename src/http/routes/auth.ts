import { Router } from '@koa/router';
import type { AccountService, SessionGrant } from '../../core/accounts.ts';
import { SESSION_COOKIE } from '../auth.ts';
import { requestContext, type Ctx, type State } from '../middleware.ts';
import { parseInput } from '../validate.ts';
import { loginBody, signupBody } from './schemas.ts';
import type Koa from 'koa';

function setSessionCookie(ctx: Ctx, s: SessionGrant): void {
  ctx.cookies.set(SESSION_COOKIE, s.sessionToken, {
    httpOnly: true, sameSite: 'strict', secure: ctx.secure, path: '/', expires: new Date(s.expiresAt), overwrite: true,
  });
}

export function authRoutes(accounts: AccountService, requireSession: Koa.Middleware<State>): Router<State> {
  const router = new Router<State>();
  router.post('/auth/signup', async function signup(ctx) {
    const body = parseInput(signupBody, ctx.state.body);
    const anon = { principal: { type: 'system' as const }, ip: ctx.ip, requestId: ctx.state.requestId };
    const r = await accounts.signup(anon, body.email, body.password);
    setSessionCookie(ctx, r.session);
    ctx.status = 201;
    ctx.body = { account: r.account, organization: r.organization, workspace: r.workspace, csrfToken: r.session.csrfToken };
  });
  router.post('/auth/login', async function login(ctx) {
    const body = parseInput(loginBody, ctx.state.body);
    const anon = { principal: { type: 'system' as const }, ip: ctx.ip, requestId: ctx.state.requestId };
    const r = await accounts.login(anon, body.email, body.password);
    setSessionCookie(ctx, r.session);
    ctx.body = { account: r.account, csrfToken: r.session.csrfToken };
  });
  router.post('/auth/logout', requireSession, async function logout(ctx) {
    await accounts.logout(requestContext(ctx), ctx.state.sessionToken!);
    ctx.cookies.set(SESSION_COOKIE, '', { httpOnly: true, sameSite: 'strict', secure: ctx.secure, path: '/', expires: new Date(0) });
    ctx.status = 204;
  });
  router.get('/me', requireSession, async function me(ctx) {
    ctx.body = await accounts.me(requestContext(ctx));
  });
  return router;
}
