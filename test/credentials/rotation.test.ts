/**
 * Key rotation and crypto-shredding through the real service, on SQLite and PostgreSQL:
 *  - POST /workspaces/:id/rotate-dek (manage only) re-encrypts every secret under a new DEK;
 *  - a rotation made by ANOTHER Custos instance on the same database (another node, or the
 *    `custos keys rotate-dek` CLI) is picked up by a running instance whose actor still holds the
 *    old DEK (StaleKeyError → re-activation), for uses and for secret writes;
 *  - `custos keys rotate-kek` re-wraps every workspace DEK under kek-v2 with no downtime;
 *  - deleting a workspace destroys its wrapped DEK: ciphertext copied out before cannot be opened.
 * Serial: the CLI output capture and the key-backend call counters are per process.
 */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { keysCommand } from '../../src/cli/keys.ts';
import { createCustos, type Custos } from '../../src/compose.ts';
import { loadConfig } from '../../src/config/loader.ts';
import { systemContext } from '../../src/core/context.ts';
import { decryptField } from '../../src/keys/envelope.ts';
import { workspaceAad } from '../../src/actors/workspace-actor.ts';
import { createLogger } from '../../src/log.ts';
import { Client, DB_KINDS, LogCapture, startCustos, type TestCustos, perDatabase, captureStdout } from '../support/custos.ts';
import { connectAgent } from '../support/mcp.ts';

const env = perDatabase(test, { upstream: true });

type Person = Awaited<ReturnType<typeof Client.signup>>;

function cliEnv(i: TestCustos): NodeJS.ProcessEnv {
  return { CUSTOS_DATA_DIR: i.dataDir, ...(i.pgUrl ? { CUSTOS_DATABASE_URL: i.pgUrl } : {}) };
}

/** A second node: another Custos on the same database and key backend (not listening). */
async function secondNode(i: TestCustos): Promise<Custos> {
  const config = loadConfig({}, { dataDir: i.dataDir, database: { url: i.pgUrl }, auth: { scryptCost: 16384 }, log: { level: 'warn' } });
  return createCustos(config, { log: createLogger({ level: 'warn', destination: new LogCapture() }) });
}

async function secrets(p: Person, ws: string, n: number, tag: string): Promise<Array<{ id: string; value: string }>> {
  const out: Array<{ id: string; value: string }> = [];
  for (let k = 0; k < n; k += 1) {
    const value = `${tag}-${k}-${randomBytes(8).toString('hex')}`;
    const r = await p.client.post(`/workspaces/${ws}/credentials`, { name: `${tag}-${k}`, service: 'custom', authScheme: 'bearer', baseUrl: `${env.upstream.url}/r`, secret: { value } });
    if (r.status !== 201) throw new Error(r.text);
    out.push({ id: r.body.credential.id, value });
  }
  return out;
}

