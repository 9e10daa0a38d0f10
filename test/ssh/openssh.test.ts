/**
 * `custos ssh-agent` with real OpenSSH 9.2: ssh-add, ssh, git over ssh against a private sshd.
 * The agent is started through the real command path (node --import tsx src/ssh/agent-main.ts -s,
 * output eval-parsed) and talks HTTP to a local stand-in of the service's SSH contract that signs
 * with the real ssh kind (see helpers.ts: the service itself is tested end to end by its owner).
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AgentClient } from '../../src/ssh/agent-client.ts';
import { startSshd, type Sshd } from '../support/sshd.ts';
import { makeKey, pemBody, randomToken, run, runAsync, secretOf, startContractServer, type ContractServer, type KeyPair, removeKeyDirs } from './helpers.ts';

const AGENT_MAIN = fileURLToPath(new URL('../../src/ssh/agent-main.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface AgentProc { stdout: string; stderr: string; code: number | null; sock: string; pid: number }

/** Runs the command as a user would (`custos ssh-agent ARGS`), returning output and the eval'd vars. */
function agentCommand(args: string[], env: Record<string, string | undefined>): Promise<AgentProc> {
  return new Promise((resolve) => {
    const cleanEnv = { ...process.env, ...env } as Record<string, string | undefined>;
    for (const k of Object.keys(env)) if (env[k] === undefined) delete cleanEnv[k];
    const child = spawn(process.execPath, ['--import', 'tsx', AGENT_MAIN, ...args], { cwd: REPO_ROOT, env: cleanEnv as NodeJS.ProcessEnv });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => { stdout += d; });
    child.stderr.on('data', (d: Buffer) => { stderr += d; });
    child.on('close', (code) => {
      const sock = /SSH_AUTH_SOCK[= ]([^;]+);/.exec(stdout)?.[1] ?? '';
      const pid = Number(/SSH_AGENT_PID[= ](\d+);/.exec(stdout)?.[1] ?? 0);
      resolve({ stdout, stderr, code, sock, pid });
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A re-parented daemon may linger as a zombie when pid 1 does not reap: that is "stopped" too.
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

async function until(cond: () => boolean, ms = 10_000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; ) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return cond();
}

/** A Unix-socket relay between the OpenSSH tools and the agent that records every byte both ways. */
async function recordingProxy(target: string, path: string): Promise<{ bytes: () => Buffer; close: () => void }> {
  const recorded: Buffer[] = [];
  const server: Server = createServer((client) => {
    const upstream = connect(target);
    client.on('data', (d: Buffer) => { recorded.push(Buffer.from(d)); upstream.write(d); });
    upstream.on('data', (d: Buffer) => { recorded.push(Buffer.from(d)); client.write(d); });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(path, r));
  return { bytes: () => Buffer.concat(recorded), close: () => server.close() };
}

interface World {
  tmp: string;
  keyA: KeyPair;
  keyB: KeyPair;
  passB: string;
  contract: ContractServer;
  sshd: Sshd;
  agent: AgentProc;
  logPath: string;
  proxySock: string;
  proxy: { bytes: () => Buffer; close: () => void };
  env: NodeJS.ProcessEnv;
  started: number[];
}

let w: World;

test.before(async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'custos-ssh-e2e-'));
  const keyA = makeKey({ comment: 'alice@laptop' });
  const passB = `MARKER-${randomBytes(8).toString('hex')}`;
  const keyB = makeKey({ comment: 'bob@desk', passphrase: passB });
  const contract = await startContractServer([
    { secret: secretOf(keyA), label: 'custos-test deploy key' },
    { secret: secretOf(keyB, passB), label: 'second key' },
  ]);
  const sshd = await startSshd(`${keyA.publicLine}\n`);
  const agent = await agentCommand(['-s'], { CUSTOS_URL: contract.url, CUSTOS_SSH_TOKEN: contract.token, SHELL: '/bin/bash' });
  if (agent.code !== 0) throw new Error(`agent did not start: ${agent.stderr}`);
  const proxySock = join(tmp, 'proxy.sock');
  const proxy = await recordingProxy(agent.sock, proxySock);
  w = {
    tmp, keyA, keyB, passB, contract, sshd, agent, proxySock, proxy,
    logPath: join(dirname(agent.sock), 'agent.log'),
    env: { ...process.env, SSH_AUTH_SOCK: proxySock, SSH_ASKPASS: '/bin/false', DISPLAY: '' },
    started: [agent.pid],
  };
});

test.after.always(async () => {
  removeKeyDirs();
  if (!w) return;
  for (const pid of w.started) if (alive(pid)) process.kill(pid, 'SIGTERM');
  w.proxy.close();
  await w.sshd.stop();
  await w.contract.close();
  rmSync(w.tmp, { recursive: true, force: true });
});

const ssh = (...cmd: string[]) => runAsync('ssh', [...w.sshd.sshOptions(), `${w.sshd.user}@127.0.0.1`, ...cmd], { env: w.env });
const logLines = () => (existsSync(w.logPath) ? readFileSync(w.logPath, 'utf8').split('\n').filter(Boolean) : []);

test.serial('prints the same Bourne lines as ssh-agent -s and daemonises with a private 0600 socket', (t) => {
  const { stdout, sock, pid } = w.agent;
  t.regex(stdout, /^SSH_AUTH_SOCK=\/[^;\s]+\/agent\.\d+; export SSH_AUTH_SOCK;\nSSH_AGENT_PID=\d+; export SSH_AGENT_PID;\necho Agent pid \d+;\n$/);
  t.is(stdout, `SSH_AUTH_SOCK=${sock}; export SSH_AUTH_SOCK;\nSSH_AGENT_PID=${pid}; export SSH_AGENT_PID;\necho Agent pid ${pid};\n`);
  t.true(alive(pid), 'the daemon outlives the command that started it');
  t.is(statSync(sock).mode & 0o777, 0o600);
  t.is(statSync(dirname(sock)).mode & 0o777, 0o700);
});

test.serial('ssh-add -l shows each key as "256 SHA256:<fp> <label> (ED25519)" with ssh-keygen -lf fingerprints', async (t) => {
  const r = await runAsync('ssh-add', ['-l'], { env: w.env });
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, `256 ${w.keyA.fingerprint} custos-test deploy key (ED25519)\n256 ${w.keyB.fingerprint} second key (ED25519)\n`);
  t.is(w.keyA.keygenFingerprintLine.split(' ')[1], w.keyA.fingerprint);
  const L = await runAsync('ssh-add', ['-L'], { env: w.env });
  t.is(L.stdout.split('\n')[0], `${w.keyA.publicLine.split(' ').slice(0, 2).join(' ')} custos-test deploy key`);
});

