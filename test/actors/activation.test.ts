/**
 * Workspace actors inside the real service (SQLite, local-dev key backend): single-flight activation,
 * zero key-backend calls in steady state, passivation and shutdown zero the DEK, the secret Buffers a
 * kind is handed are zero once the call returns, and the mailbox discipline (per-workspace use cap;
 * lifecycle messages wait for in-flight uses and run alone).
 *
 * Serial: the key-backend counters are per instance and the kind spies are per process.
 */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { bearerKind } from '../../src/kinds/bearer/index.ts';
import { sshKind } from '../../src/kinds/ssh/index.ts';
import type { OutboundRequest, SecretFields } from '../../src/kinds/credential-kind.ts';
import { Client, startCustos, type TestCustos } from '../support/custos.ts';
import { connectAgent, type Agent } from '../support/mcp.ts';
import { startUpstream, type Received } from '../support/upstream.ts';
import type { ServerResponse } from 'node:http';

let main: TestCustos;
let upstream: Awaited<ReturnType<typeof startUpstream>>;
const keyDir = mkdtempSync(path.join(tmpdir(), 'custos-actor-keys-'));

/** Upstream behaviour: echo, or hold each request `delayMs` while counting how many are in flight. */
const slow = { delayMs: 0, inFlight: 0, maxInFlight: 0, events: [] as string[] };
function handler(req: Received, res: ServerResponse): void {
  slow.inFlight += 1;
  slow.maxInFlight = Math.max(slow.maxInFlight, slow.inFlight);
  slow.events.push(`start:${req.url}`);
  setTimeout(() => {
    slow.inFlight -= 1;
    slow.events.push(`end:${req.url}`);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ url: req.url }));
  }, slow.delayMs);
}

test.before(async () => {
  upstream = await startUpstream(handler);
  main = await startCustos('sqlite');
});
test.after.always(async () => {
  await main?.close();
  await upstream?.close();
  rmSync(keyDir, { recursive: true, force: true });
});

type Person = Awaited<ReturnType<typeof Client.signup>>;

async function bearer(i: TestCustos, p: Person, name: string, value: string): Promise<string> {
  const r = await p.client.post(`/workspaces/${p.workspaceId}/credentials`, { name, service: 'custom', authScheme: 'bearer', baseUrl: `${upstream.url}/a`, secret: { value } });
  if (r.status !== 201) throw new Error(`${i.url}: ${r.text}`);
  return r.body.credential.id as string;
}

async function agentFor(i: TestCustos, p: Person): Promise<Agent> {
  const tok = await p.client.post('/tokens/agent', { name: `a-${randomBytes(3).toString('hex')}`, tools: ['call_api'], methods: ['GET'] });
  if (tok.status !== 201) throw new Error(tok.text);
  return connectAgent(i.url, tok.body.token);
}

const allZero = (b: Buffer): boolean => b.every((x) => x === 0);

async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

test.serial('100 concurrent first calls to a passivated workspace cause exactly one unwrap, and all succeed', async (t) => {
  const p = await Client.signup(main.url);
  const value = `sf-${randomBytes(8).toString('hex')}`;
  const id = await bearer(main, p, 'single-flight', value);
  const agent = await agentFor(main, p);
  try {
    await main.custos.actors.forget(p.workspaceId);
    t.is(main.custos.actors.peek(p.workspaceId), undefined, 'passivated');
    const unwraps = main.custos.backend.stats.unwraps;
    const activations = main.custos.actors.stats.activations;
    // 80 reveals over HTTP and 20 call_api over MCP, all launched before any can finish.
    const reveals = Array.from({ length: 80 }, () => p.client.post(`/credentials/${id}/reveal`));
    const calls = Array.from({ length: 20 }, (_, k) => agent.call('call_api', { service: id, method: 'GET', path: `/sf-${k}` }));
    const [r, c] = await Promise.all([Promise.all(reveals), Promise.all(calls)]);
    for (const x of r) t.deepEqual(x.body.secret, { value });
    for (const x of c) t.false(x.isError, x.text);
    t.is(main.custos.backend.stats.unwraps - unwraps, 1, 'one unwrap for 100 first calls');
    t.is(main.custos.actors.stats.activations - activations, 1);

    // The same at the actor-system seam, where the 100 calls certainly overlap (same tick).
    await main.custos.actors.forget(p.workspaceId);
    const u2 = main.custos.backend.stats.unwraps;
    const actors = await Promise.all(Array.from({ length: 100 }, () => main.custos.actors.actor(p.workspaceId)));
    t.is(new Set(actors).size, 1, 'every caller got the same actor');
    t.is(main.custos.backend.stats.unwraps - u2, 1);
  } finally {
    await agent.close();
  }
});

