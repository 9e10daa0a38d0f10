/**
 * The SSH agent end to end: `custos ssh-agent` (through the `custos` command) serving a key stored
 * in the real service, used by real OpenSSH 9 (`ssh-add`, `ssh`, `git push`) against a private sshd.
 */
import test from 'ava';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, startCustos, type TestCustos } from '../support/custos.ts';
import { startSshd, type Sshd } from '../support/sshd.ts';
import { makeKey, type KeyPair } from '../ssh/helpers.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
let inst: TestCustos;
let sshd: Sshd;
let key: KeyPair;
let person: Awaited<ReturnType<typeof Client.signup>>;
let agentEnv: NodeJS.ProcessEnv;
let tokenId: string;

/**
 * Runs a command without blocking: the service under test lives in this process, and the agent
 * calls it over HTTP while `ssh` waits, so a synchronous spawn would deadlock the two.
 */
function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env, ...(cwd ? { cwd } : {}), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

test.before(async () => {
  inst = await startCustos('sqlite');
  key = makeKey({ comment: 'laptop@example' });
  person = await Client.signup(inst.url);
  const cred = await person.client.post(`/workspaces/${person.workspaceId}/credentials`, {
    name: 'deploy-key', service: 'custom', authScheme: 'ssh', config: { label: 'deploy-key' }, secret: { privateKey: key.pem.toString('utf8') },
  });
  if (cred.status !== 201) throw new Error(cred.text);
  const tok = await person.client.post('/tokens/ssh', { name: 'laptop' });
  if (tok.status !== 201) throw new Error(tok.text);
  tokenId = tok.body.id;
  sshd = await startSshd(key.publicLine);
  const base = { PATH: process.env.PATH!, HOME: mkdtempSync(path.join(tmpdir(), 'custos-home-')), CUSTOS_URL: inst.url, CUSTOS_SSH_TOKEN: tok.body.token };
  const started = await run(process.execPath, ['bin/custos.mjs', 'ssh-agent', '-s'], base, ROOT);
  if (started.code !== 0) throw new Error(`ssh-agent failed: ${started.stderr}`);
  const sock = /SSH_AUTH_SOCK=([^;]+);/.exec(started.stdout)![1]!;
  const pid = /SSH_AGENT_PID=(\d+);/.exec(started.stdout)![1]!;
  agentEnv = { ...base, SSH_AUTH_SOCK: sock, SSH_AGENT_PID: pid, SSH_ASKPASS: '/bin/false', DISPLAY: '' };
});

test.after.always(async () => {
  if (agentEnv) await run(process.execPath, ['bin/custos.mjs', 'ssh-agent', '-k'], agentEnv, ROOT);
  await sshd?.stop();
  await inst?.close();
});

test.serial('ssh-add -l lists the stored key with the fingerprint ssh-keygen computes and its label', async (t) => {
  const r = await run('ssh-add', ['-l'], agentEnv);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout.trim(), `256 ${key.fingerprint} deploy-key (ED25519)`);
  t.is(key.keygenFingerprintLine.split(' ')[1], key.fingerprint);
});

test.serial('ssh logs in with the brokered key, and git push over SSH works', async (t) => {
  const login = await run('ssh', [...sshd.sshOptions(), `${sshd.user}@127.0.0.1`, 'echo', 'brokered-ok'], agentEnv);
  t.is(login.code, 0, login.stderr);
  t.is(login.stdout.trim(), 'brokered-ok');
  const dir = mkdtempSync(path.join(tmpdir(), 'custos-git-'));
  const bare = path.join(dir, 'remote.git');
  t.is((await run('git', ['init', '-q', '--bare', bare], agentEnv)).code, 0);
  const work = path.join(dir, 'work');
  const genv = { ...agentEnv, GIT_SSH_COMMAND: ['ssh', ...sshd.sshOptions()].join(' '), GIT_AUTHOR_NAME: 'a', GIT_AUTHOR_EMAIL: 'a@example.com', GIT_COMMITTER_NAME: 'a', GIT_COMMITTER_EMAIL: 'a@example.com' };
  t.is((await run('git', ['init', '-q', '-b', 'main', work], genv)).code, 0);
  t.is((await run('git', ['-C', work, 'commit', '-q', '--allow-empty', '-m', 'pushed through custos'], genv)).code, 0);
  const push = await run('git', ['-C', work, 'push', '-q', `${sshd.user}@127.0.0.1:${bare}`, 'main'], genv);
  t.is(push.code, 0, push.stderr);
  t.is((await run('git', ['--git-dir', bare, 'log', '--format=%s', 'main'], genv)).stdout.trim(), 'pushed through custos');
});

test.serial('every signature is audited with the token, key fingerprint and a hash of the data; the key appears nowhere', async (t) => {
  const audit = await person.client.get(`/workspaces/${person.workspaceId}/audit/export`);
  const signs = audit.text.trim().split('\n').map((l) => JSON.parse(l)).filter((e) => e.action === 'ssh.sign');
  t.true(signs.length >= 2, 'the ssh login and the git push each signed');
  for (const e of signs) {
    t.is(e.outcome, 'success');
    t.is(e.actor.type, 'ssh_token');
    t.is(e.actor.id, tokenId);
    t.is(e.details.fingerprint, key.fingerprint);
    t.regex(e.details.dataSha256, /^[0-9a-f]{64}$/);
  }
  const body = key.pem.toString('utf8').split('\n').slice(1, -2).join('');
  const chunk = body.slice(40, 100);
  await inst.custos.auditLog.flush();
  t.false(audit.text.includes(chunk));
  t.false(inst.logs.text().includes(chunk));
  for (const f of readdirSync(inst.dataDir).filter((n) => n.startsWith('custos.sqlite'))) {
    t.false(readFileSync(path.join(inst.dataDir, f)).includes(Buffer.from(chunk)), f);
  }
  const reveal = await person.client.post(`/credentials/${signs[0].target.id}/reveal`);
  t.is(reveal.status, 403, 'the private key never leaves the service, not even through reveal');
});

test.serial('revoking the SSH token stops signing at once; the agent answers failure and stays up', async (t) => {
  t.is((await person.client.del(`/tokens/ssh/${tokenId}`)).status, 204);
  const list = await run('ssh-add', ['-l'], agentEnv);
  t.not(list.code, 0);
  const login = await run('ssh', [...sshd.sshOptions(), '-o', 'BatchMode=yes', `${sshd.user}@127.0.0.1`, 'true'], agentEnv);
  t.not(login.code, 0);
  const alive = spawnSync('kill', ['-0', agentEnv.SSH_AGENT_PID!]);
  t.is(alive.status, 0, 'the agent is still running');
});
