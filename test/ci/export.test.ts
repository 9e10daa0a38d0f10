/**
 * `custos run --format dotenv|json export`: plaintext to a file or stdout, loudly and carefully.
 */
import test from 'ava';
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ciToken, cred, marker, startContractServer, type ContractServer } from './contract-server.ts';
import { runCustos } from './run-harness.ts';

let server: ContractServer;
let dir: string;
test.before(async () => {
  server = await startContractServer();
  dir = mkdtempSync(join(tmpdir(), 'custos-export-test-'));
});
test.after.always(async () => {
  await server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Values that break naive quoting: newlines, both quotes, spaces, $, backticks, backslashes, =. */
function awkwardSecrets() {
  return {
    multiline: `-----BEGIN KEY-----\n${marker('LINE')}\nsecond line\n-----END KEY-----\n`,
    quotes: `it's a "quoted" ${marker('Q')} value with 'single' quotes''`,
    shell: `$HOME \`id\` $(id) \\n \\ back\\slash = ${marker('S')}; echo pwned`,
    spaces: `  leading and trailing spaces ${marker('SP')}  `,
  };
}

/** A token granted the awkward values; `expected` is the environment they must produce. */
function grant(): { env: Record<string, string>; expected: Record<string, string> } {
  const s = awkwardSecrets();
  const token = ciToken();
  server.grant(token, {
    status: 200,
    credentials: [
      cred('multi line', 'bearer', { value: s.multiline }),
      cred('quotes', 'bearer', { value: s.quotes }),
      cred('shellish', 'header', { value: s.shell }),
      cred('spaces db', 'database', { dsn: s.spaces }),
    ],
  });
  return {
    env: { CUSTOS_CI_TOKEN: token, CUSTOS_URL: server.url },
    expected: { MULTI_LINE: s.multiline, QUOTES: s.quotes, SHELLISH: s.shell, SPACES_DB_URL: s.spaces, DATABASE_URL: s.spaces },
  };
}

const sourceAndPrint = (file: string, names: string[]): string =>
  `set -a; . ${JSON.stringify(file)}; set +a; ${JSON.stringify(process.execPath)} -e 'const o={};for(const n of process.argv.slice(1))o[n]=process.env[n];process.stdout.write(JSON.stringify(o))' ${names.join(' ')}`;

test('dotenv export round-trips awkward values through `set -a; . file` in bash and sh, mode 0600, with a warning', async (t) => {
  const { env, expected } = grant();
  const file = join(dir, 'secrets.env');
  const r = await runCustos(['--format', 'dotenv', 'export', '--output', file], env);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, '');
  t.regex(r.stderr, /^custos run: WARNING: writing 5 secret value\(s\) in PLAINTEXT to .*secrets\.env \(mode 0600\)/);
  for (const v of Object.values(expected)) t.false(r.stderr.includes(v), 'no value on stderr');
  t.is(statSync(file).mode & 0o777, 0o600);
  for (const shell of ['bash', 'sh']) {
    const { stdout } = await promisify(execFile)(shell, ['-c', sourceAndPrint(file, Object.keys(expected))], { encoding: 'utf8' });
    t.deepEqual(JSON.parse(stdout), expected, shell);
  }
});

test('dotenv is the default export format', async (t) => {
  const { env, expected } = grant();
  const file = join(dir, 'default.env');
  const r = await runCustos(['export', '-o', file], env);
  t.is(r.code, 0, r.stderr);
  const { stdout } = await promisify(execFile)('bash', ['-c', sourceAndPrint(file, Object.keys(expected))], { encoding: 'utf8' });
  t.deepEqual(JSON.parse(stdout), expected);
});

test('json export to stdout is a flat object of the same variables, with the warning on stderr', async (t) => {
  const { env, expected } = grant();
  const r = await runCustos(['--format', 'json', 'export'], env);
  t.is(r.code, 0, r.stderr);
  t.deepEqual(JSON.parse(r.stdout), expected);
  t.is(r.stderr, 'custos run: WARNING: writing 5 secret value(s) in PLAINTEXT to standard output. Anything that can read it can use them.\n');
});

test('json export to a file is mode 0600', async (t) => {
  const { env, expected } = grant();
  const file = join(dir, 'secrets.json');
  const r = await runCustos(['export', '--format=json', '--output', file], env);
  t.is(r.code, 0, r.stderr);
  t.is(statSync(file).mode & 0o777, 0o600);
  t.deepEqual(JSON.parse(readFileSync(file, 'utf8')), expected);
});

test('export refuses to overwrite an existing file without --force (exit 2, file unchanged)', async (t) => {
  const { env } = grant();
  const file = join(dir, 'existing.env');
  writeFileSync(file, 'KEEP=me\n');
  const r = await runCustos(['export', '--output', file], env);
  t.is(r.code, 2);
  t.regex(r.stderr, /already exists; refusing to overwrite it \(add --force/);
  t.is(readFileSync(file, 'utf8'), 'KEEP=me\n');
});

test('export --force replaces an existing world-readable file with a fresh 0600 one', async (t) => {
  const { env, expected } = grant();
  const file = join(dir, 'replace.json');
  writeFileSync(file, '{}');
  chmodSync(file, 0o644);
  const r = await runCustos(['--format', 'json', 'export', '--output', file, '--force'], env);
  t.is(r.code, 0, r.stderr);
  t.is(statSync(file).mode & 0o777, 0o600);
  t.deepEqual(JSON.parse(readFileSync(file, 'utf8')), expected);
});

test('export does not follow a symlink planted at the output path', async (t) => {
  const { env } = grant();
  const victim = join(dir, 'victim.txt');
  writeFileSync(victim, 'untouched');
  const link = join(dir, 'link.env');
  symlinkSync(victim, link);
  const r = await runCustos(['export', '--output', link], env);
  t.is(r.code, 2);
  t.is(readFileSync(victim, 'utf8'), 'untouched');
});

test('export is refused like run when the token is refused, and writes no file', async (t) => {
  const token = ciToken();
  server.grant(token, { status: 403 });
  const file = join(dir, 'never.env');
  const r = await runCustos(['export', '--output', file], { CUSTOS_CI_TOKEN: token, CUSTOS_URL: server.url });
  t.is(r.code, 3);
  t.false(existsSync(file));
});

test('export with a command is a usage error', async (t) => {
  const { env } = grant();
  const r = await runCustos(['export', '--', 'true'], env);
  t.is(r.code, 2);
  t.regex(r.stderr, /export takes no command/);
});