test.serial('steady state: 200 uses of an active actor make zero key-backend calls', async (t) => {
  const p = await Client.signup(main.url);
  const value = `ss-${randomBytes(8).toString('hex')}`;
  const id = await bearer(main, p, 'steady', value);
  const agent = await agentFor(main, p);
  try {
    t.deepEqual((await p.client.post(`/credentials/${id}/reveal`)).body.secret, { value }); // activated
    const before = { ...main.custos.backend.stats };
    const activations = main.custos.actors.stats.activations;
    let uses = 0;
    for (let batch = 0; batch < 6; batch += 1) {
      const r = await Promise.all(Array.from({ length: 25 }, () => p.client.post(`/credentials/${id}/reveal`)));
      for (const x of r) t.is(x.status, 200);
      uses += r.length;
    }
    for (let batch = 0; batch < 5; batch += 1) {
      const c = await Promise.all(Array.from({ length: 10 }, (_, k) => agent.call('call_api', { service: id, method: 'GET', path: `/ss-${batch}-${k}` })));
      for (const x of c) t.false(x.isError, x.text);
      uses += c.length;
    }
    t.is(uses, 200);
    t.deepEqual({ ...main.custos.backend.stats }, before, '0 wraps and 0 unwraps per steady-state use');
    t.is(main.custos.actors.stats.activations, activations);
  } finally {
    await agent.close();
  }
});

test.serial('the secret Buffers handed to a kind are all zero once the call returns (inject, sign, and a direct use)', async (t) => {
  const p = await Client.signup(main.url);
  const value = `zb-${randomBytes(8).toString('hex')}`;
  const id = await bearer(main, p, 'zero-buffers', value);
  const kept: Buffer[] = [];
  const seenDuring: string[] = [];
  const origInject = bearerKind.inject;
  bearerKind.inject = async (req: OutboundRequest, secret: SecretFields, config, ctx) => {
    for (const b of Object.values(secret)) {
      kept.push(b);
      seenDuring.push(b.toString('utf8'));
    }
    const injected = await origInject(req, secret, config, ctx);
    kept.push(...injected);
    return injected;
  };
  const agent = await agentFor(main, p);
  try {
    const r = await agent.call('call_api', { service: id, method: 'GET', path: '/zero' });
    t.false(r.isError, r.text);
  } finally {
    bearerKind.inject = origInject;
    await agent.close();
  }
  t.deepEqual(seenDuring, [value], 'the kind saw the real value during the call');
  t.true(kept.length >= 2, 'the secret field and what was injected');
  for (const b of kept) t.true(allZero(b), 'zero after the call');

  // ssh sign through the SSH API.
  const file = path.join(keyDir, 'signer');
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'zero@custos', '-f', file]);
  const sshCred = await p.client.post(`/workspaces/${p.workspaceId}/credentials`, { name: 'signer', service: 'custom', authScheme: 'ssh', secret: { privateKey: readFileSync(file, 'utf8') } });
  t.is(sshCred.status, 201, sshCred.text);
  const keptSsh: Buffer[] = [];
  const origSign = sshKind.sign;
  sshKind.sign = (secret, config, data, flags, ctx) => {
    for (const b of Object.values(secret)) keptSsh.push(b);
    t.false(keptSsh.some(allZero), 'live during the call');
    return origSign(secret, config, data, flags, ctx);
  };
  try {
    const tok = await p.client.post('/tokens/ssh', { name: 'zero', workspaceId: p.workspaceId });
    const auth = { authorization: `Bearer ${tok.body.token}` };
    const ssh = new Client(`${main.url}/api/v1`);
    const ids = await ssh.post('/ssh/identities', {}, auth);
    const sig = await ssh.post('/ssh/sign', { keyBlob: ids.body.identities[0].keyBlob, data: Buffer.from('data').toString('base64') }, auth);
    t.is(sig.status, 200, sig.text);
  } finally {
    sshKind.sign = origSign;
  }
  t.true(keptSsh.length >= 1);
  for (const b of keptSsh) t.true(allZero(b), 'the private key Buffer is zero after signing');

  // A direct use at the actor seam, on success and when the kind throws.
  const row = (await main.custos.store.read.findCredential(id))!;
  const actor = await main.custos.actors.actor(p.workspaceId);
  const reload = () => main.custos.store.read.findCredential(id);
  const direct: Buffer[] = [];
  const got = await actor.use(row, undefined, async ({ secret }) => {
    direct.push(...Object.values(secret));
    await new Promise((r) => setTimeout(r, 10)); // across an await, still live
    return secret.value!.toString('utf8');
  }, reload);
  t.is(got, value);
  await t.throwsAsync(actor.use(row, undefined, async ({ secret }) => {
    direct.push(...Object.values(secret));
    throw new Error('kind failed');
  }, reload), { message: 'kind failed' });
  t.is(direct.length, 2);
  for (const b of direct) t.true(allZero(b));
});

