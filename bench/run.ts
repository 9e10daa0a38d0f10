/**
 * Wall time of `custos run -- true` (issue 6 target: ≤ 0.3 s), median of 20, against a local
 * stand-in of POST /api/v1/ci/secrets (test/ci/contract-server.ts) holding 4 credentials, next to
 * the baselines: `true` spawned directly, `node` doing nothing, and `node --import tsx` doing nothing.
 *
 * Two `custos run` figures, both through bin/custos.mjs as a CI job runs it: from the cached esbuild
 * bundle (bin/run-bundle.mjs, the default), and through tsx (CUSTOS_CLI_NO_BUNDLE=1, what every run
 * would cost without the bundle).
 *
 *   node --import tsx bench/run.ts [runs]
 */
import { spawn, spawnSync } from 'node:child_process';
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

try {
  console.log(`custos run start-up, ${RUNS} runs each (wall time of the whole process)\n`);
  const trueBin = spawnSync('sh', ['-c', 'command -v true'], { encoding: 'utf8' }).stdout.trim() || '/bin/true';
  await measure('true (spawned directly)', trueBin, [], env);
  await measure('node -e "" (node doing nothing)', process.execPath, ['-e', ''], env);
  await measure('node --import tsx -e "" (tsx doing nothing)', process.execPath, ['--import', 'tsx', '-e', ''], env);
  // What a CI job runs: the `custos` command. The first run (the warm-up) builds the bundle if the
  // sources changed since the last build.
  const viaBundle = await measure('custos run -- true (bin/custos.mjs, bundle)', process.execPath, ['bin/custos.mjs', 'run', '--', 'true'], env);
  await measure('custos run --no-mask -- true (bundle)', process.execPath, ['bin/custos.mjs', 'run', '--no-mask', '--', 'true'], env);
  const noBundle = { ...env, CUSTOS_CLI_NO_BUNDLE: '1' };
  const viaTsx = await measure('custos run -- true (bin/custos.mjs, tsx)', process.execPath, ['bin/custos.mjs', 'run', '--', 'true'], noBundle);

  console.log(`\ntarget ≤ ${TARGET_S * 1000} ms: bundle ${viaBundle <= TARGET_S ? 'met' : 'MISSED'} (${(viaBundle * 1000).toFixed(0)} ms)` +
    `, tsx ${viaTsx <= TARGET_S ? 'met' : 'MISSED'} (${(viaTsx * 1000).toFixed(0)} ms)`);
  console.log(`requests served by the stand-in: ${server.requests.length}`);
} finally {
  await server.close();
}