test.serial('ssh logs in to a real sshd with the brokered key (session-bind extension handled)', async (t) => {
  const signsBefore = w.contract.counts.sign;
  const r = await ssh('echo', 'ok');
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, 'ok\n');
  t.true(w.contract.counts.sign > signsBefore, 'the signature came from the service');
  t.true(w.sshd.log().includes(`Accepted publickey for ${w.sshd.user} from 127.0.0.1`));
  t.true(w.sshd.log().includes(`ED25519 ${w.keyA.fingerprint}`));
  // OpenSSH 9.2 sent session-bind@openssh.com (type 27) before signing; we answered FAILURE.
  t.true(w.proxy.bytes().includes(Buffer.from('session-bind@openssh.com')));
});

test.serial('git push over ssh to a bare repository served by that sshd works', async (t) => {
  const bare = join(w.tmp, 'remote.git');
  const work = join(w.tmp, 'work');
  t.is(run('git', ['init', '-q', '--bare', bare]).code, 0);
  t.is(run('git', ['init', '-q', '-b', 'main', work]).code, 0);
  writeFileSync(join(work, 'README'), 'pushed through custos ssh-agent\n');
  const g = (...a: string[]) => runAsync('git', ['-C', work, '-c', 'user.name=Custos Test', '-c', 'user.email=test@custos.invalid', ...a], {
    env: { ...w.env, GIT_SSH_COMMAND: ['ssh', ...w.sshd.sshOptions()].join(' ') },
  });
  t.is((await g('add', 'README')).code, 0);
  t.is((await g('commit', '-q', '-m', 'first')).code, 0);
  const push = await g('push', '-q', `${w.sshd.user}@127.0.0.1:${bare}`, 'main');
  t.is(push.code, 0, push.stderr);
  const log = run('git', ['--git-dir', bare, 'log', '--format=%s', 'main']);
  t.is(log.stdout, 'first\n');
});