for (const db of DB_KINDS) {
  const inst = (): TestCustos => env.get(db);
  const ph = (n: number): string => (db === 'postgres' ? `$${n}` : '?');
  const sql = (q: string, params: unknown[] = []): Promise<any[]> => inst().custos.db.dataSource.query(q, params);
  const wsRow = async (id: string): Promise<any> => (await sql(`SELECT * FROM workspaces WHERE id = ${ph(1)}`, [id]))[0];
  const ciphertexts = async (ws: string): Promise<Map<string, string>> =>
    new Map((await sql(`SELECT id, secret, dek_version FROM credentials WHERE workspace_id = ${ph(1)}`, [ws])).map((r: any) => [r.id, `${r.secret}|${r.dek_version}`]));

  test.serial(`[${db}] rotate-dek (manage only) re-encrypts every secret; values, pending credentials and the audit trail are right`, async (t) => {
    const owner = await Client.signup(inst().url);
    const mate = await Client.signup(inst().url);
    const ws = owner.workspaceId;
    const creds = await secrets(owner, ws, 3, 'rot');
    const pending = await owner.client.post(`/workspaces/${ws}/credentials`, { name: 'pend', service: 'custom', authScheme: 'bearer', baseUrl: `${env.upstream.url}/r` });
    await owner.client.put(`/workspaces/${ws}/grants/${mate.accountId}`, { permissions: ['read', 'write', 'use', 'reveal'] });
    const before = await ciphertexts(ws);
    const wsBefore = await wsRow(ws);
    const denied = await mate.client.post(`/workspaces/${ws}/rotate-dek`);
    t.is(denied.status, 403);
    t.is(denied.body.error.code, 'CUSTOS_ERR_FORBIDDEN');
    t.is((await (await Client.signup(inst().url)).client.post(`/workspaces/${ws}/rotate-dek`)).status, 404, 'strangers get 404');
    t.deepEqual(await ciphertexts(ws), before, 'a refused rotation changed nothing');

    const r = await owner.client.post(`/workspaces/${ws}/rotate-dek`);
    t.is(r.status, 200, r.text);
    t.deepEqual(r.body, { dekVersion: Number(wsBefore.dek_version) + 1, credentials: 3 });
    const after = await ciphertexts(ws);
    for (const c of creds) t.not(after.get(c.id), before.get(c.id), 'every secret was re-encrypted');
    t.is(after.get(pending.body.credential.id), before.get(pending.body.credential.id)?.replace(/\|\d+$/, `|${Number(wsBefore.dek_version)}`), 'a pending credential has nothing to re-encrypt');
    const wsAfter = await wsRow(ws);
    t.not(wsAfter.wrapped_dek, wsBefore.wrapped_dek);
    t.is(Number(wsAfter.dek_version), Number(wsBefore.dek_version) + 1);
    for (const c of creds) t.deepEqual((await mate.client.post(`/credentials/${c.id}/reveal`)).body.secret, { value: c.value });
    // And again after a cold activation: the new wrapped DEK is what storage holds.
    await inst().custos.actors.forget(ws);
    for (const c of creds) t.deepEqual((await owner.client.post(`/credentials/${c.id}/reveal`)).body.secret, { value: c.value });
    const entries = await inst().custos.auditLog.list(`ws:${ws}`, { limit: 50 });
    t.truthy(entries.find((e) => e.action === 'workspace.rotate_dek' && e.outcome === 'success' && e.details.credentialsReencrypted === 3 && e.actor.id === owner.accountId));
    t.truthy(entries.find((e) => e.action === 'workspace.rotate_dek' && e.outcome === 'denied' && e.actor.id === mate.accountId));
  });

  test.serial(`[${db}] a rotate-dek run by another instance (the CLI) while this one holds an active actor: the next use re-activates and works`, async (t) => {
    const p = await Client.signup(inst().url);
    const ws = p.workspaceId;
    const [c] = await secrets(p, ws, 1, 'cli');
    t.deepEqual((await p.client.post(`/credentials/${c!.id}/reveal`)).body.secret, { value: c!.value });
    const oldActor = inst().custos.actors.peek(ws)!;
    t.truthy(oldActor, 'the actor is active with the old DEK');
    const oldDek = oldActor.dekForTests();
    const v = Number((await wsRow(ws)).dek_version);
    const run = await captureStdout(() => keysCommand(['rotate-dek', ws], cliEnv(inst())));
    t.is(run.code, 0);
    t.regex(run.out, new RegExp(`DEK version ${v + 1}; 1 secret\\(s\\) re-encrypted`));
    const unwraps = inst().custos.backend.stats.unwraps;
    // Through the broker (call_api) and through reveal.
    const tok = await p.client.post('/tokens/agent', { name: 'a', tools: ['call_api'], methods: ['GET'] });
    const agent = await connectAgent(inst().url, tok.body.token);
    try {
      const called = await agent.call('call_api', { service: c!.id, method: 'GET', path: `/after-cli-${db}` });
      t.false(called.isError, called.text);
    } finally {
      await agent.close();
    }
    t.is(env.upstream.received.find((x) => x.url === `/r/after-cli-${db}`)?.headers.authorization, `Bearer ${c!.value}`);
    t.deepEqual((await p.client.post(`/credentials/${c!.id}/reveal`)).body.secret, { value: c!.value });
    const newActor = inst().custos.actors.peek(ws)!;
    t.not(newActor, oldActor, 'a fresh actor replaced the stale one');
    t.is(newActor.dekVersion, v + 1);
    t.true(oldDek.every((b) => b === 0), 'the stale actor zeroed its DEK');
    t.is(inst().custos.backend.stats.unwraps, unwraps + 1, 'exactly one re-activation');
  });

  test.serial(`[${db}] many concurrent uses hitting a stale actor all succeed, with one re-activation`, async (t) => {
    const p = await Client.signup(inst().url);
    const ws = p.workspaceId;
    const creds = await secrets(p, ws, 2, 'burst');
    t.truthy(inst().custos.actors.peek(ws));
    t.is((await captureStdout(() => keysCommand(['rotate-dek', ws], cliEnv(inst())))).code, 0);
    const unwraps = inst().custos.backend.stats.unwraps;
    const all = await Promise.all(Array.from({ length: 40 }, (_, k) => p.client.post(`/credentials/${creds[k % 2]!.id}/reveal`)));
    for (const [k, r] of all.entries()) {
      t.is(r.status, 200, r.text);
      t.deepEqual(r.body.secret, { value: creds[k % 2]!.value });
    }
    t.is(inst().custos.backend.stats.unwraps - unwraps, 1, 'the fresh actor is not itself retired by the other stale callers');
  });

  test.serial(`[${db}] a secret written on a node whose actor is stale after another node rotated is sealed under the current DEK`, async (t) => {
    const p = await Client.signup(inst().url);
    const ws = p.workspaceId;
    const [c] = await secrets(p, ws, 1, 'stale');
    t.truthy(inst().custos.actors.peek(ws), 'this node holds an active actor');
    const other = await secondNode(inst());
    try {
      await other.services.credentials.rotateDek(systemContext, ws); // node B rotates; node A is not told
    } finally {
      await other.close();
    }
    const fresh = `fresh-${randomBytes(8).toString('hex')}`;
    const put = await p.client.put(`/credentials/${c!.id}/secret`, { secret: { value: fresh } });
    t.is(put.status, 200, put.text);
    const created = await secrets(p, ws, 1, 'after');
    // The proof: a cold activation (any node, after a restart) can read what was just written.
    await inst().custos.actors.forget(ws);
    const again = await secondNode(inst());
    try {
      const row = await again.store.read.findCredential(c!.id);
      const r1 = await again.services.credentials.reveal(systemContext, c!.id).catch((e: Error) => e);
      t.false(r1 instanceof Error, `reveal on a cold node: ${String(r1)}`);
      if (!(r1 instanceof Error)) t.deepEqual(r1.secret, { value: fresh });
      t.is(Number(row!.dek_version), Number((await wsRow(ws)).dek_version), 'the secret was sealed under the current DEK version');
    } finally {
      await again.close();
    }
    t.deepEqual((await p.client.post(`/credentials/${c!.id}/reveal`)).body.secret, { value: fresh });
    t.deepEqual((await p.client.post(`/credentials/${created[0]!.id}/reveal`)).body.secret, { value: created[0]!.value });
  });

  test.serial(`[${db}] a rotate-dek asked of a node whose actor is stale re-activates and rotates from the current version`, async (t) => {
    const p = await Client.signup(inst().url);
    const ws = p.workspaceId;
    const creds = await secrets(p, ws, 2, 'stalerot');
    const v = Number((await wsRow(ws)).dek_version);
    t.is((await captureStdout(() => keysCommand(['rotate-dek', ws], cliEnv(inst())))).code, 0);
    t.is(inst().custos.actors.peek(ws)?.dekVersion, v, 'this node still holds the old DEK');
    const r = await p.client.post(`/workspaces/${ws}/rotate-dek`);
    t.is(r.status, 200, r.text);
    t.deepEqual(r.body, { dekVersion: v + 2, credentials: 2 });
    await inst().custos.actors.forget(ws);
    for (const c of creds) t.deepEqual((await p.client.post(`/credentials/${c.id}/reveal`)).body.secret, { value: c.value });
  });

  test.serial(`[${db}] custos keys rotate-kek re-wraps every workspace DEK under kek-v2; every secret stays usable`, async (t) => {
    const a = await Client.signup(inst().url);
    const b = await Client.signup(inst().url);
    const ca = await secrets(a, a.workspaceId, 2, 'kek-a');
    const cb = await secrets(b, b.workspaceId, 1, 'kek-b');
    const before = new Map((await sql('SELECT id, wrapped_dek, key_backend_id FROM workspaces')).map((r: any) => [r.id, r]));
    const ctBefore = new Map([...(await ciphertexts(a.workspaceId)), ...(await ciphertexts(b.workspaceId))]);
    const run = await captureStdout(() => keysCommand(['rotate-kek'], cliEnv(inst())));
    t.is(run.code, 0);
    t.regex(run.out, /KEK rotated: local-dev:kek-v\d+ → local-dev:kek-v\d+; \d+ workspace DEK\(s\) re-wrapped/);
    const after = await sql('SELECT id, wrapped_dek, key_backend_id, dek_version FROM workspaces');
    t.true(after.length >= 2);
    const version = Number(/→ local-dev:kek-v(\d+)/.exec(run.out)![1]);
    t.is(version, 2, 'a fresh data dir starts at kek-v1');
    for (const row of after) {
      t.is(row.key_backend_id, `local-dev:kek-v${version}`, `workspace ${row.id}`);
      t.not(row.wrapped_dek, before.get(row.id).wrapped_dek, `workspace ${row.id} re-wrapped`);
    }
    t.deepEqual(new Map([...(await ciphertexts(a.workspaceId)), ...(await ciphertexts(b.workspaceId))]), ctBefore, 'secrets themselves are untouched (same DEK)');
    // No downtime: the running instance still serves from its active actors…
    for (const c of ca) t.deepEqual((await a.client.post(`/credentials/${c.id}/reveal`)).body.secret, { value: c.value });
    // …and cold activations unwrap the new blobs (the running backend picks up kek-v2 itself).
    await inst().custos.actors.forget(a.workspaceId);
    await inst().custos.actors.forget(b.workspaceId);
    for (const c of ca) t.deepEqual((await a.client.post(`/credentials/${c.id}/reveal`)).body.secret, { value: c.value });
    for (const c of cb) t.deepEqual((await b.client.post(`/credentials/${c.id}/reveal`)).body.secret, { value: c.value });
    const audit = await inst().custos.auditLog.list(`ws:${a.workspaceId}`, { limit: 20 });
    t.truthy(audit.find((e) => e.action === 'workspace.rewrap_kek' && e.details.to === `local-dev:kek-v${version}`));
  });

  test.serial(`[${db}] deleting a workspace destroys its wrapped DEK: ciphertext copied out before cannot be opened by anything the service holds`, async (t) => {
    const p = await Client.signup(inst().url);
    const doomed = (await p.client.post('/workspaces', { name: 'doomed' })).body.workspace.id as string;
    const [c] = await secrets(p, doomed, 1, 'shred');
    const copied = (await sql(`SELECT * FROM credentials WHERE id = ${ph(1)}`, [c!.id]))[0];
    const wrapped = (await wsRow(doomed)).wrapped_dek as string;
    t.truthy(wrapped);
    t.is((await p.client.del(`/workspaces/${doomed}`)).status, 204);
    t.is(inst().custos.actors.peek(doomed), undefined, 'the actor (and its DEK) is gone');
    t.is(await wsRow(doomed), undefined);
    t.is((await sql(`SELECT count(*) AS n FROM workspaces WHERE wrapped_dek = ${ph(1)}`, [wrapped]))[0].n.toString(), '0', 'no row holds the wrapped DEK');
    // Every DEK the service can still unwrap fails on the copied ciphertext, even with its original AAD.
    const field = Buffer.from((JSON.parse(copied.secret) as Record<string, string>).value!, 'base64');
    let tried = 0;
    for (const ws of await sql('SELECT id, wrapped_dek FROM workspaces')) {
      if (!ws.wrapped_dek) continue;
      const dek = await inst().custos.backend.unwrap(Buffer.from(ws.wrapped_dek, 'base64'), workspaceAad(ws.id));
      try {
        t.throws(() => decryptField(dek, field, { workspaceId: doomed, credentialId: c!.id, field: 'value' }), { message: /integrity/i });
        tried += 1;
      } finally {
        dek.fill(0);
      }
    }
    t.true(tried >= 1);
    // Putting the row back into a live workspace does not help either.
    await sql(`INSERT INTO credentials (${Object.keys(copied).join(', ')}) VALUES (${Object.keys(copied).map((_, k) => ph(k + 1)).join(', ')})`,
      Object.values({ ...copied, workspace_id: p.workspaceId, name: 'resurrected' }));
    const r = await p.client.post(`/credentials/${c!.id}/reveal`);
    t.is(r.body.error.code, 'CUSTOS_ERR_INTEGRITY');
    t.false(r.text.includes(c!.value));
    const org = await inst().custos.auditLog.list(`org:${p.orgId}`, { limit: 20 });
    t.truthy(org.find((e) => e.action === 'workspace.delete' && e.outcome === 'success'));
  });
}

