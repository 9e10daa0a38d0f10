import test from 'ava';
import { randomUUID } from 'node:crypto';
import { adminCommand } from '../../src/cli/admin.ts';
import { Client, DB_KINDS, startCustos, type TestCustos, perDatabase } from '../support/custos.ts';

const env = perDatabase(test);

function cliEnv(i: TestCustos): NodeJS.ProcessEnv {
  return { CUSTOS_DATA_DIR: i.dataDir, ...(i.pgUrl ? { CUSTOS_DATABASE_URL: i.pgUrl } : {}) };
}

for (const db of DB_KINDS) {
  const inst = (): TestCustos => env.get(db);

  test(`[${db}] create, list, rename and delete workspaces`, async (t) => {
    const { client } = await Client.signup(inst().url);
    const created = await client.post('/workspaces', { name: 'staging' });
    t.is(created.status, 201);
    const id = created.body.workspace.id;
    t.is((await client.post('/workspaces', { name: 'staging' })).status, 403, 'Free: the third is refused before the duplicate name matters');
    const renamed = await client.patch(`/workspaces/${id}`, { name: 'production' });
    t.is(renamed.status, 200);
    t.is(renamed.body.workspace.name, 'production');
    t.deepEqual((await client.get('/workspaces')).body.workspaces.map((w: { name: string }) => w.name).sort(), ['Default', 'production']);
    t.is((await client.del(`/workspaces/${id}`)).status, 204);
    t.is((await client.get(`/workspaces/${id}`)).status, 404);
    t.deepEqual((await client.get('/workspaces')).body.workspaces.map((w: { name: string }) => w.name), ['Default']);
    // Deleting destroys the wrapped DEK with the row (crypto-shredding).
    t.is(await inst().custos.store.read.findWorkspace(id), null);
  });

  test(`[${db}] Free plan: the third workspace is refused with CUSTOS_ERR_PLAN_LIMIT; set-plan lifts it`, async (t) => {
    const { client, email, orgId } = await Client.signup(inst().url);
    t.is((await client.post('/workspaces', { name: 'second' })).status, 201);
    const third = await client.post('/workspaces', { name: 'third' });
    t.is(third.status, 403);
    t.is(third.body.error.code, 'CUSTOS_ERR_PLAN_LIMIT');
    t.regex(third.body.error.message, /at most 2 workspaces/);
    t.deepEqual(third.body.error.details, { limit: 'workspacesPerAccount', max: 2, plan: 'free' });
    t.is((await client.get('/workspaces')).body.workspaces.length, 2);
    t.is(await adminCommand(['set-plan', email, 'pro'], cliEnv(inst())), 0);
    t.is((await client.post('/workspaces', { name: 'third' })).status, 201);
    const org = await inst().custos.store.read.findOrganization(orgId);
    t.is(org!.plan, 'pro');
    const entries = await inst().custos.auditLog.list(`org:${orgId}`, { limit: 20 });
    t.truthy(entries.find((e) => e.action === 'organization.set_plan' && e.details.to === 'pro'));
    t.truthy(entries.find((e) => e.action === 'workspace.create' && e.outcome === 'denied'));
  });

  test(`[${db}] admin set-plan refuses an unknown plan and an unknown organization`, async (t) => {
    await t.throwsAsync(adminCommand(['set-plan', randomUUID(), 'gold'], cliEnv(inst())), { message: /Unknown plan/ });
    await t.throwsAsync(adminCommand(['set-plan', randomUUID(), 'pro'], cliEnv(inst())), { message: /No organization/ });
  });

  test(`[${db}] no existence oracle: another account's workspace answers exactly like a missing one`, async (t) => {
    const alice = await Client.signup(inst().url);
    const bob = await Client.signup(inst().url);
    const theirs = await bob.client.get(`/workspaces/${alice.workspaceId}`);
    const missing = await bob.client.get(`/workspaces/${randomUUID()}`);
    t.is(theirs.status, 404);
    t.deepEqual(theirs.body, missing.body);
    for (const [method, path, body] of [
      ['PATCH', `/workspaces/${alice.workspaceId}`, { name: 'pwned' }],
      ['DELETE', `/workspaces/${alice.workspaceId}`, undefined],
      ['GET', `/workspaces/${alice.workspaceId}/grants`, undefined],
      ['PUT', `/workspaces/${alice.workspaceId}/grants/${encodeURIComponent(bob.email)}`, { permissions: ['manage'] }],
      ['GET', `/workspaces/${alice.workspaceId}/audit`, undefined],
    ] as const) {
      const r = await bob.client.request(method, path, body);
      t.is(r.status, 404, `${method} ${path}`);
      t.deepEqual(r.body, missing.body);
    }
    t.is((await alice.client.get(`/workspaces/${alice.workspaceId}`)).body.workspace.name, 'Default');
    // The probing is visible to the workspace's auditors.
    const entries = await inst().custos.auditLog.list(`ws:${alice.workspaceId}`, { limit: 50 });
    t.true(entries.filter((e) => e.outcome === 'denied' && e.actor.id === bob.accountId).length >= 5);
  });

  test(`[${db}] grants: only manage can grant, change and revoke; grantees get exactly what they were given`, async (t) => {
    const owner = await Client.signup(inst().url);
    const mate = await Client.signup(inst().url);
    const ws = owner.workspaceId;
    const put = await owner.client.put(`/workspaces/${ws}/grants/${encodeURIComponent(mate.email)}`, { permissions: ['read'] });
    t.is(put.status, 200);
    t.deepEqual(put.body.grant.permissions, ['read']);
    const seen = await mate.client.get(`/workspaces/${ws}`);
    t.is(seen.status, 200);
    t.deepEqual(seen.body.workspace.permissions, ['read']);
    t.true((await mate.client.get('/workspaces')).body.workspaces.some((w: { id: string }) => w.id === ws));
    // read is not manage: a grantee who can see the workspace gets 403, not 404.
    const rename = await mate.client.patch(`/workspaces/${ws}`, { name: 'mine' });
    t.is(rename.status, 403);
    t.is(rename.body.error.code, 'CUSTOS_ERR_FORBIDDEN');
    t.is((await mate.client.put(`/workspaces/${ws}/grants/${mate.accountId}`, { permissions: ['manage'] })).status, 403);
    t.is((await mate.client.get(`/workspaces/${ws}/grants`)).status, 403);
    t.is((await mate.client.del(`/workspaces/${ws}`)).status, 403);
    // Change to manage: now the teammate can administer.
    t.is((await owner.client.put(`/workspaces/${ws}/grants/${mate.accountId}`, { permissions: ['read', 'manage'] })).status, 200);
    const grants = await mate.client.get(`/workspaces/${ws}/grants`);
    t.is(grants.status, 200);
    t.deepEqual(grants.body.grants.map((g: { email: string }) => g.email).sort(), [owner.email, mate.email].sort());
    t.is((await mate.client.patch(`/workspaces/${ws}`, { name: 'shared' })).status, 200);
    // Revoke: back to no standing at all (404).
    t.is((await owner.client.del(`/workspaces/${ws}/grants/${encodeURIComponent(mate.email)}`)).status, 204);
    t.is((await mate.client.get(`/workspaces/${ws}`)).status, 404);
    const actions = (await inst().custos.auditLog.list(`ws:${ws}`, { limit: 50 })).map((e) => `${e.action}:${e.outcome}`);
    for (const a of ['grant.create:success', 'grant.change:success', 'grant.revoke:success', 'workspace.rename:denied', 'workspace.rename:success']) {
      t.true(actions.includes(a), a);
    }
  });

  test(`[${db}] grants: unknown account, bad permission names and removing the last manager are refused`, async (t) => {
    const owner = await Client.signup(inst().url);
    const ws = owner.workspaceId;
    const unknown = await owner.client.put(`/workspaces/${ws}/grants/${encodeURIComponent('ghost@example.com')}`, { permissions: ['read'] });
    t.is(unknown.status, 404);
    const bad = await owner.client.put(`/workspaces/${ws}/grants/${owner.accountId}`, { permissions: ['root'] });
    t.is(bad.status, 400);
    t.is(bad.body.error.code, 'CUSTOS_ERR_VALIDATION');
    const last = await owner.client.put(`/workspaces/${ws}/grants/${owner.accountId}`, { permissions: ['read'] });
    t.is(last.status, 409);
    t.is(last.body.error.code, 'CUSTOS_ERR_CONFLICT');
    const revokeSelf = await owner.client.del(`/workspaces/${ws}/grants/${owner.accountId}`);
    t.is(revokeSelf.status, 409);
    t.deepEqual((await owner.client.get(`/workspaces/${ws}`)).body.workspace.permissions, ['read', 'write', 'use', 'reveal', 'manage']);
  });
}