test.serial('per-workspace use cap: at most useConcurrency calls reach the upstream at once; a rotate-dek waits for in-flight uses and runs alone', async (t) => {
  const capped = await startCustos('sqlite', { actors: { useConcurrency: 2, idleSeconds: 300 } });
  try {
    const p = await Client.signup(capped.url);
    const value = `cap-${randomBytes(8).toString('hex')}`;
    const id = await bearer(capped, p, 'capped', value);
    const agent = await agentFor(capped, p);
    try {
      slow.delayMs = 300;
      slow.maxInFlight = 0;
      const six = await Promise.all(Array.from({ length: 6 }, (_, k) => agent.call('call_api', { service: id, method: 'GET', path: `/cap-${k}` })));
      for (const r of six) t.false(r.isError, r.text);
      t.is(slow.maxInFlight, 2, 'the cap, not serialisation, bounded the upstream');

      // Lifecycle exclusivity.
      slow.events.length = 0;
      slow.delayMs = 400;
      const actor = capped.custos.actors.peek(p.workspaceId)!;
      const backend = capped.custos.backend;
      const origWrap = backend.wrap;
      let atRotate: { inFlight: number; activeUses: number } | null = null;
      (backend as { wrap: typeof backend.wrap }).wrap = async (dek, aad) => {
        atRotate = { inFlight: slow.inFlight, activeUses: actor.mailbox.activeUses };
        slow.events.push('rotate:start');
        await new Promise((r) => setTimeout(r, 300));
        slow.events.push('rotate:wrapped');
        return origWrap(dek, aad);
      };
      try {
        const first = [agent.call('call_api', { service: id, method: 'GET', path: '/u1' }), agent.call('call_api', { service: id, method: 'GET', path: '/u2' })];
        await until(() => slow.inFlight === 2, 'two uses in flight');
        const rotate = p.client.post(`/workspaces/${p.workspaceId}/rotate-dek`);
        await until(() => actor.mailbox.queued >= 1, 'the rotation to queue');
        const later = [agent.call('call_api', { service: id, method: 'GET', path: '/u3' }), agent.call('call_api', { service: id, method: 'GET', path: '/u4' })];
        await until(() => actor.mailbox.queued >= 3 || slow.events.includes('rotate:start'), 'later uses to queue');
        const [r1, r2, rot, r3, r4] = await Promise.all([...first, rotate, ...later]) as [any, any, any, any, any];
        for (const r of [r1, r2, r3, r4]) t.false(r.isError, r.text);
        t.is(rot.status, 200, rot.text);
        t.deepEqual(atRotate, { inFlight: 0, activeUses: 0 }, 'the rotation ran with nothing in flight');
        const at = (e: string): number => slow.events.indexOf(e);
        t.true(at('end:/a/u1') < at('rotate:start') && at('end:/a/u2') < at('rotate:start'), `in-flight uses finished first: ${slow.events.join(' ')}`);
        t.true(at('start:/a/u3') > at('rotate:wrapped') && at('start:/a/u4') > at('rotate:wrapped'), `uses sent during the rotation waited: ${slow.events.join(' ')}`);
      } finally {
        (backend as { wrap: typeof backend.wrap }).wrap = origWrap;
      }
      t.deepEqual((await p.client.post(`/credentials/${id}/reveal`)).body.secret, { value });
    } finally {
      slow.delayMs = 0;
      await agent.close();
    }
  } finally {
    await capped.close();
  }
});