/**
 * Crypto-shredding on SQLite: deleted row images would otherwise linger in the WAL and, after a
 * checkpoint, in free pages of the main file. The data source turns on `secure_delete` and the
 * services call Store.purgeDeleted() (a TRUNCATE checkpoint) after a workspace delete, a secret
 * replacement, a credential delete and a DEK rotation. This test scans the raw files.
 */
test.serial('[sqlite] after a workspace delete and a secret replacement neither the wrapped DEK nor the old ciphertext is left in the SQLite files', async (t) => {
  const i = env.get('sqlite');
  const p = await Client.signup(i.url);
  const doomed = (await p.client.post('/workspaces', { name: 'doomed-raw' })).body.workspace.id as string;
  const [c] = await secrets(p, doomed, 1, 'raw');
  const [keep] = await secrets(p, p.workspaceId, 1, 'raw-keep');
  const oldCt = JSON.parse((await i.custos.store.read.findCredential(keep!.id))!.secret!).value as string;
  await p.client.put(`/credentials/${keep!.id}/secret`, { secret: { value: `replaced-${randomBytes(6).toString('hex')}` } });
  const wrapped = (await i.custos.store.read.findWorkspace(doomed))!.wrapped_dek!;
  t.truthy(c);
  t.is((await p.client.del(`/workspaces/${doomed}`)).status, 204);
  for (const checkpoint of [false, true]) {
    if (checkpoint) await i.custos.db.dataSource.query('PRAGMA wal_checkpoint(TRUNCATE)');
    for (const f of readdirSync(i.dataDir).filter((n) => n.startsWith('custos.sqlite'))) {
      const bytes = readFileSync(path.join(i.dataDir, f));
      t.false(bytes.includes(Buffer.from(wrapped)), `${f}${checkpoint ? ' after checkpoint' : ''}: wrapped DEK of the deleted workspace`);
      t.false(bytes.includes(Buffer.from(oldCt)), `${f}${checkpoint ? ' after checkpoint' : ''}: replaced ciphertext`);
    }
  }
});
