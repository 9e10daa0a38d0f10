/** `custos audit export` (JSON Lines from the database) and `custos audit verify FILE` (offline). */
import { createWriteStream, readFileSync } from 'node:fs';
import { once } from 'node:events';
import { parseArgs } from 'node:util';
import { verifyJsonLines } from '../audit/chain.ts';

const HELP = `Usage:
  custos audit export [--workspace ID] [--output FILE]   write audit entries as JSON Lines (all chains by default)
  custos audit verify FILE                              check the hash chains offline; names the first broken entry
`;

export async function auditCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === 'verify') {
    const file = rest[0];
    if (!file || file === '--help') {
      process.stdout.write(HELP);
      return file ? 0 : 2;
    }
    const result = verifyJsonLines(readFileSync(file, 'utf8'));
    if (result.ok) {
      process.stdout.write(`OK: ${result.entries} entries in ${result.chains} chain(s); every hash and link checks out.\n`);
      return 0;
    }
    const b = result.firstBreak!;
    process.stdout.write(`BROKEN at line ${b.line} (chain ${b.chain}, seq ${b.seq ?? '?'}): ${b.reason}: ${b.message}\n`);
    return 1;
  }
  if (sub === 'export') {
    const { values } = parseArgs({ args: rest, options: { workspace: { type: 'string' }, output: { type: 'string' }, help: { type: 'boolean' } }, strict: true });
    if (values.help) {
      process.stdout.write(HELP);
      return 0;
    }
    const { loadConfig } = await import('../config/loader.ts');
    const { openDatabase } = await import('../storage/data-source.ts');
    const { AuditLog, workspaceChain } = await import('../audit/audit-log.ts');
    const { createLogger } = await import('../log.ts');
    const config = loadConfig(env);
    const db = await openDatabase({ url: config.database.url, dataDir: config.dataDir });
    try {
      const log = new AuditLog(db, createLogger({ level: 'warn' }));
      const out = values.output ? createWriteStream(values.output, { mode: 0o600 }) : process.stdout;
      for await (const line of log.exportJsonLines(values.workspace ? [workspaceChain(values.workspace)] : undefined)) {
        if (!out.write(line)) await once(out, 'drain');
      }
      if (out !== process.stdout) await new Promise<void>((r) => (out as NodeJS.WritableStream).end(r));
      return 0;
    } finally {
      await db.close();
    }
  }
  process.stdout.write(HELP);
  return sub === '--help' ? 0 : 2;
}