test.serial('ssh-add KEY, ssh-add -d and ssh-add -D are refused; the listed keys are unchanged', async (t) => {
  const other = makeKey();
  const add = await runAsync('ssh-add', [other.privatePath], { env: w.env });
  t.not(add.code, 0);
  t.regex(add.stderr, /agent refused operation/);
  const del = await runAsync('ssh-add', ['-d', w.keyA.publicPath], { env: w.env });
  t.not(del.code, 0);
  t.regex(del.stderr, /agent refused operation/);
  const all = await runAsync('ssh-add', ['-D'], { env: w.env });
  t.not(all.code, 0);
  t.regex(all.stderr, /Failed to remove all identities/);
  t.is((await runAsync('ssh-add', ['-l'], { env: w.env })).stdout.split('\n').filter(Boolean).length, 2);
  t.true(logLines().some((l) => l.includes('refused add identity')));
});

test.serial('no private key material, passphrase or token crosses the socket or reaches the agent log', (t) => {
  const traffic = w.proxy.bytes().toString('latin1');
  const log = readFileSync(w.logPath, 'utf8');
  t.true(traffic.length > 0 && log.length > 0);
  for (const key of [w.keyA, w.keyB]) {
    const body = pemBody(key.pem);
    for (let i = 0; i + 32 <= body.length; i += 32) {
      t.false(log.includes(body.slice(i, i + 32)));
      t.false(traffic.includes(body.slice(i, i + 32)));
    }
  }
  // The raw 32-byte seed of the unencrypted key, as bytes on the wire.
  const seedA = (() => {
    const raw = Buffer.from(pemBody(w.keyA.pem), 'base64');
    const i = raw.lastIndexOf(Buffer.from('ssh-ed25519'));
    return raw.subarray(i + 11 + 4 + 32 + 4, i + 11 + 4 + 32 + 4 + 32);
  })();
  t.is(seedA.length, 32);
  t.false(w.proxy.bytes().includes(seedA));
  for (const s of [w.passB, w.contract.token, '-----BEGIN']) {
    t.false(traffic.includes(s));
    t.false(log.includes(s));
  }
});

test.serial('a revoked token: ssh-add -l fails cleanly, ssh cannot log in, and the agent logs one clear line', async (t) => {
  w.contract.mode = 'revoked';
  t.teardown(() => { w.contract.mode = 'ok'; });
  const before = logLines().length;
  const r = await runAsync('ssh-add', ['-l'], { env: w.env });
  t.not(r.code, 0);
  t.regex(r.stderr, /agent refused operation/);
  const added = logLines().slice(before);
  t.is(added.length, 1);
  t.regex(added[0]!, /list identities failed, answered SSH_AGENT_FAILURE: the Custos service at http:\/\/127\.0\.0\.1:\d+ refused the SSH token .*HTTP 401 CUSTOS_ERR_TOKEN_INVALID/);
  t.false(added[0]!.includes(w.contract.token));
  const login = await ssh('echo', 'ok');
  t.not(login.code, 0);
  t.true(alive(w.agent.pid));
});

test.serial('a deleted credential: the key disappears from the list and signing with it fails with one log line', async (t) => {
  w.contract.mode = 'deleted';
  t.teardown(() => { w.contract.mode = 'ok'; });
  const r = await runAsync('ssh-add', ['-l'], { env: w.env });
  t.regex(r.stdout, /The agent has no identities/);
  const before = logLines().length;
  const c = await AgentClient.connect(w.agent.sock);
  t.teardown(() => c.close());
  const blob = Buffer.from(w.keyA.publicLine.split(' ')[1]!, 'base64');
  await t.throwsAsync(c.sign(blob, Buffer.from('data')), { message: /answered type 5/ });
  const added = logLines().slice(before);
  t.is(added.length, 1);
  t.regex(added[0]!, /sign failed.*does not know this key.*HTTP 404/);
});

test.serial('the service going down: FAILURE and one log line per request, and the agent stays alive', async (t) => {
  await w.contract.close();
  const before = logLines().length;
  const r = await runAsync('ssh-add', ['-l'], { env: w.env });
  t.not(r.code, 0);
  const added = logLines().slice(before);
  t.is(added.length, 1);
  t.regex(added[0]!, /is unreachable \(ECONNREFUSED\)/);
  t.true(alive(w.agent.pid));
  // Still a working agent on the same socket.
  const c = await AgentClient.connect(w.agent.sock);
  t.teardown(() => c.close());
  await t.throwsAsync(c.listIdentities());
});

test.serial('-k stops the agent named by SSH_AGENT_PID, prints the unset lines and removes the socket directory', async (t) => {
  const r = await agentCommand(['-k'], { SSH_AGENT_PID: String(w.agent.pid), SHELL: '/bin/bash' });
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, `unset SSH_AUTH_SOCK;\nunset SSH_AGENT_PID;\necho Agent pid ${w.agent.pid} killed;\n`);
  t.true(await until(() => !alive(w.agent.pid)));
  t.true(await until(() => !existsSync(dirname(w.agent.sock))));
});

