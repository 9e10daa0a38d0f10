/**
 * Stand-alone entry for `custos run` (tests and the benchmark spawn it; the `custos` dispatcher in
 * src/cli/main.ts calls runCommand the same way). Sets process.exitCode instead of calling
 * process.exit() so piped stdout/stderr are fully flushed before the process ends.
 */
import { runCommand } from '../cli/run.ts';

process.exitCode = await runCommand(process.argv.slice(2), process.env);
