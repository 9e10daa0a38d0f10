/**
 * query_db end to end: the official MCP client → /mcp → the workspace actor → a real PostgreSQL
 * database through a dedicated read-only role, with masking, refusals, plan gating and audit.
 */
import test from 'ava';
import { adminCommand } from '../../src/cli/admin.ts';
import { Client, startCustos, type TestCustos } from '../support/custos.ts';
import { connectAgent, type Agent } from '../support/mcp.ts';
import { createFixture, type Fixture } from '../sql/fixture.ts';

let inst: TestCustos;
let fx: Fixture;
let agent: Agent;
let person: Awaited<ReturnType<typeof Client.signup>>;

test.before(async () => {
  inst = await startCustos('sqlite');
  fx = await createFixture();
  person = await Client.signup(inst.url);
  const cred = await person.client.post(`/workspaces/${person.workspaceId}/credentials`, {
    name: 'shop-db', service: 'custom', authScheme: 'database', secret: { dsn: fx.dsn },
  });
  if (cred.status !== 201) throw new Error(cred.text);
  const tok = await person.client.post('/tokens/agent', { name: 'analyst', tools: ['list_services', 'query_db'], methods: ['GET'] });
  agent = await connectAgent(inst.url, tok.body.token);
});
test.after.always(async () => {
  await agent?.close();
  await inst?.close();
  await fx?.teardown();
});

test.serial('Free plan: query_db is refused with CUSTOS_ERR_PLAN_LIMIT naming the plans that enable it', async (t) => {
  const r = await agent.call('query_db', { service: 'shop-db', sql: 'SELECT 1' });
  t.true(r.isError);
  t.regex(r.text, /CUSTOS_ERR_PLAN_LIMIT: query_db is not available on the Free plan; it is enabled on Pro and Team/);
});

test.serial('Pro plan: rows come back masked; the credential shows host/user but never the password', async (t) => {
  t.is(await adminCommand(['set-plan', person.email, 'pro'], { CUSTOS_DATA_DIR: inst.dataDir }), 0);
  const list = await agent.call('list_services');
  const svc = list.structured.services.find((s: any) => s.name === 'shop-db');
  t.is(svc.config.user, fx.role);
  t.is(svc.config.host, '127.0.0.1');
  t.false(list.text.includes(fx.marker));
  const r = await agent.call('query_db', { service: 'shop-db', sql: 'SELECT name, email, lower(email) AS x, card FROM users ORDER BY id' });
  t.false(r.isError, r.text);
  const s = r.structured;
  t.deepEqual(s.columns.map((c: any) => c.name), ['name', 'email', 'x', 'card']);
  t.is(s.rowCount, 3);
  t.is(s.rows[0][0], 'Jane Roe');
  t.not(s.rows[0][1], 'jane.roe@example.com');
  t.not(s.rows[0][2], 'jane.roe@example.com', 'an alias does not escape masking');
  t.false(r.text.includes('jane.roe@example.com'));
  t.false(r.text.includes('4242 4242 4242 4242'));
  t.true(s.masked.columns.includes('email'));
  t.true(s.masked.values > 0);
  const json = await agent.call('query_db', { service: 'shop-db', sql: 'SELECT row_to_json(u) AS j FROM users u WHERE id = $1', params: [1] });
  t.false(json.isError, json.text);
  for (const pii of ['jane.roe@example.com', '123-45-6789', 'sk_live_51HxYzAbCdEfGhIjKlMn', 'hunter2', '192.168.10.20']) t.false(json.text.includes(pii), pii);
});

test.serial('writes, multiple statements and lock games are refused and change nothing', async (t) => {
  const before = await fx.snapshot();
  for (const sql of ['DELETE FROM users', 'SELECT 1; DELETE FROM users', 'COMMIT; DELETE FROM users', 'WITH d AS (DELETE FROM users RETURNING *) SELECT * FROM d',
    "SELECT set_config('transaction_read_only','off',false)", 'CALL purge_users()', 'SELECT pg_advisory_lock(1)']) {
    const r = await agent.call('query_db', { service: 'shop-db', sql });
    t.true(r.isError, sql);
    t.regex(r.text, /CUSTOS_ERR_SQL_REFUSED/, sql);
  }
  t.is(await fx.snapshot(), before);
});

test.serial('huge results are capped; the DSN password appears in no result, error, log or audit entry', async (t) => {
  const big = await agent.call('query_db', { service: 'shop-db', sql: 'SELECT g FROM generate_series(1, 100000) g', max_rows: 50 });
  t.false(big.isError, big.text);
  t.is(big.structured.rows.length, 50);
  t.true(big.structured.truncated);
  const err = await agent.call('query_db', { service: 'shop-db', sql: 'SELECT * FROM no_such_table' });
  t.true(err.isError);
  t.regex(err.text, /CUSTOS_ERR_DATABASE|42P01/);
  t.false(err.text.includes(fx.marker));
  const audit = await person.client.get(`/workspaces/${person.workspaceId}/audit/export`);
  t.false(audit.text.includes(fx.marker));
  const entries = audit.text.trim().split('\n').map((l) => JSON.parse(l)).filter((e) => e.action === 'mcp.query_db');
  const ok = entries.find((e) => e.outcome === 'success' && e.details.sql.includes('row_to_json'));
  t.truthy(ok);
  t.is(ok.details.paramCount, 1);
  t.false(JSON.stringify(ok).includes('"params"'), 'parameter values are not recorded');
  t.truthy(entries.find((e) => e.outcome === 'denied' && e.details.code === 'CUSTOS_ERR_SQL_REFUSED'));
  t.truthy(entries.find((e) => e.outcome === 'denied' && e.details.code === 'CUSTOS_ERR_PLAN_LIMIT'));
  await inst.custos.auditLog.flush();
  t.false(inst.logs.text().includes(fx.marker));
});