test('-c prints C-shell lines; -k -c prints unsetenv lines', async (t) => {
  const contract = await startContractServer([]);
  t.teardown(() => contract.close());
  const r = await agentCommand(['-c'], { CUSTOS_URL: contract.url, CUSTOS_SSH_TOKEN: contract.token });
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, `setenv SSH_AUTH_SOCK ${r.sock};\nsetenv SSH_AGENT_PID ${r.pid};\necho Agent pid ${r.pid};\n`);
  t.true(alive(r.pid));
  const k = await agentCommand(['-k', '-c'], { SSH_AGENT_PID: String(r.pid) });
  t.is(k.stdout, `unsetenv SSH_AUTH_SOCK;\nunsetenv SSH_AGENT_PID;\necho Agent pid ${r.pid} killed;\n`);
  t.true(await until(() => !alive(r.pid)));
});

test('-D runs in the foreground, logs to stderr, and exits 0 on SIGTERM; -a binds the given path', async (t) => {
  const contract = await startContractServer([]);
  t.teardown(() => contract.close());
  const dir = mkdtempSync(join(tmpdir(), 'custos-ssh-a-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const sock = join(dir, 'my.sock');
  const child = spawn(process.execPath, ['--import', 'tsx', AGENT_MAIN, '-D', '-a', sock], {
    cwd: REPO_ROOT, env: { ...process.env, CUSTOS_URL: contract.url, CUSTOS_SSH_TOKEN: contract.token, SHELL: '/bin/sh' },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => { out += d; });
  child.stderr.on('data', (d: Buffer) => { err += d; });
  t.true(await until(() => out.includes('echo Agent pid')));
  t.is(out, `SSH_AUTH_SOCK=${sock}; export SSH_AUTH_SOCK;\nSSH_AGENT_PID=${child.pid}; export SSH_AGENT_PID;\necho Agent pid ${child.pid};\n`);
  t.is(statSync(sock).mode & 0o777, 0o600);
  const r = await runAsync('ssh-add', ['-D'], { env: { ...process.env, SSH_AUTH_SOCK: sock } });
  t.not(r.code, 0);
  t.true(await until(() => err.includes('refused remove all identities')));
  // A second agent on the same path is refused rather than stealing the socket.
  const second = await agentCommand(['-s', '-a', sock], { CUSTOS_URL: contract.url, CUSTOS_SSH_TOKEN: contract.token });
  t.is(second.code, 1);
  t.regex(second.stderr, /already exists/);
  const exited = new Promise<number | null>((r2) => child.on('exit', (c) => r2(c)));
  child.kill('SIGTERM');
  t.is(await exited, 0);
  t.false(existsSync(sock));
});

test('refuses to start without CUSTOS_SSH_TOKEN or CUSTOS_URL, or with a token of the wrong shape', async (t) => {
  const url = 'http://127.0.0.1:9';
  const cases: Array<[Record<string, string | undefined>, RegExp]> = [
    [{ CUSTOS_URL: url, CUSTOS_SSH_TOKEN: undefined }, /CUSTOS_SSH_TOKEN is not set/],
    [{ CUSTOS_URL: undefined, CUSTOS_SSH_TOKEN: randomToken() }, /CUSTOS_URL is not set/],
    [{ CUSTOS_URL: url, CUSTOS_SSH_TOKEN: 'custos_ci_MARKERabcdefghijklmnopqrstuvwxyz0123456789' }, /does not look like an SSH token/],
    [{ CUSTOS_URL: 'ftp://x', CUSTOS_SSH_TOKEN: randomToken() }, /http:\/\/ or https:\/\//],
  ];
  for (const [env, message] of cases) {
    const r = await agentCommand(['-s'], env);
    t.is(r.code, 1);
    t.regex(r.stderr, message);
    t.is(r.stdout, '');
    t.false(r.stderr.includes('MARKER'));
  }
  const usage = await agentCommand(['-x'], {});
  t.is(usage.code, 1);
  t.regex(usage.stderr, /unknown option -x/);
  const noPid = await agentCommand(['-k'], { SSH_AGENT_PID: undefined });
  t.is(noPid.code, 1);
  t.regex(noPid.stderr, /SSH_AGENT_PID not set/);
});
