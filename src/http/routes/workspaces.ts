import { Router } from '@koa/router';
import type Koa from 'koa';
import type { WorkspaceService } from '../../core/workspaces.ts';
import { requestContext, type State } from '../middleware.ts';
import { parseInput } from '../validate.ts';
import { createWorkspaceBody, id, principalParam, putGrantBody, renameWorkspaceBody } from './schemas.ts';

export function workspaceRoutes(workspaces: WorkspaceService, requireSession: Koa.Middleware<State>): Router<State> {
  const router = new Router<State>();
  router.get('/workspaces', requireSession, async function listWorkspaces(ctx) {
    ctx.body = { workspaces: await workspaces.list(requestContext(ctx)) };
  });
  router.post('/workspaces', requireSession, async function createWorkspace(ctx) {
    const body = parseInput(createWorkspaceBody, ctx.state.body);
    ctx.status = 201;
    ctx.body = { workspace: await workspaces.create(requestContext(ctx), body.name) };
  });
  router.get('/workspaces/:id', requireSession, async function getWorkspace(ctx) {
    ctx.body = { workspace: await workspaces.get(requestContext(ctx), parseInput(id, ctx.params.id, 'workspace id')) };
  });
  router.patch('/workspaces/:id', requireSession, async function renameWorkspace(ctx) {
    const body = parseInput(renameWorkspaceBody, ctx.state.body);
    ctx.body = { workspace: await workspaces.rename(requestContext(ctx), parseInput(id, ctx.params.id, 'workspace id'), body.name) };
  });
  router.delete('/workspaces/:id', requireSession, async function deleteWorkspace(ctx) {
    await workspaces.delete(requestContext(ctx), parseInput(id, ctx.params.id, 'workspace id'));
    ctx.status = 204;
  });
  router.get('/workspaces/:id/grants', requireSession, async function listGrants(ctx) {
    ctx.body = { grants: await workspaces.listGrants(requestContext(ctx), parseInput(id, ctx.params.id, 'workspace id')) };
  });
  router.put('/workspaces/:id/grants/:principal', requireSession, async function putGrant(ctx) {
    const body = parseInput(putGrantBody, ctx.state.body);
    const principal = parseInput(principalParam, decodeURIComponent(ctx.params.principal!), 'principal');
    ctx.body = { grant: await workspaces.putGrant(requestContext(ctx), parseInput(id, ctx.params.id, 'workspace id'), principal, body.permissions) };
  });
  router.delete('/workspaces/:id/grants/:principal', requireSession, async function revokeGrant(ctx) {
    const principal = parseInput(principalParam, decodeURIComponent(ctx.params.principal!), 'principal');
    await workspaces.revokeGrant(requestContext(ctx), parseInput(id, ctx.params.id, 'workspace id'), principal);
    ctx.status = 204;
  });
  return router;
}
