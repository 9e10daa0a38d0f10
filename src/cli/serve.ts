/** `custos serve`: start the service; SIGINT/SIGTERM shut down gracefully (actors zero their keys). */
import { loadConfig, ENV_OVERRIDES } from '../config/loader.ts';
import { createLogger } from '../log.ts';
import { createCustos } from '../compose.ts';
import { closeBrokerAgents } from '../broker/index.ts';

export function serveHelp(): string {
  return [
    'Usage: custos serve',
    '',
    'Starts Custos. Defaults (config/default.json): SQLite in ./data, the local-dev key backend,',
    'listening on 127.0.0.1:8080. Environment overrides:',
    '',
    ...ENV_OVERRIDES.map((o) => `  ${o.env.padEnd(28)} ${o.doc}`),
    '  CUSTOS_CONFIG                a JSON file merged over config/default.json',
    '',
    'See docs/configuration.md for every key.',
  ].join('\n');
}

export async function serveCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${serveHelp()}\n`);
    return 0;
  }
  const config = loadConfig(env);
  const log = createLogger({ level: config.log.level });
  const custos = await createCustos(config, { log, env });
  const { url } = await custos.listen();
  log.info({ url, database: custos.db.dialect, keyBackend: custos.backend.id }, 'custos listening');
  process.stdout.write(`Custos is listening on ${url}  (database: ${custos.db.dialect}, keys: ${custos.backend.id})\n`);
  await new Promise<void>((resolve) => {
    const stop = (): void => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  log.info('shutting down: zeroing keys');
  await custos.close();
  await closeBrokerAgents();
  return 0;
}
