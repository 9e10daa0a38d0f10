/**
 * The `custos` command dispatcher. Each subcommand's module is imported only when used, so light
 * commands (`run`, `ssh-agent`) start without loading the server's dependencies.
 */
import { pathToFileURL } from 'node:url';
import { runGuarded } from './guarded.ts';

type Command = (argv: string[], env: NodeJS.ProcessEnv) => Promise<number>;

const COMMANDS: Record<string, { summary: string; load: () => Promise<Command> }> = {
  serve: { summary: 'run the service (HTTP API, /mcp, SSH and CI endpoints)', load: async () => (await import('./serve.ts')).serveCommand },
  migrate: { summary: 'apply database migrations and exit', load: async () => (await import('./admin.ts')).migrateCommand },
  audit: { summary: 'audit export [--workspace ID] [--output FILE] | audit verify FILE', load: async () => (await import('./audit.ts')).auditCommand },
  admin: { summary: 'admin set-plan <organization id | owner email> <free|pro|team>', load: async () => (await import('./admin.ts')).adminCommand },
  keys: { summary: 'keys rotate-kek | keys rotate-dek <workspace id>', load: async () => (await import('./keys.ts')).keysCommand },
  hsm: { summary: 'hsm init: create a SoftHSM2 development token and KEK', load: async () => (await import('./keys.ts')).hsmCommand },
  db: { summary: 'db readonly-role-sql --role R --database D: SQL for a low-privilege query_db role', load: async () => (await import('./db.ts')).dbCommand },
  'ssh-agent': { summary: 'ssh-agent [-s|-c|-k|-D]: serve your Custos SSH keys to OpenSSH (needs CUSTOS_SSH_TOKEN)', load: async () => (await import('./ssh-agent.ts')).sshAgentCommand },
  run: { summary: 'run [--workspace W] [--only NAME…] [--no-mask] -- CMD…: run CMD with secrets in its environment (needs CUSTOS_CI_TOKEN)', load: async () => (await import('./run.ts')).runCommand },
};

export function usage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  return [
    'Usage: custos <command> [options]',
    '',
    'Custos: a credential vault and broker. Secrets are stored once and used through the broker.',
    '',
    'Commands:',
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
    '',
    'Run `custos <command> --help` for a command\'s options. Configuration: config/default.json,',
    'a JSON file named by CUSTOS_CONFIG, and CUSTOS_* environment variables (`custos serve --help`).',
  ].join('\n');
}

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${usage()}\n`);
    return name ? 0 : 2;
  }
  const cmd = COMMANDS[name];
  if (!cmd) {
    process.stderr.write(`custos: unknown command '${name}'\n\n${usage()}\n`);
    return 2;
  }
  return runGuarded(name, async () => (await cmd.load())(rest, env), env);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.exitCode = await main(process.argv.slice(2), process.env);
}
