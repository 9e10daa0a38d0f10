import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function custos(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/custos.mjs', ...args], { cwd: ROOT, env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/root', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

test('custos --help lists every command; an unknown command exits 2 with the usage', async (t) => {
  const help = await custos(['--help']);
  t.is(help.code, 0);
  for (const c of ['serve', 'migrate', 'audit', 'admin', 'keys', 'hsm', 'db', 'ssh-agent', 'run']) t.regex(help.stdout, new RegExp(`\\n  ${c} `));
  const bad = await custos(['frobnicate']);
  t.is(bad.code, 2);
  t.regex(bad.stderr, /unknown command 'frobnicate'/);
});

test('custos serve --help explains the CUSTOS_* environment overrides', async (t) => {
  const r = await custos(['serve', '--help']);
  t.is(r.code, 0);
  for (const v of ['CUSTOS_HOST', 'CUSTOS_PORT', 'CUSTOS_DATA_DIR', 'CUSTOS_DATABASE_URL', 'CUSTOS_KEY_BACKEND', 'CUSTOS_CONFIG']) t.true(r.stdout.includes(v), v);
});

test('a bad configuration value stops start-up with CUSTOS_ERR_CONFIG naming the key', async (t) => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'custos-cli-'));
  const port = await custos(['serve'], { CUSTOS_DATA_DIR: dataDir, CUSTOS_PORT: 'eighty' });
  t.is(port.code, 1);
  t.regex(port.stderr, /CUSTOS_ERR_CONFIG: Invalid configuration at server\.port/);
  const backend = await custos(['serve'], { CUSTOS_DATA_DIR: dataDir, CUSTOS_KEY_BACKEND: 'rot13' });
  t.is(backend.code, 1);
  t.regex(backend.stderr, /CUSTOS_ERR_CONFIG: Invalid configuration at keys\.backend/);
});

test('the local-dev key backend is refused when NODE_ENV=production', async (t) => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'custos-cli-'));
  const r = await custos(['serve'], { CUSTOS_DATA_DIR: dataDir, CUSTOS_PORT: '0', NODE_ENV: 'production' });
  t.is(r.code, 1);
  t.regex(r.stderr, /CUSTOS_ERR_CONFIG/);
  t.regex(r.stderr, /local-dev/);
});
