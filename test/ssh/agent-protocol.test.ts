import test from 'ava';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import { CustosError } from '../../src/errors.ts';
import { AgentClient } from '../../src/ssh/agent-client.ts';
import { FrameDecoder, MAX_FRAME_BYTES, MSG, frame, parseRequest } from '../../src/ssh/agent-protocol.ts';
import { startAgentServer } from '../../src/ssh/agent-server.ts';
import type { Identity, SignerClient } from '../../src/ssh/signer-client.ts';

const KEY_BLOB = Buffer.concat([Buffer.from([0, 0, 0, 11]), Buffer.from('ssh-ed25519'), Buffer.from([0, 0, 0, 32]), Buffer.alloc(32, 7)]);

function sigBlobFor(data: Buffer): Buffer {
  // A well-formed blob whose body echoes the data, so the test can tell answers apart.
  const alg = Buffer.from('ssh-ed25519');
  const body = Buffer.concat([data.subarray(0, 64), Buffer.alloc(Math.max(0, 64 - data.length))]);
  const u = (n: number) => { const b = Buffer.alloc(4); b.writeUInt32BE(n); return b; };
  return Buffer.concat([u(alg.length), alg, u(body.length), body]);
}

class FakeClient implements SignerClient {
  calls: Array<{ op: string; flags?: number }> = [];
  failWith: unknown;
  delay = (): number => 0;
  badSignature = false;
  ids: Identity[] = [{ keyBlob: KEY_BLOB, comment: 'deploy key' }];
  async listIdentities(): Promise<Identity[]> {
    this.calls.push({ op: 'list' });
    await new Promise((r) => setTimeout(r, this.delay()));
    if (this.failWith) throw this.failWith;
    return this.ids;
  }
  async sign(_keyBlob: Buffer, data: Buffer, flags: number): Promise<Buffer> {
    this.calls.push({ op: 'sign', flags });
    await new Promise((r) => setTimeout(r, this.delay()));
    if (this.failWith) throw this.failWith;
    return this.badSignature ? Buffer.from('junk') : sigBlobFor(data);
  }
}

async function agentWith(t: import('ava').ExecutionContext, client = new FakeClient()) {
  const lines: string[] = [];
  const agent = await startAgentServer({ client, log: (l) => lines.push(l) });
  t.teardown(() => agent.close());
  return { agent, client, lines };
}

async function connected(t: import('ava').ExecutionContext, path: string): Promise<AgentClient> {
  const c = await AgentClient.connect(path);
  t.teardown(() => c.close());
  return c;
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}
function str(b: Buffer | string): Buffer {
  const body = typeof b === 'string' ? Buffer.from(b) : b;
  return Buffer.concat([u32(body.length), body]);
}
const FAILURE = Buffer.from([MSG.FAILURE]);

test('the socket is 0600 in a fresh 0700 directory, named like OpenSSH agent.<pid>', async (t) => {
  const { agent } = await agentWith(t);
  t.is(statSync(agent.socketPath).mode & 0o777, 0o600);
  t.is(statSync(dirname(agent.socketPath)).mode & 0o777, 0o700);
  t.regex(agent.socketPath, /custos-ssh-[^/]+\/agent\.\d+$/);
});

test('REQUEST_IDENTITIES is answered with the service identities; SIGN_REQUEST with its signature', async (t) => {
  const { agent, client } = await agentWith(t);
  const c = await connected(t, agent.socketPath);
  const ids = await c.listIdentities();
  t.deepEqual(ids, [{ keyBlob: KEY_BLOB, comment: 'deploy key' }]);
  const sig = await c.sign(KEY_BLOB, Buffer.from('session data'), 4);
  t.deepEqual(sig, sigBlobFor(Buffer.from('session data')));
  t.deepEqual(client.calls, [{ op: 'list' }, { op: 'sign', flags: 4 }]);
});

test('an EXTENSION (session-bind@openssh.com) is answered FAILURE and its whole payload consumed', async (t) => {
  const { agent } = await agentWith(t);
  const c = await connected(t, agent.socketPath);
  const bind = Buffer.concat([Buffer.from([MSG.EXTENSION]), str('session-bind@openssh.com'), str(randomBytes(51)), str(randomBytes(32)), str(randomBytes(83)), Buffer.from([0])]);
  t.deepEqual(await c.request(bind), FAILURE);
  t.deepEqual(await c.request(Buffer.concat([Buffer.from([MSG.EXTENSION]), str('query')])), FAILURE);
  // The stream is still in step: the next request gets its own, correct answer.
  t.is((await c.listIdentities()).length, 1);
});

