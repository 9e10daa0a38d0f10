import { Router } from '@koa/router';
import type Koa from 'koa';
import type { TokenService } from '../../core/tokens.ts';
import type { TokenType } from '../../core/token-format.ts';
import { CustosError } from '../../errors.ts';
import { requestContext, type State } from '../middleware.ts';
import { parseInput } from '../validate.ts';
import { agentTokenBody, ciTokenBody, id, sshTokenBody } from './schemas.ts';

function tokenType(raw: string | undefined): TokenType {
  if (raw === 'agent' || raw === 'ssh' || raw === 'ci') return raw;
  throw new CustosError('CUSTOS_ERR_NOT_FOUND', 'No such token type (agent, ssh, ci).');
}

export function tokenRoutes(tokens: TokenService, requireSession: Koa.Middleware<State>): Router<State> {
  const router = new Router<State>();
  router.get('/tokens/:type', requireSession, async function listTokens(ctx) {
    ctx.body = { tokens: await tokens.list(requestContext(ctx), tokenType(ctx.params.type)) };
  });
  router.post('/tokens/:type', requireSession, async function createToken(ctx) {
    const c = requestContext(ctx);
    const type = tokenType(ctx.params.type);
    const created = type === 'agent'
      ? await tokens.createAgent(c, parseInput(agentTokenBody, ctx.state.body))
      : type === 'ssh'
        ? await tokens.createSsh(c, parseInput(sshTokenBody, ctx.state.body))
        : await tokens.createCi(c, parseInput(ciTokenBody, ctx.state.body));
    ctx.status = 201;
    // The only time the token value is ever shown.
    ctx.body = { token: created.token, ...created.view };
  });
  router.delete('/tokens/:type/:id', requireSession, async function revokeToken(ctx) {
    await tokens.revoke(requestContext(ctx), tokenType(ctx.params.type), parseInput(id, ctx.params.id, 'token id'));
    ctx.status = 204;
  });
  return router;
}
