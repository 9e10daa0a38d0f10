/**
 * Marker secrets, one per secret kind, stored through the API and then used, listed, patched,
 * replaced, revealed and refused, must never come out anywhere except the one reveal answer:
 * not in an API or MCP answer, an error, a captured log line, the audit export, the raw bytes of the
 * SQLite files (custos.sqlite, -wal, -shm) or a full pg_dump of the PostgreSQL database.
 */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, DB_KINDS, startCustos, type Res, type TestCustos, perDatabase } from '../support/custos.ts';
import { connectAgent } from '../support/mcp.ts';

// The shared upstream reflects everything it receives, token endpoint included: the worst case.
const env = perDatabase(test, { upstream: true });
const keyDir = mkdtempSync(path.join(tmpdir(), 'custos-leak-keys-'));

test.after.always(async () => {
  rmSync(keyDir, { recursive: true, force: true });
});

/** A Client that keeps every answer it got (status, headers and body) for scanning. */
class RecordingClient extends Client {
  readonly seen: string[] = [];
  override async request<T = any>(method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<Res<T>> {
    const r = await super.request<T>(method, p, body, headers);
    this.seen.push(`${method} ${p} ${r.status} ${JSON.stringify([...r.headers])} ${r.text}`);
    return r;
  }
}

function m(tag: string): string {
  return `MARKER-${tag}-${randomBytes(10).toString('hex')}`;
}

/** A passphrase-protected ed25519 key from ssh-keygen, and the PEM lines that carry its private part. */
function protectedKey(passphrase: string): { pem: string; privateLines: string[] } {
  const file = path.join(keyDir, `k-${randomBytes(4).toString('hex')}`);
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', passphrase, '-C', 'leak@custos', '-f', file]);
  const pem = readFileSync(file, 'utf8');
  const body = pem.split('\n').filter((l) => l && !l.startsWith('-----'));
  // The first lines hold the cipher/KDF names, salt and public key (public on purpose); the rest is
  // the encrypted private section, unique to this key.
  return { pem, privateLines: body.slice(3).filter((l) => l.length >= 16) };
}

for (const db of DB_KINDS) {
  const inst = (): TestCustos => env.get(db);

  test(`[${db}] marker secrets of every kind never appear in answers, errors, logs, audit export or the stored bytes`, async (t) => {
    const i = inst();
    const person = new RecordingClient(`${i.url}/api/v1`);
    const signup = await person.post('/auth/signup', { email: `leak-${randomBytes(4).toString('hex')}@example.com`, password: 'correct horse battery staple' });
    t.is(signup.status, 201);
    const ws = signup.body.workspace.id as string;

    const bearerV1 = m('bearer1');
    const bearerV2 = m('bearer2');
    const sigv4Secret = m('sigv4');
    const oauthSecret = m('oauthcs');
    const oauthRefresh = m('oauthrt');
    const dbPassword = m('dbpw');
    const sshPass = m('sshpass');
    const key = protectedKey(sshPass);
    const markers = [bearerV1, bearerV2, sigv4Secret, oauthSecret, oauthRefresh, dbPassword, sshPass, ...key.privateLines];
    t.true(key.privateLines.length >= 2);

    const mk = async (body: Record<string, unknown>): Promise<string> => {
      const r = await person.post(`/workspaces/${ws}/credentials`, body);
      t.is(r.status, 201, r.text);
      return r.body.credential.id as string;
    };
    const bearerId = await mk({ name: 'leak-bearer', service: 'custom', authScheme: 'bearer', baseUrl: `${env.upstream.url}/b`, secret: { value: bearerV1 } });
    const sigId = await mk({
      name: 'leak-sigv4', service: 'custom', authScheme: 'sigv4', baseUrl: `${env.upstream.url}/s3`, config: { region: 'eu-west-1', service: 's3' },
      secret: { accessKeyId: 'AKIALEAKTEST', secretAccessKey: sigv4Secret },
    });
    const oauthId = await mk({
      name: 'leak-oauth', service: 'custom', authScheme: 'oauth2', baseUrl: `${env.upstream.url}/api`, config: { tokenUrl: `${env.upstream.url}/token` },
      secret: { clientId: 'leak-client', clientSecret: oauthSecret, refreshToken: oauthRefresh },
    });
    const dbId = await mk({ name: 'leak-db', service: 'postgresql', secret: { dsn: `postgres://reader:${dbPassword}@127.0.0.1:5432/nowhere` } });
    const sshId = await mk({ name: 'leak-ssh', service: 'custom', authScheme: 'ssh', secret: { privateKey: key.pem, passphrase: sshPass } });

    // Everyday reads and edits.
    await person.get(`/workspaces/${ws}/credentials`);
    for (const id of [bearerId, sigId, oauthId, dbId, sshId]) {
      await person.get(`/credentials/${id}`);
      await person.patch(`/credentials/${id}`, { name: `renamed-${id.slice(0, 8)}` });
    }
    await person.put(`/credentials/${bearerId}/secret`, { secret: { value: bearerV2 } });
    // Refusals that carry a marker in the input: the error must not echo it.
    const refused = [
      await person.put(`/credentials/${bearerId}/secret`, { secret: { value: `${bearerV1} with a space` } }),
      await person.put(`/credentials/${dbId}/secret`, { secret: { dsn: `postgres://reader:${dbPassword}@host:badport/x` } }),
      await person.put(`/credentials/${sshId}/secret`, { secret: { privateKey: key.pem, passphrase: `${sshPass}-wrong` } }),
      await person.put(`/credentials/${sigId}/secret`, { secret: { accessKeyId: 'AKIA', secretAccessKey: sigv4Secret, bogus: oauthRefresh } }),
    ];
    for (const r of refused) t.is(r.body.error.code, 'CUSTOS_ERR_VALIDATION', r.text);
    t.is((await person.post(`/credentials/${sshId}/reveal`)).status, 403);
    // Reveal is the one door out: it answers the value; that answer is the only place it may appear.
    const revealed = await new Client(`${i.url}/api/v1`).request('POST', `/credentials/${sigId}/reveal`, {}, { cookie: person.cookie, 'x-csrf-token': person.csrf });
    t.is(revealed.body.secret.secretAccessKey, sigv4Secret);

    // Uses: call_api through MCP (the upstream echoes the credential back), and an SSH signature.
    const tok = await person.post('/tokens/agent', { name: 'leaky-agent', tools: ['list_services', 'call_api'], methods: ['GET', 'POST'] });
    const agent = await connectAgent(i.url, tok.body.token);
    const mcpTexts: string[] = [];
    try {
      for (const [service, p] of [[bearerId, '/echo'], [sigId, '/bucket/key'], [oauthId, '/me'], [dbId, '/nope']] as const) {
        const r = await agent.call('call_api', { service, method: 'GET', path: p });
        mcpTexts.push(r.text, JSON.stringify(r.structured ?? null));
      }
      mcpTexts.push(JSON.stringify((await agent.call('list_services')).structured));
    } finally {
      await agent.close();
    }
    t.truthy(env.upstream.received.find((r) => r.headers.authorization === `Bearer ${bearerV2}`), 'the bearer really was used');
    t.truthy(env.upstream.received.find((r) => r.url === '/token' && r.body.toString().includes(encodeURIComponent(oauthRefresh))), 'the refresh token really was used');
    const sshTok = await person.post('/tokens/ssh', { name: 'leak-ssh', workspaceId: ws });
    t.is(sshTok.status, 201, sshTok.text);
    const sshClient = new RecordingClient(`${i.url}/api/v1`);
    const ids = await sshClient.post('/ssh/identities', {}, { authorization: `Bearer ${sshTok.body.token}` });
    t.is(ids.status, 200, ids.text);
    const sig = await sshClient.post('/ssh/sign', { keyBlob: ids.body.identities[0].keyBlob, data: Buffer.from('sign me').toString('base64') }, { authorization: `Bearer ${sshTok.body.token}` });
    t.is(sig.status, 200, sig.text);

    // Now look everywhere.
    await i.custos.auditLog.flush();
    const exp = await person.get(`/workspaces/${ws}/audit/export`);
    t.is(exp.status, 200);
    const places: Record<string, string> = {
      'API answers': person.seen.join('\n'),
      'SSH API answers': sshClient.seen.join('\n'),
      'MCP results': mcpTexts.join('\n'),
      'log lines': i.logs.text(),
      'audit export': exp.text,
    };
    t.true(places['log lines']!.length > 1000, 'the logs were really captured');
    for (const [where, text] of Object.entries(places)) {
      for (const mk2 of markers) t.false(text.includes(mk2), `${where} must not contain ${mk2.slice(0, 16)}…`);
    }
    if (db === 'sqlite') {
      const files = readdirSync(i.dataDir).filter((f) => f.startsWith('custos.sqlite'));
      t.true(files.includes('custos.sqlite'));
      for (const f of files) {
        const bytes = readFileSync(path.join(i.dataDir, f));
        for (const mk2 of markers) t.false(bytes.includes(Buffer.from(mk2)), `${f} must not contain ${mk2.slice(0, 16)}…`);
      }
    } else {
      const dump = execFileSync('pg_dump', ['--no-owner', i.pgUrl!], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
      t.regex(dump, /COPY public\.credentials/, 'the dump holds the credentials table');
      t.true(dump.includes(bearerId), 'and its rows');
      for (const mk2 of markers) t.false(dump.includes(mk2), `pg_dump must not contain ${mk2.slice(0, 16)}…`);
    }
  });
}