test('key management requests (add, remove, remove all, lock, unlock, smartcard) are refused and never reach the service', async (t) => {
  const { agent, client, lines } = await agentWith(t);
  const c = await connected(t, agent.socketPath);
  const keyish = Buffer.concat([str('ssh-ed25519'), str(randomBytes(32)), str(randomBytes(64)), str('c')]);
  for (const type of [MSG.ADD_IDENTITY, MSG.ADD_ID_CONSTRAINED, MSG.REMOVE_IDENTITY, MSG.REMOVE_ALL_IDENTITIES, MSG.LOCK, MSG.UNLOCK, MSG.ADD_SMARTCARD_KEY, MSG.ADD_SMARTCARD_KEY_CONSTRAINED, MSG.REMOVE_SMARTCARD_KEY]) {
    t.deepEqual(await c.request(Buffer.concat([Buffer.from([type]), keyish])), FAILURE, `type ${type}`);
  }
  t.deepEqual(client.calls, []);
  t.is(lines.filter((l) => l.startsWith('refused ')).length, 9);
});

test('unknown and legacy message types get FAILURE; the connection stays usable', async (t) => {
  const { agent } = await agentWith(t);
  const c = await connected(t, agent.socketPath);
  for (const type of [0, 1, 2, 3, 4, 7, 9, 10, 24, 29, 99, 255]) t.deepEqual(await c.request(Buffer.from([type, 1, 2, 3])), FAILURE);
  t.is((await c.listIdentities()).length, 1);
});

test('truncated sign requests and empty frames get FAILURE; the connection stays usable', async (t) => {
  const { agent, client } = await agentWith(t);
  const c = await connected(t, agent.socketPath);
  const bad = [
    Buffer.from([MSG.SIGN_REQUEST]),
    Buffer.concat([Buffer.from([MSG.SIGN_REQUEST]), u32(1000), Buffer.from('short')]),
    Buffer.concat([Buffer.from([MSG.SIGN_REQUEST]), str(KEY_BLOB), str('data')]), // no flags
    Buffer.concat([Buffer.from([MSG.SIGN_REQUEST]), str(KEY_BLOB), str('data'), u32(0), Buffer.from('x')]), // trailing
    Buffer.concat([Buffer.from([MSG.EXTENSION]), u32(0xffffffff)]),
    Buffer.alloc(0),
  ];
  for (const b of bad) t.deepEqual(await c.request(b), FAILURE);
  t.deepEqual(client.calls, []);
  t.is((await c.listIdentities()).length, 1);
});

test('an oversized frame is answered FAILURE and that connection closed; the agent keeps serving', async (t) => {
  const { agent, lines } = await agentWith(t);
  const raw = connect(agent.socketPath);
  const got: Buffer[] = [];
  raw.on('data', (d: Buffer) => got.push(d));
  const closed = new Promise((r) => raw.on('close', r));
  raw.on('error', () => {});
  raw.write(Buffer.concat([u32(MAX_FRAME_BYTES + 1), Buffer.alloc(1024, 0x41)]));
  await closed;
  t.deepEqual(Buffer.concat(got), frame(FAILURE));
  t.true(lines.some((l) => l.includes(`frame over ${MAX_FRAME_BYTES} bytes`)));
  const c = await connected(t, agent.socketPath);
  t.is((await c.listIdentities()).length, 1);
  // A frame right at the cap is still read (and answered: it is an unknown type).
  t.deepEqual(await c.request(Buffer.alloc(MAX_FRAME_BYTES, 0x63)), FAILURE);
});

test('pipelined requests split at arbitrary byte boundaries get one answer each, in order, with variable service latency', async (t) => {
  const client = new FakeClient();
  client.delay = () => Math.floor(Math.random() * 15);
  const { agent } = await agentWith(t, client);
  const raw = connect(agent.socketPath);
  t.teardown(() => raw.destroy());
  const datas = Array.from({ length: 60 }, (_, i) => Buffer.from(`payload-${i}`));
  const requests = datas.map((d, i) =>
    i % 5 === 4 ? frame(Buffer.from([MSG.REMOVE_ALL_IDENTITIES])) : frame(Buffer.concat([Buffer.from([MSG.SIGN_REQUEST]), str(KEY_BLOB), str(d), u32(0)])));
  const all = Buffer.concat(requests);
  // Write it in awkward pieces: single bytes, then ragged chunks.
  for (let i = 0; i < 40; i++) raw.write(all.subarray(i, i + 1));
  for (let i = 40; i < all.length; i += 37) raw.write(all.subarray(i, Math.min(all.length, i + 37)));
  const decoder = new FrameDecoder();
  const answers: Buffer[] = [];
  await new Promise<void>((resolve) => raw.on('data', (d: Buffer) => {
    answers.push(...decoder.push(d).frames);
    if (answers.length === datas.length) resolve();
  }));
  answers.forEach((a, i) => {
    if (i % 5 === 4) t.deepEqual(a, FAILURE);
    else t.deepEqual(a.subarray(5), sigBlobFor(datas[i]!), `answer ${i}`);
  });
});

