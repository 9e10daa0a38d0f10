import { Router } from '@koa/router';
import type { State } from '../middleware.ts';

/** Counters only (never labels carrying names or values): key-backend calls, actor lifecycle. */
export type MetricsSource = () => Record<string, number>;

export function healthRoutes(ping: () => Promise<void>, metrics?: MetricsSource): Router<State> {
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
  if (metrics) {
    router.get('/metrics', function metricsRoute(ctx) {
      ctx.type = 'text/plain; version=0.0.4';
      ctx.body = Object.entries(metrics()).map(([k, v]) => `custos_${k} ${v}`).join('\n') + '\n';
    });
  }
  return router;
}
