/**
 * Entry point of the `custos run` bundle that bin/custos.mjs builds with esbuild and runs without
 * tsx (bin/run-bundle.mjs): the run command behind the CLI's error contract, nothing else. Its
 * import graph must stay node: builtins and src/ci (test/ci/run-bundle.test.ts checks the bundle).
 */
import { runGuarded } from './guarded.ts';
import { runCommand } from './run.ts';

export function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return runGuarded('run', () => runCommand(argv, env), env);
}
