/** The Koa application: middleware chain and route families. No business rule lives here. */
import Koa from 'koa';
import { Router } from '@koa/router';
import type { Logger } from '../log.ts';
import type { Services } from '../compose.ts';
import { requireSession, sessionLoader } from './auth.ts';
import { errorRenderer, jsonBody, requestIdAndLog, securityHeaders, type State } from './middleware.ts';
import { authRoutes } from './routes/auth.ts';
import { auditRoutes } from './routes/audit.ts';
import { healthRoutes } from './routes/health.ts';
import { tokenRoutes } from './routes/tokens.ts';
import { workspaceRoutes } from './routes/workspaces.ts';
import { credentialRoutes } from './routes/credentials.ts';
import { machineRoutes } from './routes/machines.ts';

export interface AppOptions {
  log: Logger;
  services: Services;
  bodyLimitBytes: number;
  trustProxy: boolean;
  /** Origins allowed to make cookie-authenticated state changes (and to call /mcp). */
  allowedOrigins: () => Set<string>;
  /** Extra route families (credentials, MCP, SSH, CI) mounted by later modules. */
  extraApiRouters?: Array<Router<State>>;
  extraRootMiddleware?: Array<Koa.Middleware<State>>;
  metrics?: () => Record<string, number>;
}

export function createApp(opts: AppOptions): Koa<State> {
  const app = new Koa<State>({ proxy: opts.trustProxy });
  app.silent = true; // errors are rendered and logged by errorRenderer, not printed by Koa
  const { services } = opts;

  app.use(requestIdAndLog(opts.log));
  app.use(securityHeaders());
  app.use(errorRenderer());
  for (const mw of opts.extraRootMiddleware ?? []) app.use(mw);

  const health = healthRoutes(() => services.ping(), opts.metrics);
  app.use(health.routes());

  const session = requireSession(opts.allowedOrigins);
  const api = new Router<State>({ prefix: '/api/v1' });
  api.use(jsonBody(opts.bodyLimitBytes));
  api.use(sessionLoader(services.accounts));
  for (const r of [
    authRoutes(services.accounts, session),
    workspaceRoutes(services.workspaces, session),
    auditRoutes(services.auditReader, session),
    tokenRoutes(services.tokens, session),
    credentialRoutes(services.credentials, session),
    machineRoutes(services.ssh, services.ci, services.tokens),
    ...(opts.extraApiRouters ?? []),
  ]) {
    api.use(r.routes());
  }
  app.use(api.routes());
  app.use(api.allowedMethods());
  return app;
}
