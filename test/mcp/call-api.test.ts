import test from 'ava';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { Client, DB_KINDS, startCustos, type TestCustos, perDatabase } from '../support/custos.ts';
import { connectAgent } from '../support/mcp.ts';

const MARKER = `MARKER-${randomBytes(12).toString('hex')}`;
const env = perDatabase(test, { upstream: true });

async function setup(i: TestCustos, opts: { tools?: string[]; methods?: string[]; defaultPermissions?: string[] } = {}) {
  const person = await Client.signup(i.url);
  const cred = await person.client.post(`/workspaces/${person.workspaceId}/credentials`, {
    name: 'echo', service: 'custom', authScheme: 'bearer', baseUrl: `${env.upstream.url}/v1`, secret: { value: MARKER },
  });
  if (cred.status !== 201) throw new Error(cred.text);
  const hdr = await person.client.post(`/workspaces/${person.workspaceId}/credentials`, {
    name: 'echo-header', service: 'custom', authScheme: 'header', baseUrl: `${env.upstream.url}/v1`, config: { headerName: 'x-api-key' }, secret: { value: MARKER },
  });
  if (hdr.status !== 201) throw new Error(hdr.text);
  const tok = await person.client.post('/tokens/agent', {
    name: 'agent', tools: opts.tools ?? ['list_services', 'create_service', 'call_api'], methods: opts.methods ?? ['GET', 'POST'],
    ...(opts.defaultPermissions ? { defaultPermissions: opts.defaultPermissions } : {}),
  });
  if (tok.status !== 201) throw new Error(tok.text);
  return { person, token: tok.body.token as string, tokenId: tok.body.id as string, credentialId: cred.body.credential.id as string };
}

