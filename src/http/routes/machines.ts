/** Routes for machine callers: the SSH agent (custos_ssh_…) and CI (custos_ci_…). */
import { Router } from '@koa/router';
import type { CiService, SshService } from '../../core/machines.ts';
import { requireToken, type TokenResolver } from '../auth.ts';
import { requestContext, type State } from '../middleware.ts';
import { parseInput } from '../validate.ts';
import { ciSecretsBody, sshIdentitiesBody, sshSignBody } from './schemas.ts';

export function machineRoutes(ssh: SshService, ci: CiService, tokens: TokenResolver): Router<State> {
  const router = new Router<State>();
  const sshAuth = requireToken(tokens, 'ssh');
  router.post('/ssh/identities', sshAuth, async function sshIdentities(ctx) {
    parseInput(sshIdentitiesBody, ctx.state.body ?? {});
    ctx.body = { identities: await ssh.identities(requestContext(ctx)) };
  });
  router.post('/ssh/sign', sshAuth, async function sshSign(ctx) {
    const body = parseInput(sshSignBody, ctx.state.body);
    const signature = await ssh.sign(requestContext(ctx), Buffer.from(body.keyBlob, 'base64'), Buffer.from(body.data, 'base64'), body.flags);
    ctx.body = { signature: signature.toString('base64') };
  });
  router.post('/ci/secrets', requireToken(tokens, 'ci'), async function ciSecrets(ctx) {
    const body = parseInput(ciSecretsBody, ctx.state.body ?? {});
    ctx.body = await ci.secrets(requestContext(ctx), body);
  });
  return router;
}
