import test from 'ava';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { Client, DB_KINDS, startCustos, type TestCustos, perDatabase } from '../support/custos.ts';

const env = perDatabase(test);

for (const db of DB_KINDS) {
  const inst = (): TestCustos => env.get(db);

  test(`[${db}] sign-up creates an account, a Free organization and a default workspace, and a session`, async (t) => {
    const client = new Client(`${inst().url}/api/v1`);
    const r = await client.post('/auth/signup', { email: 'Ada@Example.com', password: 'correct horse battery staple' });
    t.is(r.status, 201);
    t.is(r.body.account.email, 'ada@example.com');
    t.is(r.body.organization.plan, 'free');
    t.is(r.body.workspace.name, 'Default');
    t.deepEqual(r.body.workspace.permissions, ['read', 'write', 'use', 'reveal', 'manage']);
    t.truthy(r.body.csrfToken);
    const cookie = r.headers.get('set-cookie')!;
    t.regex(cookie, /custos_session=/);
    t.regex(cookie, /httponly/i);
    t.regex(cookie, /samesite=strict/i);
    t.notRegex(cookie, /secure/i, 'plain http: no Secure flag (the browser would drop the cookie)');
    const me = await client.get('/me');
    t.is(me.status, 200);
    t.is(me.body.organization.id, r.body.organization.id);
    const list = await client.get('/workspaces');
    t.deepEqual(list.body.workspaces.map((w: { name: string }) => w.name), ['Default']);
    // The stored password is a scrypt hash, never the password.
    const row = await inst().custos.store.read.findAccountByEmail('ada@example.com');
    t.regex(row!.password_hash, /^scrypt\$16384\$8\$1\$/);
    t.false(row!.password_hash.includes('correct horse'));
  });

  test(`[${db}] duplicate sign-up is refused with CUSTOS_ERR_CONFLICT`, async (t) => {
    const { email } = await Client.signup(inst().url);
    const r = await new Client(`${inst().url}/api/v1`).post('/auth/signup', { email, password: 'another long password' });
    t.is(r.status, 409);
    t.is(r.body.error.code, 'CUSTOS_ERR_CONFLICT');
  });

  test(`[${db}] login and logout: the session cookie stops working after logout`, async (t) => {
    const { email, password } = await Client.signup(inst().url);
    const c = new Client(`${inst().url}/api/v1`);
    t.is((await c.get('/me')).status, 401);
    const login = await c.post('/auth/login', { email, password });
    t.is(login.status, 200);
    t.truthy(login.body.csrfToken);
    t.is((await c.get('/me')).status, 200);
    const oldCookie = c.cookie;
    t.is((await c.post('/auth/logout')).status, 204);
    c.cookie = oldCookie; // a stolen copy of the cookie is dead too
    const after = await c.get('/me');
    t.is(after.status, 401);
    t.is(after.body.error.code, 'CUSTOS_ERR_UNAUTHENTICATED');
  });

  test(`[${db}] session cookie is Secure behind a TLS proxy`, async (t) => {
    const proxied = await startCustos(db, { server: { trustProxy: true } as never });
    try {
      const r = await fetch(`${proxied.url}/api/v1/auth/signup`, {
        method: 'POST', headers: { 'content-type': 'application/json', 'x-forwarded-proto': 'https' },
        body: JSON.stringify({ email: 'tls@example.com', password: 'correct horse battery staple' }),
      });
      t.is(r.status, 201);
      t.regex(r.headers.get('set-cookie')!, /;\s*secure/i);
    } finally {
      await proxied.close();
    }
  });

  test(`[${db}] CSRF: state changes without the session's token are refused and change nothing`, async (t) => {
    const { client } = await Client.signup(inst().url);
    const missing = await client.post('/workspaces', { name: 'csrf-missing' }, { 'x-csrf-token': '' });
    t.is(missing.status, 403);
    t.is(missing.body.error.code, 'CUSTOS_ERR_CSRF');
    const wrong = await client.post('/workspaces', { name: 'csrf-wrong' }, { 'x-csrf-token': 'A'.repeat(43) });
    t.is(wrong.body.error.code, 'CUSTOS_ERR_CSRF');
    const foreignOrigin = await client.post('/workspaces', { name: 'csrf-origin' }, { origin: 'https://evil.example' });
    t.is(foreignOrigin.status, 403);
    t.is(foreignOrigin.body.error.code, 'CUSTOS_ERR_ORIGIN_REFUSED');
    const list = await client.get('/workspaces');
    t.deepEqual(list.body.workspaces.map((w: { name: string }) => w.name), ['Default']);
    const ok = await client.post('/workspaces', { name: 'csrf-ok' }, { origin: new URL(inst().url).origin });
    t.is(ok.status, 201);
  });

  test(`[${db}] login failures are audited and rate-limited per account`, async (t) => {
    const { email, password, orgId } = await Client.signup(inst().url);
    const c = new Client(`${inst().url}/api/v1`);
    for (let i = 0; i < 5; i++) {
      const r = await c.post('/auth/login', { email, password: 'wrong password!' });
      t.is(r.status, 401);
      t.is(r.body.error.code, 'CUSTOS_ERR_UNAUTHENTICATED');
    }
    const limited = await c.post('/auth/login', { email, password });
    t.is(limited.status, 429, 'even the right password is refused while throttled');
    t.is(limited.body.error.code, 'CUSTOS_ERR_RATE_LIMITED');
    const entries = await inst().custos.auditLog.list(`org:${orgId}`, { limit: 50 });
    const logins = entries.filter((e) => e.action === 'auth.login');
    t.is(logins.filter((e) => e.details.reason === 'bad credentials').length, 5);
    t.is(logins.filter((e) => e.details.reason === 'rate limited').length, 1);
    t.false(JSON.stringify(entries).includes('wrong password'));
  });

  test(`[${db}] unknown account and wrong password get the same answer`, async (t) => {
    const { email } = await Client.signup(inst().url);
    const c = new Client(`${inst().url}/api/v1`);
    const a = await c.post('/auth/login', { email: 'nobody-here@example.com', password: 'whatever it is' });
    const b = await c.post('/auth/login', { email, password: 'whatever it is' });
    t.is(a.status, b.status);
    t.deepEqual(a.body, b.body);
  });

  test(`[${db}] bad input gets the documented 4xx codes and changes nothing`, async (t) => {
    const { client } = await Client.signup(inst().url);
    const base = `${inst().url}/api/v1`;
    const raw = (body: string, headers: Record<string, string>) => fetch(`${base}/workspaces`, {
      method: 'POST', body, headers: { cookie: client.cookie, 'x-csrf-token': client.csrf, ...headers },
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as { error: { code: string } } }));
    const cases: Array<[string, Promise<{ status: number; body: { error: { code: string } } }>, number, string]> = [
      ['malformed JSON', raw('{"name":', { 'content-type': 'application/json' }), 400, 'CUSTOS_ERR_MALFORMED_JSON'],
      ['wrong type', raw('{"name": 42}', { 'content-type': 'application/json' }), 400, 'CUSTOS_ERR_VALIDATION'],
      ['unknown field', raw('{"name":"x","admin":true}', { 'content-type': 'application/json' }), 400, 'CUSTOS_ERR_VALIDATION'],
      ['empty name', raw('{"name":"   "}', { 'content-type': 'application/json' }), 400, 'CUSTOS_ERR_VALIDATION'],
      ['not JSON media type', raw('name=x', { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'CUSTOS_ERR_UNSUPPORTED_MEDIA_TYPE'],
      ['oversize body', raw(JSON.stringify({ name: 'x'.repeat(70_000) }), { 'content-type': 'application/json' }), 413, 'CUSTOS_ERR_BODY_TOO_LARGE'],
    ];
    for (const [what, p, status, code] of cases) {
      const r = await p;
      t.is(r.status, status, what);
      t.is(r.body.error.code, code, what);
    }
    const unknownRoute = await client.get('/no-such-thing');
    t.is(unknownRoute.status, 404);
    t.is(unknownRoute.body.error.code, 'CUSTOS_ERR_NOT_FOUND');
    const list = await client.get('/workspaces');
    t.is(list.body.workspaces.length, 1, 'nothing was created by any bad request');
  });

  test(`[${db}] data files are owner-only (0700 directory, 0600 files)`, async (t) => {
    await Client.signup(env.get(db).url);
    const dir = env.get(db).dataDir;
    t.is(statSync(dir).mode & 0o777, 0o700);
    for (const f of readdirSync(dir)) t.is(statSync(path.join(dir, f)).mode & 0o777, 0o600, f);
  });

  test(`[${db}] health and readiness answer`, async (t) => {
    t.deepEqual(await (await fetch(`${inst().url}/healthz`)).json(), { status: 'ok' });
    t.deepEqual(await (await fetch(`${inst().url}/readyz`)).json(), { status: 'ready' });
  });
}
