import test from 'ava';
import { PassThrough } from 'node:stream';
import { parseRunArgs, runCommand } from '../../src/cli/run.ts';
import { CiRunError } from '../../src/ci/exit-codes.ts';
import { readCiToken, secretsUrl } from '../../src/ci/secrets-client.ts';
import { ciToken, cred, marker, startContractServer } from './contract-server.ts';

test('parseRunArgs reads options before -- and keeps the command verbatim after it', (t) => {
  const a = parseRunArgs(['--workspace', 'ws', '--only', 'a b', '--only=c', '--no-mask', '--aws-default', 'aws', '--', 'sh', '-c', 'echo --only $X', '--']);
  t.is(a.mode, 'run');
  t.is(a.workspace, 'ws');
  t.deepEqual(a.only, ['a b', 'c']);
  t.false(a.mask);
  t.is(a.awsDefault, 'aws');
  t.deepEqual(a.command, ['sh', '-c', 'echo --only $X', '--']);
});

test('parseRunArgs: export mode with format, output and force; dotenv by default', (t) => {
  t.like(parseRunArgs(['--format', 'json', 'export', '-o', 'f', '--force']), { mode: 'export', format: 'json', output: 'f', force: true });
  t.like(parseRunArgs(['export']), { mode: 'export', format: 'dotenv', output: undefined });
  t.throws(() => parseRunArgs(['--format', 'yaml', 'export']), { instanceOf: CiRunError, message: /dotenv or json/ });
});

test('readCiToken trims whitespace and refuses other shapes without echoing them', (t) => {
  const token = ciToken();
  t.is(readCiToken(`  ${token}\n`), token);
  const secretish = `not-a-token-${marker()}`;
  const err = t.throws(() => readCiToken(secretish), { instanceOf: CiRunError });
  t.is(err.exitCode, 2);
  t.false(err.message.includes(secretish));
});

test('secretsUrl keeps a path prefix, drops query and credentials, and allows plain http only to loopback', (t) => {
  t.is(secretsUrl('https://vault.example.com/custos/', false).href, 'https://vault.example.com/custos/api/v1/ci/secrets');
  t.is(secretsUrl('https://u:p@vault.example.com?x=1#y', false).href, 'https://vault.example.com/api/v1/ci/secrets');
  t.is(secretsUrl('http://localhost:8080', false).href, 'http://localhost:8080/api/v1/ci/secrets');
  t.is(secretsUrl('http://[::1]:8080', false).href, 'http://[::1]:8080/api/v1/ci/secrets');
  t.throws(() => secretsUrl('http://10.0.0.5:8080', false), { message: /plain http/ });
  t.is(secretsUrl('http://10.0.0.5:8080', true).href, 'http://10.0.0.5:8080/api/v1/ci/secrets');
  t.throws(() => secretsUrl('ftp://x', false), { message: /https/ });
});

test('runCommand writes the child\'s masked output to the io streams it is given', async (t) => {
  const server = await startContractServer();
  try {
    const secret = marker('IO');
    const token = ciToken();
    server.grant(token, { status: 200, credentials: [cred('tok', 'bearer', { value: secret })] });
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const out: Buffer[] = [];
    stdout.on('data', (c: Buffer) => out.push(c));
    stderr.resume();
    const code = await runCommand(['--', process.execPath, '-e', 'process.stdout.write("v=" + process.env.TOK)'], { ...process.env, CUSTOS_CI_TOKEN: token, CUSTOS_URL: server.url }, { stdout, stderr });
    t.is(code, 0);
    t.is(Buffer.concat(out).toString(), 'v=***');
  } finally {
    await server.close();
  }
});

test('src/cli/run.ts imports only node: builtins and small local files (start-up budget: no zod, pino, typeorm)', async (t) => {
  const { readFileSync } = await import('node:fs');
  const { dirname, resolve, relative } = await import('node:path');
  const { fileURLToPath } = await import('node:url');
  const root = fileURLToPath(new URL('../../', import.meta.url));
  const seen = new Set<string>();
  const external: string[] = [];
  const visit = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const src = readFileSync(file, 'utf8');
    // Runtime imports only: `import type` is erased and costs nothing at start-up.
    for (const m of src.matchAll(/^import\s+(?!type\s)[^'"]*?from\s+'([^']+)'|^import\s+'([^']+)'/gm)) {
      const spec = (m[1] ?? m[2])!;
      if (spec.startsWith('node:')) continue;
      if (spec.startsWith('.')) visit(resolve(dirname(file), spec));
      else external.push(`${relative(root, file)} → ${spec}`);
    }
  };
  visit(resolve(root, 'src/cli/run.ts'));
  t.deepEqual(external, []);
  t.deepEqual([...seen].map((f) => relative(root, f)).filter((f) => !f.startsWith('src/ci/') && f !== 'src/cli/run.ts' && f !== 'src/errors.ts'), []);
});
