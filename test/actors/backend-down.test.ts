/**
 * Key backend down, through the real service: a Custos whose PKCS#11 PIN file is wrong (real
 * SoftHSM2 token, its own per this file) and a Custos whose KMS stand-in is stopped answer every
 * secret use with a 503 CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE, never with plaintext from anywhere
 * else, and recover by themselves on the next call once the backend is back.
 *
 * Serial: one SoftHSM token per process, shared login state.
 */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createCustos, type Custos } from '../../src/compose.ts';
import { loadConfig, type DeepPartial } from '../../src/config/loader.ts';
import type { Config } from '../../src/config/schema.ts';
import { createLogger } from '../../src/log.ts';
import { Client, LogCapture, startCustos } from '../support/custos.ts';
import { startKmsStandIn } from '../support/kms-standin.ts';
import { connectAgent } from '../support/mcp.ts';
import { createSoftHsmToken, pkcs11ConfigFor } from '../support/softhsm.ts';
import { startUpstream } from '../support/upstream.ts';

let upstream: Awaited<ReturnType<typeof startUpstream>>;
test.before(async () => {
  upstream = await startUpstream();
});
test.after.always(async () => {
  await upstream?.close();
});

/** A Custos on a given data dir (SQLite), kept when it closes so a second instance can reopen it. */
async function openOn(dataDir: string, overrides: DeepPartial<Config>): Promise<{ custos: Custos; url: string; logs: LogCapture }> {
  const config = loadConfig({}, { ...overrides, dataDir, server: { port: 0 }, database: { url: null }, auth: { scryptCost: 16384 }, log: { level: 'debug' } } as DeepPartial<Config>);
  const logs = new LogCapture();
  const custos = await createCustos(config, { log: createLogger({ level: 'debug', destination: logs }) });
  const { url } = await custos.listen();
  return { custos, url, logs };
}

/** The same browser session, pointed at another instance on the same database. */
function sameSession(from: Client, url: string): Client {
  const c = new Client(`${url}/api/v1`);
  c.cookie = from.cookie;
  c.csrf = from.csrf;
  return c;
}

