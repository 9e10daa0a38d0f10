/**
 * Composition root: builds each module from its factory, in dependency order, and nothing else.
 * storage → audit → key backend → actors → core services → front ends.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import path from 'node:path';
import type Koa from 'koa';
import type { Config, Plans } from './config/schema.ts';
import { loadPlans, publicUrl } from './config/loader.ts';
import { CustosError } from './errors.ts';
import type { Logger } from './log.ts';
import { AuditLog } from './audit/audit-log.ts';
import { openDatabase, type Database } from './storage/data-source.ts';
import { createStore } from './storage/repos.ts';
import { createKeyBackend } from './keys/registry.ts';
import type { CountedKeyBackend } from './keys/stats.ts';
import { ActorSystem } from './actors/actor-system.ts';
import { AccessService } from './core/access.ts';
import { AccountService } from './core/accounts.ts';
import { AuditReader } from './core/audit-reader.ts';
import { PlanService } from './core/plans.ts';
import type { Store } from './core/ports.ts';
import { TokenService } from './core/tokens.ts';
import { WorkspaceService } from './core/workspaces.ts';
import { CredentialService } from './core/credentials.ts';
import { ActorVault } from './actors/vault.ts';
import { ActorUses } from './actors/uses.ts';
import { BrokerService } from './core/broker.ts';
import { QueryService } from './core/query.ts';
import { CiService, SshService } from './core/machines.ts';
import { mcpMiddleware } from './mcp/mount.ts';
import { createApp } from './http/app.ts';
import type { State } from './http/middleware.ts';

export interface Services {
  access: AccessService;
  accounts: AccountService;
  workspaces: WorkspaceService;
  tokens: TokenService;
  auditReader: AuditReader;
  credentials: CredentialService;
  broker: BrokerService;
  query: QueryService;
  ssh: SshService;
  ci: CiService;
  plans: PlanService;
  ping(): Promise<void>;
}

export interface Custos {
  config: Config;
  log: Logger;
  db: Database;
  auditLog: AuditLog;
  store: Store;
  backend: CountedKeyBackend;
  actors: ActorSystem;
  services: Services;
  app: Koa<State>;
  /** Listens on config.server; resolves with the URL people and agents use. */
  listen(): Promise<{ url: string; port: number; server: Server }>;
  close(): Promise<void>;
}

export interface ComposeOptions {
  log: Logger;
  plans?: Plans;
  env?: NodeJS.ProcessEnv;
  /** Run pending migrations at start-up (serve does; `custos migrate` exists for operators). */
  migrate?: boolean;
}

/** The token-hash pepper: from config, a file, or generated once into the data dir (0600). */
export function loadPepper(config: Config, log: Logger): Buffer {
  if (config.auth.tokenPepper) return Buffer.from(config.auth.tokenPepper, 'utf8');
  const file = config.auth.tokenPepperFile ?? path.join(config.dataDir, 'token-pepper');
  if (!existsSync(file)) {
    if (config.auth.tokenPepperFile) throw new CustosError('CUSTOS_ERR_CONFIG', `auth.tokenPepperFile ${file} does not exist.`);
    if (config.database.url) log.warn('no auth.tokenPepperFile set with PostgreSQL: generating a node-local pepper; every node must share one (see docs/configuration.md)');
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    writeFileSync(file, randomBytes(32).toString('base64'), { mode: 0o600, flag: 'wx' });
  }
  const pepper = Buffer.from(readFileSync(file, 'utf8').trim(), 'utf8');
  if (pepper.length < 16) throw new CustosError('CUSTOS_ERR_CONFIG', 'The token pepper must be at least 16 bytes.');
  return pepper;
}

export async function createCustos(config: Config, opts: ComposeOptions): Promise<Custos> {
  const log = opts.log;
  const plans = new PlanService(opts.plans ?? loadPlans());
  const db = await openDatabase({ url: config.database.url, dataDir: config.dataDir });
  try {
    if (opts.migrate !== false) await db.migrate();
    const auditLog = new AuditLog(db, log.child({ module: 'audit' }));
    const store = createStore(db, auditLog);
    const backend = await createKeyBackend(config.keys, { dataDir: config.dataDir, log: log.child({ module: 'keys' }), ...(opts.env ? { env: opts.env } : {}) });
    const actors = new ActorSystem({
      backend, store, log: log.child({ module: 'actors' }), idleSeconds: config.actors.idleSeconds, useConcurrency: config.actors.useConcurrency,
    });
    const access = new AccessService(store);
    const workspaces = new WorkspaceService(store, access, plans, actors);
    const vault = new ActorVault(actors, store);
    const credentials = new CredentialService(store, access, plans, vault);
    const uses = new ActorUses(actors, store, config.broker, config.queryDb);
    let boundPort = config.server.port;
    const appUrl = (): string => publicUrl(config, boundPort);
    const broker = new BrokerService(store, access, credentials, uses, appUrl);
    const services: Services = {
      access,
      accounts: new AccountService(store, workspaces, config.auth),
      workspaces,
      tokens: new TokenService(store, access, loadPepper(config, log)),
      auditReader: new AuditReader(auditLog, access),
      credentials,
      broker,
      query: new QueryService(store, broker, plans, uses),
      ssh: new SshService(store, access, uses),
      ci: new CiService(store, access, vault),
      plans,
      ping: () => db.ping(),
    };
    const origins = (): Set<string> => new Set([new URL(appUrl()).origin, ...config.server.allowedOrigins]);
    const hosts = (): Set<string> => new Set([new URL(appUrl()).host, `127.0.0.1:${boundPort}`, `localhost:${boundPort}`, `[::1]:${boundPort}`]);
    const mcp = mcpMiddleware({
      deps: { broker: services.broker, query: services.query }, tokens: services.tokens, bodyLimitBytes: config.mcp.bodyLimitBytes,
      ratePerMinute: config.mcp.ratePerMinute, allowedHosts: hosts, allowedOrigins: origins,
    });
    const app = createApp({
      log, services, bodyLimitBytes: config.server.bodyLimitBytes, trustProxy: config.server.trustProxy, allowedOrigins: origins,
      extraRootMiddleware: [mcp],
      metrics: () => ({
        key_backend_wraps_total: backend.stats.wraps, key_backend_unwraps_total: backend.stats.unwraps,
        actor_activations_total: actors.stats.activations, actor_passivations_total: actors.stats.passivations, actors_active: actors.stats.active,
      }),
    });
    let server: Server | null = null;
    const custos: Custos = {
      config, log, db, auditLog, store, backend, actors, services, app,
      listen: () => new Promise((resolve, reject) => {
        const s = app.listen(config.server.port, config.server.host);
        s.once('error', reject);
        s.once('listening', () => {
          const addr = s.address();
          boundPort = typeof addr === 'object' && addr ? addr.port : config.server.port;
          server = s;
          resolve({ url: publicUrl(config, boundPort), port: boundPort, server: s });
        });
      }),
      async close() {
        if (server) {
          const s = server;
          server = null;
          s.closeAllConnections?.();
          await new Promise<void>((r) => s.close(() => r()));
        }
        await actors.shutdown();
        await auditLog.flush();
        await backend.close();
        await db.close();
      },
    };
    return custos;
  } catch (err) {
    await db.close();
    throw err;
  }
}