test('service errors become FAILURE plus one log line naming the cause; a malformed signature from the service too', async (t) => {
  const { agent, client, lines } = await agentWith(t);
  const c = await connected(t, agent.socketPath);
  client.failWith = new CustosError('CUSTOS_ERR_TOKEN_INVALID', 'the Custos service at http://x refused the SSH token');
  t.deepEqual(await c.request(Buffer.from([MSG.REQUEST_IDENTITIES])), FAILURE);
  t.is(lines.length, 1);
  t.regex(lines[0]!, /list identities failed, answered SSH_AGENT_FAILURE: .*refused the SSH token/);
  client.failWith = new TypeError('secret MARKER-internal detail');
  await t.throwsAsync(c.sign(KEY_BLOB, Buffer.from('d')));
  t.is(lines.length, 2);
  t.false(lines[1]!.includes('MARKER'), 'non-Custos error messages are not logged');
  client.failWith = undefined;
  client.badSignature = true;
  await t.throwsAsync(c.sign(KEY_BLOB, Buffer.from('d')));
  t.regex(lines[2]!, /malformed signature/);
});

test('parseRequest and FrameDecoder never throw on random input (fuzz, 20k cases)', (t) => {
  let n = 0;
  for (let i = 0; i < 20_000; i++) {
    const len = Math.floor(Math.random() * 64);
    const b = randomBytes(len);
    if (i % 3 === 0 && len > 0) b[0] = [11, 13, 17, 27, 18][i % 5]!;
    parseRequest(b);
    const d = new FrameDecoder(1024);
    d.push(b);
    d.push(randomBytes(Math.floor(Math.random() * 8)));
    n++;
  }
  t.is(n, 20_000);
});

test('random garbage on many connections never crashes the agent (fuzz, 300 connections)', async (t) => {
  const { agent, client } = await agentWith(t);
  for (let i = 0; i < 300; i++) {
    const s = connect(agent.socketPath);
    s.on('error', () => {});
    s.on('data', () => {});
    const garbage = randomBytes(1 + Math.floor(Math.random() * 300));
    // Half the time, make the length prefix plausible so the payload is actually dispatched.
    if (i % 2 === 0 && garbage.length > 5) garbage.writeUInt32BE(garbage.length - 4, 0);
    if (i % 4 === 0 && garbage.length > 5) garbage[4] = [11, 13, 27, 17][(i / 4) % 4]!;
    s.end(garbage);
    if (i % 50 === 0) await new Promise((r) => setTimeout(r, 5));
  }
  await new Promise((r) => setTimeout(r, 100));
  const c = await connected(t, agent.socketPath);
  t.is((await c.listIdentities()).length, 1);
  t.true(client.calls.length >= 1);
});

test('a client that half-closes after sending still gets every answer, then end of stream', async (t) => {
  const client = new FakeClient();
  client.delay = () => 20;
  const { agent } = await agentWith(t, client);
  const raw = connect({ path: agent.socketPath, allowHalfOpen: true });
  t.teardown(() => raw.destroy());
  const got: Buffer[] = [];
  raw.on('data', (d: Buffer) => got.push(d));
  const ended = new Promise((r) => raw.on('end', r));
  raw.end(Buffer.concat([frame(Buffer.from([MSG.REQUEST_IDENTITIES])), frame(Buffer.concat([Buffer.from([MSG.SIGN_REQUEST]), str(KEY_BLOB), str('x'), u32(0)]))]));
  await ended;
  const frames = new FrameDecoder().push(Buffer.concat(got)).frames;
  t.is(frames.length, 2);
  t.is(frames[0]![0], MSG.IDENTITIES_ANSWER);
  t.is(frames[1]![0], MSG.SIGN_RESPONSE);
});
