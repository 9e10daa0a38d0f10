/**
 * Runs every benchmark in turn, each in its own process (so one's load does not skew another's),
 * and prints their figures. `npm run bench`. Needs what the tests need (PostgreSQL, SoftHSM2,
 * OpenSSH); nginx-light for the nginx row of bench/mcp.ts.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const BENCHES = ['keys.ts', 'actors.ts', 'mcp.ts', 'mcp-layers.ts', 'query-db-core.ts', 'query-db.ts', 'ssh.ts', 'run.ts'];
let failed = 0;
for (const b of BENCHES) {
  console.log(`\n=== bench/${b} ===`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', `bench/${b}`], { cwd: ROOT, stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exitCode = failed ? 1 : 0;
