/**
 * Storage is untrusted (DESIGN.md §2): a flipped byte, a secret copied onto another credential (in
 * the same or another workspace) or a wrapped DEK copied onto another workspace must fail with the
 * generic CUSTOS_ERR_INTEGRITY, through reveal and through call_api, on SQLite and PostgreSQL.
 * Serial: one test counts key-backend unwraps, which are per instance.
 */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { Client, DB_KINDS, startCustos, type TestCustos, perDatabase } from '../support/custos.ts';
import { connectAgent } from '../support/mcp.ts';

const env = perDatabase(test, { upstream: true });

type Person = Awaited<ReturnType<typeof Client.signup>>;

async function bearer(p: Person, ws: string, name: string, value: string): Promise<string> {
  const r = await p.client.post(`/workspaces/${ws}/credentials`, { name, service: 'custom', authScheme: 'bearer', baseUrl: `${env.upstream.url}/t`, secret: { value } });
  if (r.status !== 201) throw new Error(r.text);
  return r.body.credential.id as string;
}

for (const db of DB_KINDS) {
  const inst = (): TestCustos => env.get(db);
  const ph = (n: number): string => (db === 'postgres' ? `$${n}` : '?');
  const sql = (q: string, params: unknown[] = []): Promise<any[]> => inst().custos.db.dataSource.query(q, params);
  const secretOf = async (id: string): Promise<string> => (await sql(`SELECT secret FROM credentials WHERE id = ${ph(1)}`, [id]))[0].secret as string;
  const setSecret = (id: string, secret: string): Promise<unknown> => sql(`UPDATE credentials SET secret = ${ph(1)} WHERE id = ${ph(2)}`, [secret, id]);

  function assertIntegrity(t: import('ava').ExecutionContext, r: { status: number; body: any; text: string }, ids: string[], what: string): void {
    t.is(r.status, 500, `${what}: ${r.text}`);
    t.is(r.body.error.code, 'CUSTOS_ERR_INTEGRITY', what);
    t.regex(r.body.error.message, /integrity/i, what);
    for (const id of ids) t.false(r.text.includes(id), `${what}: the message is generic (no ids)`);
  }

  test.serial(`[${db}] a flipped byte in a stored ciphertext fails reveal and call_api with a generic integrity error`, async (t) => {
    const p = await Client.signup(inst().url);
    const value = `MARKER-${randomBytes(8).toString('hex')}`;
    const id = await bearer(p, p.workspaceId, 'flip', value);
    const sealed = JSON.parse(await secretOf(id)) as Record<string, string>;
    const blob = Buffer.from(sealed.value!, 'base64');
    blob[blob.length - 20]! ^= 0x01; // inside the ciphertext body, not the tag
    await setSecret(id, JSON.stringify({ value: blob.toString('base64') }));
    const r = await p.client.post(`/credentials/${id}/reveal`);
    assertIntegrity(t, r, [id, p.workspaceId], 'reveal');
    t.false(r.text.includes(value));
    const tok = await p.client.post('/tokens/agent', { name: 'a', tools: ['call_api'], methods: ['GET'] });
    const agent = await connectAgent(inst().url, tok.body.token);
    try {
      const before = env.upstream.received.length;
      const c = await agent.call('call_api', { service: id, method: 'GET', path: '/flip' });
      t.true(c.isError);
      t.regex(c.text, /CUSTOS_ERR_INTEGRITY/);
      t.is(env.upstream.received.length, before, 'nothing went upstream');
    } finally {
      await agent.close();
    }
    const audit = await inst().custos.auditLog.list(`ws:${p.workspaceId}`, { limit: 20 });
    t.truthy(audit.find((e) => e.action === 'credential.reveal' && e.outcome === 'failure' && e.details.code === 'CUSTOS_ERR_INTEGRITY'));
    // The version byte and the tag are covered too.
    for (const pos of [0, blob.length - 1]) {
      const b = Buffer.from(sealed.value!, 'base64');
      b[pos]! ^= 0x80;
      await setSecret(id, JSON.stringify({ value: b.toString('base64') }));
      assertIntegrity(t, await p.client.post(`/credentials/${id}/reveal`), [id], `byte ${pos}`);
    }
    // Restoring the original bytes restores the credential: nothing else was harmed.
    await setSecret(id, JSON.stringify(sealed));
    t.deepEqual((await p.client.post(`/credentials/${id}/reveal`)).body.secret, { value });
  });

  test.serial(`[${db}] a secret copied onto another credential, in another workspace or the same one, fails integrity`, async (t) => {
    const alice = await Client.signup(inst().url);
    const bob = await Client.signup(inst().url);
    const second = await alice.client.post('/workspaces', { name: 'second' });
    const aliceWs2 = second.body.workspace.id as string;
    const valueA = `MARKER-A-${randomBytes(8).toString('hex')}`;
    const source = await bearer(alice, alice.workspaceId, 'source', valueA);
    const sameWs = await bearer(alice, alice.workspaceId, 'same-ws', 'other-value-0001');
    const otherWs = await bearer(alice, aliceWs2, 'other-ws', 'other-value-0002');
    const otherAccount = await bearer(bob, bob.workspaceId, 'bobs', 'bob-value-0003');
    const stolen = await secretOf(source);
    for (const [victim, who, what] of [[sameWs, alice, 'same workspace'], [otherWs, alice, 'another workspace'], [otherAccount, bob, "another account's workspace"]] as const) {
      await setSecret(victim, stolen);
      const r = await who.client.post(`/credentials/${victim}/reveal`);
      assertIntegrity(t, r, [victim, source], what);
      t.false(r.text.includes(valueA), what);
    }
    // A secret moved to another field of the same credential fails as well (field name is bound).
    const sig = await alice.client.post(`/workspaces/${alice.workspaceId}/credentials`, {
      name: 'sig', service: 'custom', authScheme: 'sigv4', baseUrl: `${env.upstream.url}/s3`, config: { region: 'us-east-1', service: 's3' },
      secret: { accessKeyId: 'AKIAFIELDSWAP', secretAccessKey: 'secret-field-swap-0001' },
    });
    const sigId = sig.body.credential.id as string;
    const sealed = JSON.parse(await secretOf(sigId)) as Record<string, string>;
    await setSecret(sigId, JSON.stringify({ accessKeyId: sealed.secretAccessKey, secretAccessKey: sealed.accessKeyId }));
    assertIntegrity(t, await alice.client.post(`/credentials/${sigId}/reveal`), [sigId], 'field swap');
    t.deepEqual((await alice.client.post(`/credentials/${source}/reveal`)).body.secret, { value: valueA }, 'the source is untouched');
  });

  test.serial(`[${db}] the same secret stored twice gives different ciphertexts`, async (t) => {
    const p = await Client.signup(inst().url);
    const value = `same-${randomBytes(8).toString('hex')}`;
    const a = await bearer(p, p.workspaceId, 'twin-a', value);
    const b = await bearer(p, p.workspaceId, 'twin-b', value);
    const ca = await secretOf(a);
    t.not(ca, await secretOf(b));
    await p.client.put(`/credentials/${a}/secret`, { secret: { value } });
    const ca2 = await secretOf(a);
    t.not(ca2, ca, 'the same value re-supplied is a fresh encryption (fresh nonce)');
    const nonce = (s: string): string => Buffer.from((JSON.parse(s) as Record<string, string>).value!, 'base64').subarray(1, 13).toString('hex');
    t.not(nonce(ca), nonce(ca2));
    for (const id of [a, b]) t.deepEqual((await p.client.post(`/credentials/${id}/reveal`)).body.secret, { value });
  });

  test.serial(`[${db}] a wrapped DEK copied onto another workspace makes its activation fail with an integrity error`, async (t) => {
    const alice = await Client.signup(inst().url);
    const bob = await Client.signup(inst().url);
    const bobsId = await bearer(bob, bob.workspaceId, 'bobs', 'bob-secret-0001');
    await bearer(alice, alice.workspaceId, 'alices', 'alice-secret-0001');
    const row = (await sql(`SELECT wrapped_dek FROM workspaces WHERE id = ${ph(1)}`, [alice.workspaceId]))[0];
    await sql(`UPDATE workspaces SET wrapped_dek = ${ph(1)} WHERE id = ${ph(2)}`, [row.wrapped_dek, bob.workspaceId]);
    await inst().custos.actors.forget(bob.workspaceId); // the next use must activate from storage
    const unwrapsBefore = inst().custos.backend.stats.unwraps;
    const r = await bob.client.post(`/credentials/${bobsId}/reveal`);
    assertIntegrity(t, r, [bobsId, bob.workspaceId, alice.workspaceId], 'swapped wrapped DEK');
    // At least this activation's unwrap (the counter is instance-wide, so other activity may add more).
    t.true(inst().custos.backend.stats.unwraps >= unwrapsBefore + 1, 'the unwrap was tried and refused');
    t.is(inst().custos.actors.peek(bob.workspaceId), undefined, 'no actor was created');
  });
}
