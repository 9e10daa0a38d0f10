/**
 * Agent token lifecycle through the app API and /mcp on the running service: format and checksum,
 * shown once, stored only as a peppered hash, listed by prefix, last-used tracking, immediate
 * revocation, expiry validation. Both databases.
 */
import test from 'ava';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { DB_KINDS, startCustos, type DbKind, type TestCustos, perDatabase } from '../support/custos.ts';
import { connectAgent } from '../support/mcp.ts';
import { startUpstream } from '../support/upstream.ts';
import { addCredential, auditOf, eventually, marker, mcpPost, mintAgent, postAgentToken, signup } from '../support/mcp-fixtures.ts';
import { parseToken } from '../../src/core/token-format.ts';

const env = perDatabase(test);

for (const db of DB_KINDS) {
  const inst = (): TestCustos => env.get(db);

  test(`[${db}] an agent token is custos_agent_ + 40 base62 + a CRC32 checksum; a one-character change fails the checksum`, async (t) => {
    const person = await signup(inst());
    const { token } = await mintAgent(person);
    t.regex(token, /^custos_agent_[0-9A-Za-z]{46}$/);
    t.is(parseToken(token), 'agent');
    const i = 'custos_agent_'.length + 7;
    const typo = token.slice(0, i) + (token[i] === 'x' ? 'y' : 'x') + token.slice(i + 1);
    t.is(parseToken(typo), null, 'secret scanners can tell a typo from a token offline');
    t.is(parseToken(token.replace('custos_agent_', 'custos_ssh_')), null, 'the type is covered by the checksum');
    const r = await mcpPost(inst().url, { token: typo });
    t.is(r.status, 401);
    t.is(r.json.error.code, 'CUSTOS_ERR_TOKEN_INVALID');
    const second = await mintAgent(person);
    t.not(second.token, token);
  });

  test(`[${db}] the token value is shown once: lists show name, prefix and scopes, never the value; the database holds only a peppered hash`, async (t) => {
    const person = await signup(inst());
    const created = await postAgentToken(person, { name: 'ci-bot', tools: ['list_services', 'call_api'], methods: ['GET'], workspaceId: person.workspaceId, expiresAt: new Date(Date.now() + 86_400_000).toISOString() });
    t.is(created.status, 201);
    const token = created.body.token as string;
    t.is(created.body.prefix, token.slice(0, 'custos_agent_'.length + 6));
    t.deepEqual(created.body.scopes.tools, ['list_services', 'call_api']);
    t.deepEqual(created.body.scopes.methods, ['GET']);
    t.is(created.body.scopes.workspaceId, person.workspaceId);
    t.deepEqual(created.body.scopes.defaultPermissions, ['read', 'use'], 'default grant is read + use');

    const list = await person.client.get('/tokens/agent');
    t.is(list.status, 200);
    t.is(list.body.tokens.length, 1);
    const row = list.body.tokens[0];
    t.is(row.name, 'ci-bot');
    t.is(row.prefix, created.body.prefix);
    t.is(row.token, undefined);
    t.truthy(row.createdAt);
    t.is(row.lastUsedAt, null);
    t.truthy(row.expiresAt);
    const random = token.slice('custos_agent_'.length);
    t.false(list.text.includes(random.slice(6)), 'no part of the value beyond the display prefix');

    const rows: Array<Record<string, unknown>> = await inst().custos.db.dataSource.query('SELECT * FROM tokens');
    const dump = JSON.stringify(rows);
    t.false(dump.includes(token), 'value not in the tokens table');
    t.false(dump.includes(random.slice(6, 30)), 'nor any long piece of it');
    const mine = rows.find((r) => r.prefix === created.body.prefix)!;
    t.regex(String(mine.token_hash), /^[0-9a-f]{64}$/);
    t.not(mine.token_hash, createHash('sha256').update(token).digest('hex'), 'keyed with a server pepper, not a bare SHA-256');
    if (db === 'sqlite') {
      for (const f of readdirSync(inst().dataDir).filter((n) => n.startsWith('custos.sqlite'))) {
        t.false(readFileSync(path.join(inst().dataDir, f)).includes(Buffer.from(random)), f);
      }
    }
    // Still usable, then still not in logs or audit.
    const agent = await connectAgent(inst().url, token);
    await agent.call('list_services');
    await agent.close();
    await inst().custos.auditLog.flush();
    t.false(inst().logs.text().includes(random), 'logs');
    const exp = await person.client.get(`/workspaces/${person.workspaceId}/audit/export`);
    t.false(exp.text.includes(random), 'audit export');
    t.true(exp.text.includes('"token.create"'), 'token creation is audited');
  });

  test(`[${db}] last used is recorded when the token is used on /mcp`, async (t) => {
    const person = await signup(inst());
    const { token, id } = await mintAgent(person);
    const lastUsed = async (): Promise<string | null> => (await person.client.get('/tokens/agent')).body.tokens.find((x: { id: string }) => x.id === id).lastUsedAt;
    t.is(await lastUsed(), null);
    const before = Date.now();
    const agent = await connectAgent(inst().url, token);
    t.teardown(() => agent.close());
    await agent.call('list_services');
    await eventually(async () => (await lastUsed()) !== null, 5000, 'lastUsedAt');
    const at = Date.parse((await lastUsed())!);
    t.true(at >= before - 1000 && at <= Date.now() + 1000);
  });

  test(`[${db}] revocation is immediate, listed, audited, idempotent, and only the creator can revoke`, async (t) => {
    const up = await startUpstream();
    t.teardown(() => up.close());
    const person = await signup(inst());
    await addCredential(person, { name: 'svc', authScheme: 'bearer', baseUrl: `${up.url}/v1`, secret: { value: marker('rev') } });
    const { token, id } = await mintAgent(person, { workspaceId: person.workspaceId });
    const keep = await mintAgent(person, { name: 'keep' });
    const agent = await connectAgent(inst().url, token);
    t.teardown(() => agent.close());
    t.false((await agent.call('call_api', { service: 'svc', method: 'GET', path: '/a' })).isError);

    const stranger = await signup(inst());
    t.is((await stranger.client.del(`/tokens/agent/${id}`)).status, 404, "another account's token is not found");
    t.is((await person.client.del(`/tokens/ssh/${id}`)).status, 404, 'the type must match');

    t.is((await person.client.del(`/tokens/agent/${id}`)).status, 204);
    const refused = await t.throwsAsync(agent.call('call_api', { service: 'svc', method: 'GET', path: '/b' }));
    t.regex(refused!.message, /CUSTOS_ERR_TOKEN_INVALID.*revoked/);
    t.deepEqual(up.received.map((r) => r.url), ['/v1/a']);
    t.is((await person.client.del(`/tokens/agent/${id}`)).status, 204, 'revoking twice is harmless');
    const listed = (await person.client.get('/tokens/agent')).body.tokens as Array<{ id: string; revokedAt: string | null }>;
    t.truthy(listed.find((x) => x.id === id)!.revokedAt);
    t.is(listed.find((x) => x.id === keep.id)!.revokedAt, null);
    t.is((await mcpPost(inst().url, { token: keep.token })).status, 200, 'other tokens are unaffected');
    const revocations = (await auditOf(person)).filter((e) => e.action === 'token.revoke' && e.target.id === id);
    t.is(revocations.length, 1, 'audited once on the bound workspace');
    t.is(revocations[0]!.actor.id, person.accountId);
  });

  test(`[${db}] bad token requests are refused and create nothing`, async (t) => {
    const person = await signup(inst());
    const cases: Array<[string, Record<string, unknown>, number]> = [
      ['expiry in the past', { expiresAt: new Date(Date.now() - 60_000).toISOString() }, 400],
      ['unknown tool', { tools: ['rm_rf'] }, 400],
      ['no tools', { tools: [] }, 400],
      ['lower-case method', { methods: ['get'] }, 400],
      ['TRACE', { methods: ['TRACE'] }, 400],
      ['unknown field', { admin: true }, 400],
    ];
    for (const [what, patch, status] of cases) {
      const r = await person.client.post('/tokens/agent', { name: 'x', tools: ['call_api'], methods: ['GET'], ...patch });
      t.is(r.status, status, what);
      t.is(r.body.error.code, 'CUSTOS_ERR_VALIDATION', what);
    }
    t.deepEqual((await person.client.get('/tokens/agent')).body.tokens, []);
    // A machine cannot mint tokens: an agent token is not a session.
    const { token } = await mintAgent(person);
    const viaToken = await fetch(`${inst().url}/api/v1/tokens/agent`, {
      method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'y', tools: ['call_api'] }),
    });
    t.is(viaToken.status, 401);
  });
}