test.serial('pkcs11 with a wrong PIN file: 503 CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE, no plaintext fallback; fixing the PIN file makes the next call work', async (t) => {
  const token = await createSoftHsmToken();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'custos-pkcs11-down-'));
  const keys = {
    backend: 'pkcs11' as const,
    pkcs11: pkcs11ConfigFor(token),
  };
  try {
    // A healthy node creates the data.
    const a = await openOn(dataDir, { keys });
    const p = await Client.signup(a.url);
    const value = `MARKER-hsm-${randomBytes(8).toString('hex')}`;
    const cred = await p.client.post(`/workspaces/${p.workspaceId}/credentials`, { name: 'hsm', service: 'custom', authScheme: 'bearer', baseUrl: `${upstream.url}/h`, secret: { value } });
    t.is(cred.status, 201, cred.text);
    const id = cred.body.credential.id as string;
    t.is(a.custos.backend.id, 'pkcs11:custos-kek-v1');
    const tok = await p.client.post('/tokens/agent', { name: 'a', tools: ['call_api'], methods: ['GET'] });
    await a.custos.close(); // closes every session: the token is logged out

    // The node restarts with a wrong PIN in its PIN file.
    const badPin = `MARKER-pin-${randomBytes(6).toString('hex')}`;
    writeFileSync(token.pinFile, `${badPin}\n`, { mode: 0o600 });
    const b = await openOn(dataDir, { keys });
    try {
      t.regex(b.logs.text(), /not reachable yet/, 'start-up logged the outage and kept going');
      const client = sameSession(p.client, b.url);
      const rev = await client.post(`/credentials/${id}/reveal`);
      t.is(rev.status, 503);
      t.is(rev.body.error.code, 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE');
      t.false(rev.text.includes(value));
      const agent = await connectAgent(b.url, tok.body.token);
      const before = upstream.received.length;
      try {
        const call = await agent.call('call_api', { service: id, method: 'GET', path: '/down' });
        t.true(call.isError);
        t.regex(call.text, /CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE/);
        t.is(upstream.received.length, before, 'nothing went upstream');
        const ws = await client.post('/workspaces', { name: 'while-down' });
        t.is(ws.status, 503, 'a new workspace cannot get a DEK either');
        t.is((await client.get('/workspaces')).body.workspaces.length, 1, 'and nothing half-made was left');

        // The operator fixes the PIN file; no restart.
        writeFileSync(token.pinFile, `${token.pin}\n`, { mode: 0o600 });
        const ok = await client.post(`/credentials/${id}/reveal`);
        t.is(ok.status, 200, ok.text);
        t.deepEqual(ok.body.secret, { value });
        const call2 = await agent.call('call_api', { service: id, method: 'GET', path: '/back' });
        t.false(call2.isError, call2.text);
        t.is(upstream.received.find((r) => r.url === '/h/back')?.headers.authorization, `Bearer ${value}`);
      } finally {
        await agent.close();
      }
      const audit = await b.custos.auditLog.list(`ws:${p.workspaceId}`, { limit: 20 });
      t.truthy(audit.find((e) => e.action === 'credential.reveal' && e.outcome === 'failure' && e.details.code === 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE'));
      await b.custos.auditLog.flush();
      for (const text of [b.logs.text(), a.logs.text(), rev.text]) {
        t.false(text.includes(badPin), 'the PIN is never logged or returned');
        t.false(text.includes(token.pin));
        t.false(text.includes(value));
      }
    } finally {
      await b.custos.close();
    }
  } finally {
    await token.cleanup();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.serial('KMS stand-in stopped: active actors keep serving, a cold activation gets 503, and it works again once KMS is back', async (t) => {
  const kms = await startKmsStandIn();
  const env = { AWS_ACCESS_KEY_ID: 'AKIAFAKEFAKEFAKE', AWS_SECRET_ACCESS_KEY: 'fake-secret-for-the-stand-in' };
  const inst = await startCustos('sqlite', { keys: { backend: 'aws-kms', awsKms: { keyId: kms.keyId, region: 'us-east-1', endpoint: kms.endpoint } } }, env);
  try {
    const p = await Client.signup(inst.url);
    const value = `MARKER-kms-${randomBytes(8).toString('hex')}`;
    const cred = await p.client.post(`/workspaces/${p.workspaceId}/credentials`, { name: 'kms', service: 'custom', authScheme: 'bearer', baseUrl: `${upstream.url}/k`, secret: { value } });
    t.is(cred.status, 201, cred.text);
    const id = cred.body.credential.id as string;
    t.true(kms.requests.some((r) => r.encryptionContext !== undefined), 'the DEK was wrapped by KMS with an encryption context');
    const tok = await p.client.post('/tokens/agent', { name: 'a', tools: ['call_api'], methods: ['GET'] });
    const agent = await connectAgent(inst.url, tok.body.token);
    try {
      await kms.stop();
      // An active actor needs no KMS call per use.
      t.deepEqual((await p.client.post(`/credentials/${id}/reveal`)).body.secret, { value });
      // A cold one cannot activate.
      await inst.custos.actors.forget(p.workspaceId);
      const rev = await p.client.post(`/credentials/${id}/reveal`);
      t.is(rev.status, 503);
      t.is(rev.body.error.code, 'CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE');
      t.false(rev.text.includes(value));
      const before = upstream.received.length;
      const call = await agent.call('call_api', { service: id, method: 'GET', path: '/down' });
      t.true(call.isError);
      t.regex(call.text, /CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE/);
      t.is(upstream.received.length, before, 'nothing went upstream');
      t.is(inst.custos.actors.peek(p.workspaceId), undefined, 'no actor without a DEK');

      await kms.start();
      t.deepEqual((await p.client.post(`/credentials/${id}/reveal`)).body.secret, { value });
      const call2 = await agent.call('call_api', { service: id, method: 'GET', path: '/back' });
      t.false(call2.isError, call2.text);
      t.is(upstream.received.find((r) => r.url === '/k/back')?.headers.authorization, `Bearer ${value}`);
    } finally {
      await agent.close();
    }
    await inst.custos.auditLog.flush();
    t.false(inst.logs.text().includes(value));
  } finally {
    await inst.close();
    await kms.stop().catch(() => undefined);
  }
});
