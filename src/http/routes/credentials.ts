import { Router } from '@koa/router';
import type Koa from 'koa';
import type { CredentialService } from '../../core/credentials.ts';
import { CATALOG } from '../../kinds/catalog.ts';
import { requestContext, type State } from '../middleware.ts';
import { parseInput } from '../validate.ts';
import { createCredentialBody, id, putSecretBody, updateCredentialBody } from './schemas.ts';

export function credentialRoutes(credentials: CredentialService, requireSession: Koa.Middleware<State>): Router<State> {
  const router = new Router<State>();
  router.get('/catalog', function catalog(ctx) {
    ctx.body = { services: CATALOG };
  });
  router.get('/workspaces/:id/credentials', requireSession, async function listCredentials(ctx) {
    ctx.body = { credentials: await credentials.list(requestContext(ctx), parseInput(id, ctx.params.id, 'workspace id')) };
  });
  router.post('/workspaces/:id/credentials', requireSession, async function createCredential(ctx) {
    const body = parseInput(createCredentialBody, ctx.state.body);
    ctx.status = 201;
    ctx.body = { credential: await credentials.create(requestContext(ctx), parseInput(id, ctx.params.id, 'workspace id'), body) };
  });
  router.post('/workspaces/:id/rotate-dek', requireSession, async function rotateDek(ctx) {
    ctx.body = await credentials.rotateDek(requestContext(ctx), parseInput(id, ctx.params.id, 'workspace id'));
  });
  router.get('/credentials/:id', requireSession, async function getCredential(ctx) {
    ctx.body = { credential: await credentials.get(requestContext(ctx), parseInput(id, ctx.params.id, 'credential id')) };
  });
  router.patch('/credentials/:id', requireSession, async function updateCredential(ctx) {
    const body = parseInput(updateCredentialBody, ctx.state.body);
    ctx.body = { credential: await credentials.update(requestContext(ctx), parseInput(id, ctx.params.id, 'credential id'), body) };
  });
  router.delete('/credentials/:id', requireSession, async function deleteCredential(ctx) {
    await credentials.delete(requestContext(ctx), parseInput(id, ctx.params.id, 'credential id'));
    ctx.status = 204;
  });
  router.put('/credentials/:id/secret', requireSession, async function putSecret(ctx) {
    const body = parseInput(putSecretBody, ctx.state.body);
    ctx.body = { credential: await credentials.putSecret(requestContext(ctx), parseInput(id, ctx.params.id, 'credential id'), body.secret) };
  });
  router.post('/credentials/:id/reveal', requireSession, async function revealCredential(ctx) {
    ctx.body = await credentials.reveal(requestContext(ctx), parseInput(id, ctx.params.id, 'credential id'));
  });
  return router;
}
