/**
 * The `custos run` fast path (bin/run-bundle.mjs): bin/custos.mjs runs the command from an esbuild
 * bundle cached in CUSTOS_CLI_CACHE_DIR, rebuilt when a source changes, and falls back to the
 * sources through tsx whenever the bundle cannot be used. Each test has its own cache directory.
 */
import test from 'ava';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { builtinModules } from 'node:module';
import { ciToken, cred, startContractServer } from './contract-server.ts';
import { startCustos } from './run-harness.ts';

interface Manifest { bundle: string; builtAt: string; inputs: Record<string, number> }

const cacheDir = (): string => mkdtempSync(path.join(tmpdir(), 'custos-cli-cache-'));
const manifestOf = (dir: string): Manifest => JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8')) as Manifest;

/** `custos run -- node -e <print VAR>` against a stand-in server holding one bearer credential. */
async function runOnce(dir: string, extraEnv: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const server = await startContractServer();
  try {
    const token = ciToken();
    server.grant(token, { status: 200, credentials: [cred('Bundle check', 'bearer', { value: 'bundle-check-value' })] });
    const started = startCustos(['--no-mask', '--', process.execPath, '-e', 'process.stdout.write(String(process.env.BUNDLE_CHECK?.length))'],
      { CUSTOS_CI_TOKEN: token, CUSTOS_URL: server.url, CUSTOS_CLI_CACHE_DIR: dir, ...extraEnv });
    return await started.result;
  } finally {
    await server.close();
  }
}

test('the first run builds the bundle and the manifest; the command works from it', async (t) => {
  const dir = cacheDir();
  const r = await runOnce(dir);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, String('bundle-check-value'.length), 'the child got the secret in its environment');
  const m = manifestOf(dir);
  t.regex(m.bundle, /^run-[0-9a-f]{16}\.mjs$/);
  t.deepEqual(readdirSync(dir).sort(), ['manifest.json', m.bundle].sort());
  for (const f of ['src/cli/run.ts', 'src/cli/run-entry.ts', 'src/ci/secrets-client.ts']) t.true(f in m.inputs, `${f} is a recorded input`);
  // The bundle needs nothing but Node's built-ins: no package can slow the start-up down.
  const code = readFileSync(path.join(dir, m.bundle), 'utf8');
  const specifiers = [...code.matchAll(/\bfrom\s*["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)/g)].map((x) => x[1] ?? x[2]!);
  t.true(specifiers.length > 0);
  const builtins = new Set(builtinModules);
  for (const s of specifiers) t.true(s.startsWith('node:') || builtins.has(s), `bundle imports ${s}`);
});

test('a fresh bundle is reused; a changed source makes the next run rebuild it', async (t) => {
  const dir = cacheDir();
  t.is((await runOnce(dir)).code, 0);
  const first = manifestOf(dir);
  t.is((await runOnce(dir)).code, 0);
  t.is(manifestOf(dir).builtAt, first.builtAt, 'reused');
  // As if src/cli/run.ts had been edited since the build: its recorded time no longer matches.
  const stale = { ...first, inputs: { ...first.inputs, 'src/cli/run.ts': first.inputs['src/cli/run.ts']! - 1000 } };
  writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(stale));
  const r = await runOnce(dir);
  t.is(r.code, 0, r.stderr);
  const rebuilt = manifestOf(dir);
  t.not(rebuilt.builtAt, first.builtAt, 'rebuilt');
  t.deepEqual(rebuilt.inputs, first.inputs, 'the recorded times are the files\' own again');
});

test('a damaged bundle, a bad manifest or an unwritable cache fall back to the sources: the command still works', async (t) => {
  const dir = cacheDir();
  t.is((await runOnce(dir)).code, 0);
  const m = manifestOf(dir);
  writeFileSync(path.join(dir, m.bundle), 'this is not JavaScript (');
  const damaged = await runOnce(dir);
  t.is(damaged.code, 0, damaged.stderr);
  t.is(damaged.stdout, String('bundle-check-value'.length));

  writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({ bundle: '../../etc/passwd', inputs: m.inputs }));
  const traversal = await runOnce(dir);
  t.is(traversal.code, 0, 'a manifest naming a file outside the cache is ignored (rebuilt)');
  t.regex(manifestOf(dir).bundle, /^run-[0-9a-f]{16}\.mjs$/);

  const file = path.join(cacheDir(), 'not-a-directory');
  writeFileSync(file, '');
  chmodSync(file, 0o400);
  const unwritable = await runOnce(path.join(file, 'cache'));
  t.is(unwritable.code, 0, unwritable.stderr);
  t.is(unwritable.stdout, String('bundle-check-value'.length));
});

test('CUSTOS_CLI_NO_BUNDLE=1 runs the sources through tsx and touches no cache', async (t) => {
  const dir = cacheDir();
  const r = await runOnce(dir, { CUSTOS_CLI_NO_BUNDLE: '1' });
  t.is(r.code, 0, r.stderr);
  t.deepEqual(readdirSync(dir), []);
});

test('errors keep the CLI contract from the bundle: a refused token is one line and exit 2', async (t) => {
  const dir = cacheDir();
  const started = startCustos(['--', 'true'], { CUSTOS_CI_TOKEN: 'not-a-token', CUSTOS_URL: 'http://127.0.0.1:9', CUSTOS_CLI_CACHE_DIR: dir });
  const r = await started.result;
  t.is(r.code, 2);
  t.regex(r.stderr, /^custos run: /);
  t.is(r.stderr.trim().split('\n').length, 1);
  t.true(readdirSync(dir).includes('manifest.json'), 'it ran from the bundle');
});
