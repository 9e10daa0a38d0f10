import test from 'ava';
import { runCustos } from '../support/cli.ts';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';


test('custos --help lists every command; an unknown command exits 2 with the usage', async (t) => {
  const help = await runCustos(['--help']);
  t.is(help.code, 0);
  for (const c of ['serve', 'migrate', 'audit', 'admin', 'keys', 'hsm', 'db', 'ssh-agent', 'run']) t.regex(help.stdout, new RegExp(`\\n  ${c} `));
  const bad = await runCustos(['frobnicate']);
  t.is(bad.code, 2);
  t.regex(bad.stderr, /unknown command 'frobnicate'/);
});

test('custos serve --help explains the CUSTOS_* environment overrides', async (t) => {
  const r = await runCustos(['serve', '--help']);
  t.is(r.code, 0);
  for (const v of ['CUSTOS_HOST', 'CUSTOS_PORT', 'CUSTOS_DATA_DIR', 'CUSTOS_DATABASE_URL', 'CUSTOS_KEY_BACKEND', 'CUSTOS_CONFIG']) t.true(r.stdout.includes(v), v);
});

test('a bad configuration value stops start-up with CUSTOS_ERR_CONFIG naming the key', async (t) => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'custos-cli-'));
  const port = await runCustos(['serve'], { CUSTOS_DATA_DIR: dataDir, CUSTOS_PORT: 'eighty' });
  t.is(port.code, 1);
  t.regex(port.stderr, /CUSTOS_ERR_CONFIG: Invalid configuration at server\.port/);
  const backend = await runCustos(['serve'], { CUSTOS_DATA_DIR: dataDir, CUSTOS_KEY_BACKEND: 'rot13' });
  t.is(backend.code, 1);
  t.regex(backend.stderr, /CUSTOS_ERR_CONFIG: Invalid configuration at keys\.backend/);
});

test('the local-dev key backend is refused when NODE_ENV=production', async (t) => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'custos-cli-'));
  const r = await runCustos(['serve'], { CUSTOS_DATA_DIR: dataDir, CUSTOS_PORT: '0', NODE_ENV: 'production' });
  t.is(r.code, 1);
  t.regex(r.stderr, /CUSTOS_ERR_CONFIG/);
  t.regex(r.stderr, /local-dev/);
});
