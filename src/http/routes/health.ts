import { Router } from '@koa/router';
import type { State } from '../middleware.ts';

export function healthRoutes(ping: () => Promise<void>): Router<State> {
  const router = new Router<State>();
  router.get('/healthz', function healthz(ctx) {
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async function readyz(ctx) {
    try {
      await ping();
      ctx.body = { status: 'ready' };
    } catch {
      ctx.status = 503;
      ctx.body = { error: { code: 'CUSTOS_ERR_UNAVAILABLE', message: 'The database is not reachable.' } };
    }
  });
  return router;
}
