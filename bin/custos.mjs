#!/usr/bin/env node
// The `custos` command. Runs the TypeScript sources through tsx (no build step needed), except
// `custos run`, which runs from a cached esbuild bundle when it can (bin/run-bundle.mjs): it sits in
// front of every CI command, and tsx alone takes longer to load than the whole bundled command.
const argv = process.argv.slice(2);
let main;
if (argv[0] === 'run') {
  const { loadRunBundle } = await import('./run-bundle.mjs');
  const run = await loadRunBundle(process.env);
  if (run) main = (args, env) => run(args.slice(1), env);
}
if (!main) {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../src/cli/main.ts'));
}
process.exitCode = await main(argv, process.env);