for (const db of DB_KINDS) {
  const inst = (): TestCustos => env.get(db);

  test(`[${db}] call_api injects a bearer credential at the upstream and never returns it`, async (t) => {
    const { token, person } = await setup(inst());
    const agent = await connectAgent(inst().url, token);
    try {
      const tools = await agent.client.listTools();
      t.deepEqual(tools.tools.map((x) => x.name).sort(), ['call_api', 'create_service', 'list_services'], "the token's tools, not query_db");
      const r = await agent.call('call_api', { service: 'echo', method: 'GET', path: `/items-${db}?limit=5` });
      t.false(r.isError, r.text);
      t.is(r.structured.status, 200);
      const seen = env.upstream.received.find((x) => x.url === `/v1/items-${db}?limit=5`)!;
      t.truthy(seen);
      t.is(seen.headers.authorization, `Bearer ${MARKER}`, 'the upstream got the credential');
      t.false(r.text.includes(MARKER), 'the echo of the credential is scrubbed from the result');
      t.false(JSON.stringify(r.structured).includes(MARKER));
      t.is(r.structured.body.headers.authorization, 'Bearer [redacted]');
      t.false('x-echo-auth' in r.structured.headers, 'unknown response headers are dropped');
      const header = await agent.call('call_api', { service: 'echo-header', method: 'POST', path: `/things-${db}`, body: { a: 1 } });
      t.false(header.isError, header.text);
      const seenH = env.upstream.received.find((x) => x.url === `/v1/things-${db}`)!;
      t.is(seenH.headers['x-api-key'], MARKER);
      t.is(seenH.headers['content-type'], 'application/json');
      t.is(seenH.body.toString(), '{"a":1}');
      t.false(header.text.includes(MARKER));
      // Audit: who, which credential, method, host, path with query values redacted, status.
      const audit = await person.client.get(`/workspaces/${person.workspaceId}/audit?limit=20`);
      const call = audit.body.entries.find((e: any) => e.action === 'mcp.call_api' && e.details.path?.startsWith(`/items-${db}`));
      t.truthy(call);
      t.is(call.outcome, 'success');
      t.is(call.details.path, `/items-${db}?limit=[redacted]`);
      t.is(call.details.status, 200);
      t.is(call.details.method, 'GET');
      t.is(call.details.host, new URL(env.upstream.url).host);
      t.is(call.actor.type, 'agent_token');
      t.is(call.actor.creatorId, person.accountId);
    } finally {
      await agent.close();
    }
  });

  test(`[${db}] an upstream body with nothing to scrub comes back intact (JSON, text, binary)`, async (t) => {
    const { token } = await setup(inst());
    const agent = await connectAgent(inst().url, token);
    env.upstream.setHandler((req, res) => {
      if (req.url.endsWith('/json')) {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ ok: true, items: [1, 2, 3] }));
      } else if (req.url.endsWith('/text')) {
        res.setHeader('content-type', 'text/plain');
        res.end('plain text answer');
      } else if (req.url.endsWith('/bin')) {
        res.setHeader('content-type', 'application/octet-stream');
        res.end(Buffer.from([1, 2, 3, 250]));
      } else {
        res.setHeader('content-type', 'application/json');
        res.setHeader('x-echo-auth', String(req.headers.authorization ?? ''));
        res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: req.body.toString('utf8') }));
      }
    });
    try {
      const j = await agent.call('call_api', { service: 'echo', method: 'GET', path: `/clean-${db}/json` });
      t.deepEqual(j.structured.body, { ok: true, items: [1, 2, 3] });
      t.is(j.structured.encoding, 'json');
      const x = await agent.call('call_api', { service: 'echo', method: 'GET', path: `/clean-${db}/text` });
      t.is(x.structured.body, 'plain text answer');
      const b = await agent.call('call_api', { service: 'echo', method: 'GET', path: `/clean-${db}/bin` });
      t.is(b.structured.encoding, 'base64');
      t.is(b.structured.body, Buffer.from([1, 2, 3, 250]).toString('base64'));
    } finally {
      await agent.close();
    }
  });

  test(`[${db}] list_services shows non-secret config only; create_service makes a pending service a person completes`, async (t) => {
    const { token, person } = await setup(inst(), { defaultPermissions: ['read', 'write', 'use'] });
    const agent = await connectAgent(inst().url, token);
    try {
      const list = await agent.call('list_services');
      t.false(list.isError, list.text);
      const names = list.structured.services.map((s: any) => s.name).sort();
      t.deepEqual(names, ['echo', 'echo-header']);
      t.false(list.text.includes(MARKER));
      t.deepEqual(list.structured.services.find((s: any) => s.name === 'echo').allowedMethods, ['GET', 'POST']);
      const created = await agent.call('create_service', { name: 'new-api', baseUrl: 'https://api.example.com/v2', authScheme: 'header', headerName: 'x-key' });
      t.false(created.isError, created.text);
      t.is(created.structured.service.status, 'pending');
      t.regex(created.structured.supplySecretAt, /\/api\/v1\/credentials\/.+\/secret$/);
      const pending = await agent.call('call_api', { service: 'new-api', method: 'GET', path: '/x' });
      t.true(pending.isError);
      t.regex(pending.text, /CUSTOS_ERR_NOT_READY: .*a person must supply the secret/);
      // Visible in the app as pending; a person supplies the secret; now it is ready.
      const inApp = await person.client.get(`/workspaces/${person.workspaceId}/credentials`);
      const row = inApp.body.credentials.find((c: any) => c.name === 'new-api');
      t.is(row.status, 'pending');
      const supplied = await person.client.put(`/credentials/${row.id}/secret`, { secret: { value: 'later-secret-1234' } });
      t.is(supplied.status, 200);
      t.is(supplied.body.credential.status, 'ready');
      const again = await agent.call('list_services');
      t.is(again.structured.services.find((s: any) => s.name === 'new-api').status, 'ready');
      // An agent may not bind a credential to a private address.
      const priv = await agent.call('create_service', { name: 'meta', baseUrl: 'http://169.254.169.254/latest', authScheme: 'bearer' });
      t.true(priv.isError);
      t.regex(priv.text, /CUSTOS_ERR_DESTINATION_REFUSED/);
    } finally {
      await agent.close();
    }
  });

  test(`[${db}] the marker secret appears in no log line, audit entry or database file`, async (t) => {
    const { token, person } = await setup(inst());
    const agent = await connectAgent(inst().url, token);
    await agent.call('call_api', { service: 'echo', method: 'GET', path: '/leak-check' });
    await agent.call('call_api', { service: 'echo', method: 'DELETE', path: '/nope' });
    await agent.close();
    await inst().custos.auditLog.flush();
    t.false(inst().logs.text().includes(MARKER), 'logs');
    const exp = await person.client.get(`/workspaces/${person.workspaceId}/audit/export`);
    t.false(exp.text.includes(MARKER), 'audit');
    if (db === 'sqlite') {
      for (const f of readdirSync(inst().dataDir).filter((n) => n.startsWith('custos.sqlite'))) {
        t.false(readFileSync(path.join(inst().dataDir, f)).includes(Buffer.from(MARKER)), f);
      }
    } else {
      const rows = await inst().custos.db.dataSource.query('SELECT * FROM credentials');
      t.false(JSON.stringify(rows).includes(MARKER), 'credentials table');
      const all = await inst().custos.db.dataSource.query(`SELECT string_agg(t::text, ' ') AS dump FROM (SELECT * FROM audit_events) t`);
      t.false(String(all[0].dump).includes(MARKER), 'audit table');
    }
  });
}