test.serial('passivation zeroes the DEK and the actor cache; the next use re-activates; an actor with a use in flight is not passivated', async (t) => {
  const idle = await startCustos('sqlite', { actors: { idleSeconds: 0.3, useConcurrency: 8 } });
  try {
    const p = await Client.signup(idle.url);
    const value = `pz-${randomBytes(8).toString('hex')}`;
    const id = await bearer(idle, p, 'passivate', value);
    const sig = await p.client.post(`/workspaces/${p.workspaceId}/credentials`, {
      name: 'sig', service: 'custom', authScheme: 'sigv4', baseUrl: `${upstream.url}/s3`, config: { region: 'us-east-1', service: 's3' },
      secret: { accessKeyId: 'AKIAPASSIVATE', secretAccessKey: 'passivate-secret-key-0001' },
    });
    const agent = await agentFor(idle, p);
    try {
      t.false((await agent.call('call_api', { service: sig.body.credential.id, method: 'GET', path: '/bucket/k' })).isError);
      const actor = idle.custos.actors.peek(p.workspaceId)!;
      t.truthy(actor);
      const dek = actor.dekForTests();
      t.false(allZero(dek), 'a live DEK');
      t.true(actor.cache.scope(sig.body.credential.id).size >= 1, 'the derived SigV4 key is cached in the actor');
      await new Promise((r) => setTimeout(r, 400));
      await idle.custos.actors.passivateIdle(); // (the sweeper may already have done it)
      t.true(actor.closed);
      t.true(allZero(dek), 'the DEK is zero after passivation');
      t.is(actor.cache.scope(sig.body.credential.id).size, 0, 'the derived-key cache is cleared');
      t.is(idle.custos.actors.peek(p.workspaceId), undefined);
      const unwraps = idle.custos.backend.stats.unwraps;
      t.deepEqual((await p.client.post(`/credentials/${id}/reveal`)).body.secret, { value });
      t.is(idle.custos.backend.stats.unwraps - unwraps, 1, 're-activated with one unwrap');

      // A use running longer than idleSeconds keeps its actor alive.
      slow.delayMs = 900;
      const long = agent.call('call_api', { service: id, method: 'GET', path: '/long' });
      await until(() => slow.inFlight === 1, 'the long call to reach the upstream');
      const live = idle.custos.actors.peek(p.workspaceId)!;
      await new Promise((r) => setTimeout(r, 500));
      t.is(await idle.custos.actors.passivateIdle(), 0);
      t.false(live.closed);
      t.false(allZero(live.dekForTests()), 'not zeroed under a running use');
      t.false((await long).isError);
    } finally {
      slow.delayMs = 0;
      await agent.close();
    }
  } finally {
    await idle.close();
  }
});

test.serial('shutdown zeroes every active DEK and refuses new work', async (t) => {
  const inst = await startCustos('sqlite');
  let closed = false;
  try {
    const deks: Buffer[] = [];
    for (let k = 0; k < 3; k += 1) {
      const p = await Client.signup(inst.url);
      const id = await bearer(inst, p, 'shut', `shut-${k}-${randomBytes(6).toString('hex')}`);
      t.is((await p.client.post(`/credentials/${id}/reveal`)).status, 200);
      deks.push(inst.custos.actors.peek(p.workspaceId)!.dekForTests());
    }
    for (const d of deks) t.false(allZero(d));
    const ws = (await inst.custos.store.read.listAllWorkspaces())[0]!.id;
    await inst.close();
    closed = true;
    for (const d of deks) t.true(allZero(d), 'zero after shutdown');
    t.is(inst.custos.actors.stats.active, 0);
    await t.throwsAsync(inst.custos.actors.actor(ws), { message: /shutting down/ });
  } finally {
    if (!closed) await inst.close();
  }
});
