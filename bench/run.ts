/**
 * Wall time of `custos run -- true` (issue 6 target: ≤ 0.3 s), median of 20, against a local
 * stand-in of POST /api/v1/ci/secrets (test/ci/contract-server.ts) holding 4 credentials, next to
 * the baselines: `true` spawned directly, `node` doing nothing, and `node --import tsx` doing nothing.
 *
 * Two `custos run` figures: through tsx (what `npm run custos` and the tests do: TypeScript compiled
 * on the fly), and as compiled JavaScript (what `npm run build` → dist/ ships), built here with tsc
 * into a temporary directory.
 *
 *   node --import tsx bench/run.ts [runs]
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ciToken, cred, startContractServer } from '../test/ci/contract-server.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const RUNS = Number(process.argv[2] ?? 20);
const TARGET_S = 0.3;

function once(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const child = spawn(cmd, args, { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${err}`));
      resolve(Number(process.hrtime.bigint() - t0) / 1e9);
    });
  });
}

async function measure(label: string, cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  await once(cmd, args, env); // warm the page cache
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) times.push(await once(cmd, args, env));
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)]!;
  console.log(`${label.padEnd(46)} median ${(median * 1000).toFixed(1).padStart(7)} ms   min ${(times[0]! * 1000).toFixed(1).padStart(7)} ms   max ${(times[times.length - 1]! * 1000).toFixed(1).padStart(7)} ms`);
  return median;
}

const server = await startContractServer();
const token = ciToken();
server.grant(token, {
  status: 200,
  credentials: [
    cred('Stripe prod', 'bearer', { value: 'sk_live_bench_0123456789' }),
    cred('aws deploy', 'sigv4', { accessKeyId: 'AKIABENCH0000', secretAccessKey: 'bench/secret/key/0123456789' }, { config: { region: 'eu-west-1' } }),
    cred('main db', 'database', { dsn: 'postgres://app:benchpw@db/app' }),
    cred('google', 'oauth2', { clientId: 'bench-client', clientSecret: 'bench-client-secret', refreshToken: 'bench-refresh' }),
  ],
});
const env: NodeJS.ProcessEnv = { ...process.env, CUSTOS_CI_TOKEN: token, CUSTOS_URL: server.url };

const build = mkdtempSync(join(tmpdir(), 'custos-run-bench-'));
try {
  const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '--ignoreConfig', '--outDir', build, '--rootDir', ROOT,
    '--module', 'nodenext', '--target', 'es2022', '--types', 'node', '--skipLibCheck', '--allowImportingTsExtensions',
    '--rewriteRelativeImportExtensions', '--verbatimModuleSyntax', join(ROOT, 'src/ci/run-main.ts')], { encoding: 'utf8' });
  const compiled = tsc.status === 0 ? join(build, 'src/ci/run-main.js') : undefined;
  if (!compiled) console.log(`(tsc build failed, compiled figure skipped: ${tsc.stdout}${tsc.stderr})`);

  console.log(`custos run start-up, ${RUNS} runs each (wall time of the whole process)\n`);
  const trueBin = spawnSync('sh', ['-c', 'command -v true'], { encoding: 'utf8' }).stdout.trim() || '/bin/true';
  await measure('true (spawned directly)', trueBin, [], env);
  await measure('node -e "" (node doing nothing)', process.execPath, ['-e', ''], env);
  await measure('node --import tsx -e "" (tsx doing nothing)', process.execPath, ['--import', 'tsx', '-e', ''], env);
  const viaTsx = await measure('custos run -- true (via tsx)', process.execPath, ['--import', 'tsx', 'src/ci/run-main.ts', '--', 'true'], env);
  // What a CI job runs: the `custos` command (bin/custos.mjs registers tsx, then the dispatcher
  // loads only run.ts).
  const viaBin = await measure('custos run -- true (bin/custos.mjs, as installed)', process.execPath, ['bin/custos.mjs', 'run', '--', 'true'], env);
  let viaJs: number | undefined;
  if (compiled) viaJs = await measure('custos run -- true (compiled JS)', process.execPath, [compiled, '--', 'true'], env);
  await measure('custos run --no-mask -- true (via tsx)', process.execPath, ['--import', 'tsx', 'src/ci/run-main.ts', '--no-mask', '--', 'true'], env);

  console.log(`\ntarget ≤ ${TARGET_S * 1000} ms: via tsx ${viaTsx <= TARGET_S ? 'met' : 'MISSED'} (${(viaTsx * 1000).toFixed(0)} ms)` +
    `, bin/custos.mjs ${viaBin <= TARGET_S ? 'met' : 'MISSED'} (${(viaBin * 1000).toFixed(0)} ms)` +
    (viaJs !== undefined ? `, compiled JS ${viaJs <= TARGET_S ? 'met' : 'MISSED'} (${(viaJs * 1000).toFixed(0)} ms)` : ''));
  console.log(`requests served by the stand-in: ${server.requests.length}`);
} finally {
  rmSync(build, { recursive: true, force: true });
  await server.close();
}
