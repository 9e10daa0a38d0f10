/**
 * The credentials API against the real service (Koa + storage + actors + local-dev key backend), on
 * SQLite and on PostgreSQL: pending → ready, catalog prefill, the five secret kinds' schemas, SSH
 * key derivation checked against OpenSSH's own ssh-keygen, write-only secrets, reveal, secret
 * replacement, the Free plan limit and the permission matrix on every endpoint.
 */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, DB_KINDS, startCustos, type Res, type TestCustos, perDatabase } from '../support/custos.ts';
import { connectAgent } from '../support/mcp.ts';

const env = perDatabase(test, { upstream: true });
const keyDir = mkdtempSync(path.join(tmpdir(), 'custos-cred-keys-'));
test.after.always(async () => {
  rmSync(keyDir, { recursive: true, force: true });
});

type Person = Awaited<ReturnType<typeof Client.signup>>;

/** A key made by the real ssh-keygen; `fingerprint` is what `ssh-keygen -lf` prints for it. */
function sshKey(type: 'ed25519' | 'ecdsa', passphrase = '', comment = 'test@custos'): { privateKey: string; publicKey: string; fingerprint: string } {
  const file = path.join(keyDir, `${type}-${randomBytes(4).toString('hex')}`);
  execFileSync('ssh-keygen', ['-q', '-t', type, '-N', passphrase, '-C', comment, '-f', file]);
  const fp = execFileSync('ssh-keygen', ['-lf', file], { encoding: 'utf8' }).trim().split(/\s+/)[1]!;
  return { privateKey: readFileSync(file, 'utf8'), publicKey: readFileSync(`${file}.pub`, 'utf8').trim(), fingerprint: fp };
}

function marker(tag: string): string {
  return `MARKER-${tag}-${randomBytes(10).toString('hex')}`;
}

async function create(p: Person, body: Record<string, unknown>): Promise<Res> {
  return p.client.post(`/workspaces/${p.workspaceId}/credentials`, body);
}

async function mustCreate(p: Person, body: Record<string, unknown>): Promise<any> {
  const r = await create(p, body);
  if (r.status !== 201) throw new Error(`create failed: ${r.status} ${r.text}`);
  return r.body.credential;
}

function bearer(name: string, value?: string): Record<string, unknown> {
  return { name, service: 'custom', authScheme: 'bearer', baseUrl: `${env.upstream.url}/v1`, ...(value ? { secret: { value } } : {}) };
}

async function agentToken(p: Person, tools = ['list_services', 'call_api']): Promise<string> {
  const r = await p.client.post('/tokens/agent', { name: `agent-${randomBytes(3).toString('hex')}`, tools, methods: ['GET'] });
  if (r.status !== 201) throw new Error(r.text);
  return r.body.token as string;
}

