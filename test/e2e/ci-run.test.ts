/**
 * `custos run` end to end: the real CLI (through the `custos` dispatcher) against the real service's
 * /api/v1/ci/secrets, with CI tokens minted through the API.
 */
import test from 'ava';
import { runCustos } from '../support/cli.ts';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, startCustos, type TestCustos } from '../support/custos.ts';

const MARKER = `MARKER-${randomBytes(10).toString('hex')}`;
const AWS_SECRET = `aws${randomBytes(16).toString('hex')}`;
let inst: TestCustos;

test.before(async () => {
  inst = await startCustos('sqlite');
});
test.after.always(async () => {
  await inst?.close();
});

async function workspaceWithSecrets() {
  const person = await Client.signup(inst.url);
  const ws = person.workspaceId;
  const mk = async (body: Record<string, unknown>) => {
    const r = await person.client.post(`/workspaces/${ws}/credentials`, body);
    if (r.status !== 201) throw new Error(r.text);
    return r.body.credential.id as string;
  };
  await mk({ name: 'Stripe prod', service: 'custom', authScheme: 'bearer', baseUrl: 'https://api.stripe.com', secret: { value: MARKER } });
  await mk({ name: 'aws', service: 'custom', authScheme: 'sigv4', baseUrl: 'https://sts.amazonaws.com', config: { region: 'eu-west-1', service: 'sts' },
    secret: { accessKeyId: 'AKIAEXAMPLE1234567', secretAccessKey: AWS_SECRET } });
  await mk({ name: 'later', service: 'custom', authScheme: 'bearer', baseUrl: 'https://api.example.com' });
  const expiresAt = new Date(Date.now() + 3600_000).toISOString();
  const tok = await person.client.post('/tokens/ci', { name: 'ci', workspaceId: ws, expiresAt });
  if (tok.status !== 201) throw new Error(tok.text);
  return { person, ws, token: tok.body.token as string, tokenId: tok.body.id as string };
}

const PRINT_ENV = 'process.stdout.write(JSON.stringify({s: process.env.STRIPE_PROD, k: process.env.AWS_SECRET_ACCESS_KEY, r: process.env.AWS_REGION, t: process.env.CUSTOS_CI_TOKEN ?? null}))';

test('custos run injects the workspace secrets under documented names, masks them in output, and audits each reveal', async (t) => {
  const { person, ws, token } = await workspaceWithSecrets();
  const env = { CUSTOS_URL: inst.url, CUSTOS_CI_TOKEN: token };
  const masked = await runCustos(['run', '--', process.execPath, '-e', PRINT_ENV], env);
  t.is(masked.code, 0, masked.stderr);
  const m = JSON.parse(masked.stdout);
  t.is(m.s, '***', 'the child printed the secret; custos run masked it');
  t.is(m.k, '***');
  t.is(m.r, 'eu-west-1');
  t.is(m.t, null, 'the CI token itself is not passed to the child');
  const raw = await runCustos(['run', '--no-mask', '--', process.execPath, '-e', PRINT_ENV], env);
  t.is(raw.code, 0, raw.stderr);
  t.is(JSON.parse(raw.stdout).s, MARKER, 'the child really had the value');
  t.is(JSON.parse(raw.stdout).k, AWS_SECRET);
  const exit = await runCustos(['run', '--', process.execPath, '-e', 'process.exit(42)'], env);
  t.is(exit.code, 42, 'the child exit code is passed through');
  const audit = await person.client.get(`/workspaces/${ws}/audit?limit=100`);
  const reveals = audit.body.entries.filter((e: any) => e.action === 'ci.reveal' && e.outcome === 'success');
  t.is(reveals.length, 6, 'one audit entry per credential per run (2 credentials × 3 runs)');
  t.deepEqual([...new Set(reveals.map((e: any) => e.target.name))].sort(), ['Stripe prod', 'aws']);
  await inst.custos.auditLog.flush();
  t.false(inst.logs.text().includes(MARKER));
  t.false(JSON.stringify(audit.body).includes(MARKER));
});

test('custos run refuses before running the command without reveal, with a revoked token, or with a bad token', async (t) => {
  const { person, ws, token, tokenId } = await workspaceWithSecrets();
  const dir = mkdtempSync(path.join(tmpdir(), 'custos-ci-'));
  const marker = path.join(dir, 'ran');
  const touch = [process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'x')`];
  const env = { CUSTOS_URL: inst.url, CUSTOS_CI_TOKEN: token };
  // The creator loses reveal: the token loses it on the next call.
  t.is((await person.client.put(`/workspaces/${ws}/grants/${person.accountId}`, { permissions: ['read', 'write', 'use', 'manage'] })).status, 200);
  const noReveal = await runCustos(['run', '--', ...touch], env);
  t.not(noReveal.code, 0);
  t.regex(noReveal.stderr, /reveal|permission|403|refused/i);
  t.false(existsSync(marker));
  t.is((await person.client.put(`/workspaces/${ws}/grants/${person.accountId}`, { permissions: ['read', 'write', 'use', 'reveal', 'manage'] })).status, 200);
  t.is((await runCustos(['run', '--', ...touch], env)).code, 0);
  t.true(existsSync(marker));
  // Revoked: refused at once.
  t.is((await person.client.del(`/tokens/ci/${tokenId}`)).status, 204);
  const revoked = await runCustos(['run', '--', process.execPath, '-e', 'process.exit(0)'], env);
  t.is(revoked.code, 3);
  t.regex(revoked.stderr, /revoked/);
  const garbage = await runCustos(['run', '--', 'true'], { CUSTOS_URL: inst.url, CUSTOS_CI_TOKEN: 'custos_ci_nope' });
  t.not(garbage.code, 0);
  // An agent token is not a CI token.
  const agent = await person.client.post('/tokens/agent', { name: 'a', tools: ['call_api'], methods: ['GET'] });
  const wrongKind = await runCustos(['run', '--', 'true'], { CUSTOS_URL: inst.url, CUSTOS_CI_TOKEN: agent.body.token });
  t.not(wrongKind.code, 0);
});

test('CI tokens can be minted only by a reveal holder', async (t) => {
  const owner = await Client.signup(inst.url);
  const mate = await Client.signup(inst.url);
  await owner.client.put(`/workspaces/${owner.workspaceId}/grants/${mate.accountId}`, { permissions: ['read', 'use'] });
  const r = await mate.client.post('/tokens/ci', { name: 'x', workspaceId: owner.workspaceId, expiresAt: new Date(Date.now() + 60_000).toISOString() });
  t.is(r.status, 403);
  t.is(r.body.error.code, 'CUSTOS_ERR_FORBIDDEN');
  const stranger = await Client.signup(inst.url);
  const s = await stranger.client.post('/tokens/ci', { name: 'x', workspaceId: owner.workspaceId, expiresAt: new Date(Date.now() + 60_000).toISOString() });
  t.is(s.status, 404);
});