for (const db of DB_KINDS) {
  const inst = (): TestCustos => env.get(db);

  test(`[${db}] with a secret a credential is ready; without one it is pending, refused by call_api, and ready once the secret is supplied`, async (t) => {
    const p = await Client.signup(inst().url);
    const ready = await mustCreate(p, bearer('ready-one', 'tok-ready-0001'));
    t.is(ready.status, 'ready');
    t.is(ready.secretVersion, 1);
    const pending = await mustCreate(p, bearer('pending-one'));
    t.is(pending.status, 'pending');
    t.is(pending.secretVersion, 0);
    const agent = await connectAgent(inst().url, await agentToken(p));
    try {
      const refused = await agent.call('call_api', { service: pending.id, method: 'GET', path: '/x' });
      t.true(refused.isError);
      t.regex(refused.text, /CUSTOS_ERR_NOT_READY/);
      t.is(env.upstream.received.filter((r) => r.headers.authorization === undefined && r.url === '/v1/x').length, 0, 'nothing was sent upstream');
      const put = await p.client.put(`/credentials/${pending.id}/secret`, { secret: { value: 'tok-later-0002' } });
      t.is(put.status, 200);
      t.is(put.body.credential.status, 'ready');
      t.is(put.body.credential.secretVersion, 1);
      const ok = await agent.call('call_api', { service: pending.id, method: 'GET', path: `/after-supply-${db}` });
      t.false(ok.isError, ok.text);
      t.is(env.upstream.received.find((r) => r.url === `/v1/after-supply-${db}`)?.headers.authorization, 'Bearer tok-later-0002');
    } finally {
      await agent.close();
    }
    const audit = (await inst().custos.auditLog.list(`ws:${p.workspaceId}`, { limit: 50 })).map((e) => `${e.action}:${e.outcome}`);
    t.true(audit.includes('credential.secret.supply:success'));
  });

  test(`[${db}] the catalog pre-fills scheme, header and base URL (OpenAI bearer, Anthropic x-api-key)`, async (t) => {
    const p = await Client.signup(inst().url);
    const cat = await p.client.get('/catalog');
    t.is(cat.status, 200);
    t.true(cat.body.services.length >= 16);
    const openai = await mustCreate(p, { name: 'openai', service: 'openai', secret: { value: 'sk-test-0001' } });
    t.is(openai.authScheme, 'bearer');
    t.is(openai.baseUrl, 'https://api.openai.com/v1');
    t.is(openai.config.headerName, 'authorization');
    const anthropic = await mustCreate(p, { name: 'anthropic', service: 'anthropic' });
    t.is(anthropic.authScheme, 'header');
    t.is(anthropic.baseUrl, 'https://api.anthropic.com');
    t.is(anthropic.config.headerName, 'x-api-key');
    t.is(anthropic.status, 'pending');
    const s3 = await mustCreate(p, { name: 's3', service: 'aws-s3' });
    t.is(s3.authScheme, 'sigv4');
    t.like(s3.config, { region: 'us-east-1', service: 's3' });
    const pgc = await mustCreate(p, { name: 'db', service: 'postgresql' });
    t.is(pgc.authScheme, 'database');
    t.is(pgc.baseUrl, null);
    const mismatch = await create(p, { name: 'x', service: 'openai', authScheme: 'header' });
    t.is(mismatch.status, 400);
    t.is(mismatch.body.error.code, 'CUSTOS_ERR_VALIDATION');
    const unknown = await create(p, { name: 'y', service: 'no-such-service' });
    t.is(unknown.body.error.code, 'CUSTOS_ERR_VALIDATION');
  });

  test(`[${db}] each secret kind's schema refuses bad input with CUSTOS_ERR_VALIDATION and changes nothing`, async (t) => {
    const p = await Client.signup(inst().url);
    const dsnMarker = marker('dsnpw');
    const ecdsa = sshKey('ecdsa');
    const cases: Array<{ what: string; body: Record<string, unknown>; secret: Record<string, unknown>; must?: RegExp }> = [
      { what: 'static key empty', body: bearer('static'), secret: { value: '' }, must: /value/ },
      { what: 'static key missing', body: bearer('static2'), secret: {} },
      {
        what: 'sigv4 without secretAccessKey',
        body: { name: 'sig', service: 'custom', authScheme: 'sigv4', baseUrl: `${env.upstream.url}/s3`, config: { region: 'us-east-1', service: 's3' } },
        secret: { accessKeyId: 'AKIAEXAMPLE' }, must: /secretAccessKey/,
      },
      {
        what: 'oauth2 without refreshToken',
        body: { name: 'oa', service: 'custom', authScheme: 'oauth2', baseUrl: `${env.upstream.url}/api`, config: { tokenUrl: `${env.upstream.url}/token` } },
        secret: { clientId: 'cid', clientSecret: 'csecret' }, must: /refreshToken/,
      },
      {
        what: 'database malformed DSN',
        body: { name: 'pg', service: 'postgresql' },
        secret: { dsn: `postgres://reader:${dsnMarker}@db.internal:notaport/app` },
      },
      { what: 'ssh non-ed25519 key', body: { name: 'ssh1', service: 'custom', authScheme: 'ssh' }, secret: { privateKey: ecdsa.privateKey } },
      { what: 'ssh garbage', body: { name: 'ssh2', service: 'custom', authScheme: 'ssh' }, secret: { privateKey: '-----BEGIN OPENSSH PRIVATE KEY-----\nbm90IGEga2V5\n-----END OPENSSH PRIVATE KEY-----\n' } },
      { what: 'ssh not a key at all', body: { name: 'ssh3', service: 'custom', authScheme: 'ssh' }, secret: { privateKey: 'hello' } },
    ];
    const auditBefore = (await inst().custos.auditLog.list(`ws:${p.workspaceId}`, { limit: 500 })).length;
    for (const c of cases) {
      const r = await create(p, { ...c.body, secret: c.secret });
      t.is(r.status, 400, c.what);
      t.is(r.body.error.code, 'CUSTOS_ERR_VALIDATION', c.what);
      if (c.must) t.regex(r.body.error.message, c.must, c.what);
      t.false(r.text.includes(dsnMarker), `${c.what}: the message does not echo the DSN`);
      t.false(r.text.includes('db.internal'), `${c.what}: nor any part of it`);
      // The ssh refusal may name the expected header as a hint; it never quotes the key's body.
      t.false(r.text.includes('bm90IGEga2V5') || r.text.includes('hello') || r.text.includes(ecdsa.privateKey.split('\n')[1]!), `${c.what}: nor the key`);
    }
    t.deepEqual((await p.client.get(`/workspaces/${p.workspaceId}/credentials`)).body.credentials, [], 'nothing was created');
    t.is((await inst().custos.auditLog.list(`ws:${p.workspaceId}`, { limit: 500 })).length, auditBefore, 'nothing was recorded as done');

    // The same refusals through PUT …/secret leave an existing ready credential exactly as it was.
    const good = await mustCreate(p, bearer('good', 'good-value-0001'));
    for (const secret of [{ value: '' }, { value: 'has space' }, { value: 'x', extra: 'y' }, {}]) {
      const r = await p.client.put(`/credentials/${good.id}/secret`, { secret });
      t.is(r.status, 400);
      t.is(r.body.error.code, 'CUSTOS_ERR_VALIDATION');
    }
    const after = await p.client.get(`/credentials/${good.id}`);
    t.is(after.body.credential.secretVersion, 1);
    t.is(after.body.credential.status, 'ready');
    t.deepEqual((await p.client.post(`/credentials/${good.id}/reveal`)).body.secret, { value: 'good-value-0001' });
    const pgRow = await mustCreate(p, { name: 'pg-pending', service: 'postgresql' });
    const badPut = await p.client.put(`/credentials/${pgRow.id}/secret`, { secret: { dsn: `mysql://u:${dsnMarker}@h/d` } });
    t.is(badPut.body.error.code, 'CUSTOS_ERR_VALIDATION');
    t.false(badPut.text.includes(dsnMarker));
    t.is((await p.client.get(`/credentials/${pgRow.id}`)).body.credential.status, 'pending');
    await inst().custos.auditLog.flush();
    t.false(inst().logs.text().includes(dsnMarker), 'the refused DSN is not logged');
  });

  test(`[${db}] an ssh credential derives the public key and the SHA256 fingerprint ssh-keygen prints; passphrases are checked`, async (t) => {
    const p = await Client.signup(inst().url);
    const plain = sshKey('ed25519', '', 'plain@custos');
    const c = await mustCreate(p, { name: 'deploy', service: 'custom', authScheme: 'ssh', secret: { privateKey: plain.privateKey } });
    t.is(c.status, 'ready');
    t.is(c.config.fingerprint, plain.fingerprint);
    t.is(c.config.publicKey.split(' ').slice(0, 2).join(' '), plain.publicKey.split(' ').slice(0, 2).join(' '));
    t.false(JSON.stringify(c).includes('PRIVATE KEY'));

    const pass = `pp-${randomBytes(6).toString('hex')}`;
    const locked = sshKey('ed25519', pass, 'locked@custos');
    const ok = await create(p, { name: 'locked', service: 'custom', authScheme: 'ssh', config: { label: 'ci deploy key' }, secret: { privateKey: locked.privateKey, passphrase: pass } });
    t.is(ok.status, 201, ok.text);
    t.is(ok.body.credential.config.fingerprint, locked.fingerprint);
    t.is(ok.body.credential.config.label, 'ci deploy key');
    t.false(ok.text.includes(pass));
    const wrong = await create(p, { name: 'locked-wrong', service: 'custom', authScheme: 'ssh', secret: { privateKey: locked.privateKey, passphrase: 'not-the-passphrase' } });
    t.is(wrong.status, 400);
    t.is(wrong.body.error.code, 'CUSTOS_ERR_VALIDATION');
    t.regex(wrong.body.error.message, /passphrase/);
    const none = await create(p, { name: 'locked-none', service: 'custom', authScheme: 'ssh', secret: { privateKey: locked.privateKey } });
    t.is(none.body.error.code, 'CUSTOS_ERR_VALIDATION');
    t.deepEqual((await p.client.get(`/workspaces/${p.workspaceId}/credentials`)).body.credentials.map((x: any) => x.name).sort(), ['deploy', 'locked']);
    // Reveal of an SSH key is refused: the private key never leaves the service.
    const rev = await p.client.post(`/credentials/${c.id}/reveal`);
    t.is(rev.status, 403);
    t.is(rev.body.error.code, 'CUSTOS_ERR_FORBIDDEN');
    t.false(rev.text.includes('PRIVATE KEY'));
  });

  test(`[${db}] a database credential shows host, port, database and user, never the password`, async (t) => {
    const p = await Client.signup(inst().url);
    const pw = marker('pgpw');
    const c = await mustCreate(p, { name: 'analytics', service: 'postgresql', secret: { dsn: `postgres://reader:${pw}@db.example.com:6543/analytics` } });
    t.is(c.status, 'ready');
    t.like(c.config, { authScheme: 'database', host: 'db.example.com', port: 6543, database: 'analytics', user: 'reader' });
    for (const r of [await p.client.get(`/credentials/${c.id}`), await p.client.get(`/workspaces/${p.workspaceId}/credentials`)]) {
      t.is(r.status, 200);
      t.false(r.text.includes(pw));
      t.false(r.text.includes('postgres://'));
    }
    const defaultPort = await mustCreate(p, { name: 'other', service: 'postgresql', secret: { dsn: `postgresql://u2:${pw}@10.0.0.5/app2` } });
    t.like(defaultPort.config, { host: '10.0.0.5', port: 5432, database: 'app2', user: 'u2' });
  });

  test(`[${db}] the secret is never in a list, get, create, update or put-secret answer`, async (t) => {
    const p = await Client.signup(inst().url);
    const v1 = marker('v1');
    const v2 = marker('v2');
    const answers: Res[] = [];
    const created = await create(p, { ...bearer('wo'), secret: { value: v1 } });
    answers.push(created);
    const id = created.body.credential.id;
    answers.push(await p.client.get(`/workspaces/${p.workspaceId}/credentials`));
    answers.push(await p.client.get(`/credentials/${id}`));
    answers.push(await p.client.patch(`/credentials/${id}`, { name: 'wo-renamed', envName: 'WO_TOKEN' }));
    answers.push(await p.client.put(`/credentials/${id}/secret`, { secret: { value: v2 } }));
    answers.push(await p.client.get(`/credentials/${id}`));
    for (const r of answers) {
      t.true(r.status >= 200 && r.status < 300, r.text);
      t.false(r.text.includes(v1));
      t.false(r.text.includes(v2));
      t.false(/"secret"\s*:/.test(r.text), 'no secret field at all');
    }
  });

  test(`[${db}] reveal needs reveal (403 without, 404 for strangers), returns the value and is audited`, async (t) => {
    const owner = await Client.signup(inst().url);
    const mate = await Client.signup(inst().url);
    const stranger = await Client.signup(inst().url);
    const value = marker('reveal');
    const c = await mustCreate(owner, bearer('rv', value));
    await owner.client.put(`/workspaces/${owner.workspaceId}/grants/${mate.accountId}`, { permissions: ['read', 'write', 'use'] });
    const denied = await mate.client.post(`/credentials/${c.id}/reveal`);
    t.is(denied.status, 403);
    t.is(denied.body.error.code, 'CUSTOS_ERR_FORBIDDEN');
    const hidden = await stranger.client.post(`/credentials/${c.id}/reveal`);
    const missing = await stranger.client.post(`/credentials/${randomUUID()}/reveal`);
    t.is(hidden.status, 404);
    t.deepEqual(hidden.body, missing.body, 'no existence oracle');
    const ok = await owner.client.post(`/credentials/${c.id}/reveal`);
    t.is(ok.status, 200);
    t.deepEqual(ok.body.secret, { value });
    t.is(ok.body.credential.id, c.id);
    const entries = await inst().custos.auditLog.list(`ws:${owner.workspaceId}`, { limit: 50 });
    const rev = entries.filter((e) => e.action === 'credential.reveal');
    t.truthy(rev.find((e) => e.outcome === 'success' && e.actor.id === owner.accountId && e.target.id === c.id));
    t.truthy(rev.find((e) => e.outcome === 'denied' && e.actor.id === mate.accountId));
    t.false(JSON.stringify(entries).includes(value), 'the audit entry holds no value');
  });

  test(`[${db}] replacing a secret bumps secretVersion and the old value is gone`, async (t) => {
    const p = await Client.signup(inst().url);
    const old = marker('old');
    const next = marker('new');
    const c = await mustCreate(p, bearer('rep', old));
    const before = await inst().custos.store.read.findCredential(c.id);
    const oldCipher = (JSON.parse(before!.secret!) as Record<string, string>).value!;
    const put = await p.client.put(`/credentials/${c.id}/secret`, { secret: { value: next } });
    t.is(put.status, 200);
    t.is(put.body.credential.secretVersion, 2);
    t.deepEqual((await p.client.post(`/credentials/${c.id}/reveal`)).body.secret, { value: next });
    const rows = await inst().custos.db.dataSource.query('SELECT secret FROM credentials');
    t.false(JSON.stringify(rows).includes(oldCipher), 'the old ciphertext is in no credential row');
    const entries = await inst().custos.auditLog.list(`ws:${p.workspaceId}`, { limit: 20 });
    t.truthy(entries.find((e) => e.action === 'credential.secret.replace' && e.details.secretVersion === 2));
  });

  test(`[${db}] Free plan: the 11th credential is refused with CUSTOS_ERR_PLAN_LIMIT`, async (t) => {
    const p = await Client.signup(inst().url);
    for (let i = 1; i <= 10; i += 1) await mustCreate(p, bearer(`c${i}`));
    const eleventh = await create(p, bearer('c11', 'v-0011'));
    t.is(eleventh.status, 403);
    t.is(eleventh.body.error.code, 'CUSTOS_ERR_PLAN_LIMIT');
    t.like(eleventh.body.error.details, { limit: 'credentialsPerWorkspace', max: 10 });
    t.is((await p.client.get(`/workspaces/${p.workspaceId}/credentials`)).body.credentials.length, 10);
    const entries = await inst().custos.auditLog.list(`ws:${p.workspaceId}`, { limit: 5 });
    t.truthy(entries.find((e) => e.action === 'credential.create' && e.outcome === 'denied' && e.details.limit === 'credentialsPerWorkspace'));
  });

  test(`[${db}] permissions on every credential endpoint: read, write, use, reveal, manage, none`, async (t) => {
    const owner = await Client.signup(inst().url);
    const ws = owner.workspaceId;
    const value = marker('perm');
    const c = await mustCreate(owner, bearer('perm', value));
    const missingBody = (await (await Client.signup(inst().url)).client.get(`/credentials/${randomUUID()}`)).body;
    type Op = 'list' | 'get' | 'create' | 'patch' | 'putSecret' | 'delete' | 'reveal' | 'rotateDek';
    const run = async (p: Person, op: Op): Promise<Res> => {
      switch (op) {
        case 'list': return p.client.get(`/workspaces/${ws}/credentials`);
        case 'get': return p.client.get(`/credentials/${c.id}`);
        case 'create': return p.client.post(`/workspaces/${ws}/credentials`, bearer(`new-${randomBytes(3).toString('hex')}`));
        case 'patch': return p.client.patch(`/credentials/${c.id}`, { envName: `E_${randomBytes(3).toString('hex').toUpperCase()}` });
        case 'putSecret': return p.client.put(`/credentials/${c.id}/secret`, { secret: { value } });
        case 'delete': {
          const victim = await mustCreate(owner, bearer(`victim-${randomBytes(3).toString('hex')}`));
          return p.client.del(`/credentials/${victim.id}`);
        }
        case 'reveal': return p.client.post(`/credentials/${c.id}/reveal`);
        case 'rotateDek': return p.client.post(`/workspaces/${ws}/rotate-dek`);
      }
    };
    const ok = (r: Res): boolean => r.status >= 200 && r.status < 300;
    const matrix: Array<{ grant: string[] | null; allowed: Op[] }> = [
      { grant: ['read'], allowed: ['list', 'get'] },
      { grant: ['write'], allowed: ['create', 'patch', 'putSecret', 'delete'] },
      { grant: ['use'], allowed: ['list', 'get'] },
      { grant: ['reveal'], allowed: ['reveal'] },
      { grant: ['manage'], allowed: ['rotateDek'] },
      { grant: null, allowed: [] },
    ];
    const ops: Op[] = ['list', 'get', 'create', 'patch', 'putSecret', 'delete', 'reveal', 'rotateDek'];
    for (const { grant, allowed } of matrix) {
      const mate = await Client.signup(inst().url);
      if (grant) t.is((await owner.client.put(`/workspaces/${ws}/grants/${mate.accountId}`, { permissions: grant })).status, 200);
      const label = grant ? grant.join('+') : 'no grant';
      for (const op of ops) {
        const r = await run(mate, op);
        if (allowed.includes(op)) {
          t.true(ok(r), `${label} may ${op}: ${r.status} ${r.text}`);
        } else if (grant) {
          t.is(r.status, 403, `${label} may not ${op}`);
          t.is(r.body.error.code, 'CUSTOS_ERR_FORBIDDEN', `${label} ${op}`);
        } else {
          t.is(r.status, 404, `no grant: ${op} answers 404`);
          t.is(r.body.error.code, 'CUSTOS_ERR_NOT_FOUND');
          if (op === 'get') t.deepEqual(r.body, missingBody);
        }
        if (op !== 'reveal' || !allowed.includes(op)) t.false(r.text.includes(value), `${label} ${op} leaks nothing`);
      }
      if (grant?.includes('use')) {
        // use alone: call_api through MCP works, and the same token cannot write.
        const agent = await connectAgent(inst().url, await agentToken(mate, ['list_services', 'call_api', 'create_service']));
        try {
          const called = await agent.call('call_api', { service: c.id, method: 'GET', path: `/perm-use-${db}` });
          t.false(called.isError, called.text);
          t.false(called.text.includes(value));
          t.is(env.upstream.received.find((x) => x.url === `/v1/perm-use-${db}`)?.headers.authorization, `Bearer ${value}`);
          const listed = await agent.call('list_services');
          t.true(listed.structured.services.some((s: any) => s.id === c.id));
          const cs = await agent.call('create_service', { name: 'by-agent', workspace: ws, baseUrl: 'https://api.example.com', authScheme: 'bearer' });
          t.true(cs.isError, 'use without write cannot create a service');
        } finally {
          await agent.close();
        }
      }
    }
    // The real credential survived every refused attempt.
    const revealed = await owner.client.post(`/credentials/${c.id}/reveal`);
    t.deepEqual(revealed.body.secret, { value });
  });
}
