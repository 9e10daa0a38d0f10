/**
 * SSH benchmark: `ssh` login wall time through `custos ssh-agent` vs OpenSSH's own `ssh-agent`
 * holding the same ed25519 key (target ≤ 1.2×), and the agent sign round-trip p50.
 *
 * The custos agent forwards to a local stand-in of the service's SSH contract (test/ssh/helpers.ts)
 * that signs with the real ssh kind; the real service adds its token check, actor hop and audit write.
 * Run: node --import tsx bench/ssh.ts [logins=20] [signs=300]
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sshKind } from '../src/kinds/ssh/index.ts';
import { AgentClient } from '../src/ssh/agent-client.ts';
import { makeKey, removeKeyDirs, runAsync, secretOf, startContractServer } from '../test/ssh/helpers.ts';
import { startSshd } from '../test/support/sshd.ts';

const LOGINS = Number(process.argv[2] ?? 20);
const SIGNS = Number(process.argv[3] ?? 300);
const AGENT_MAIN = fileURLToPath(new URL('../src/ssh/agent-main.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../', import.meta.url));

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const ms = (n: number): string => `${n.toFixed(2)} ms`;

async function main(): Promise<void> {
  const key = makeKey({ comment: 'bench@custos' });
  const contract = await startContractServer([{ secret: secretOf(key), label: 'bench key' }]);
  const sshd = await startSshd(`${key.publicLine}\n`);
  const dir = mkdtempSync(join(tmpdir(), 'custos-ssh-bench-'));

  // custos ssh-agent through its real command path.
  const started = await runAsync(process.execPath, ['--import', 'tsx', AGENT_MAIN, '-s'], {
    cwd: ROOT, env: { ...process.env, CUSTOS_URL: contract.url, CUSTOS_SSH_TOKEN: contract.token },
  });
  const custosSock = /SSH_AUTH_SOCK=([^;]+);/.exec(started.stdout)?.[1];
  const custosPid = Number(/SSH_AGENT_PID=(\d+);/.exec(started.stdout)?.[1]);
  if (!custosSock) throw new Error(`custos ssh-agent did not start: ${started.stderr}`);

  // OpenSSH's agent with the same key.
  const opensshSock = join(dir, 'openssh-agent.sock');
  const openssh = spawn('ssh-agent', ['-D', '-a', opensshSock], { stdio: 'ignore' });
  for (let i = 0; i < 200 && !existsSync(opensshSock); i++) await new Promise((r) => setTimeout(r, 25));
  const add = await runAsync('ssh-add', [key.privatePath], { env: { ...process.env, SSH_AUTH_SOCK: opensshSock } });
  if (add.code !== 0) throw new Error(`ssh-add failed: ${add.stderr}`);

  const login = async (sock: string): Promise<number> => {
    const t0 = performance.now();
    const r = await runAsync('ssh', [...sshd.sshOptions(), `${sshd.user}@127.0.0.1`, 'true'], { env: { ...process.env, SSH_AUTH_SOCK: sock } });
    const t = performance.now() - t0;
    if (r.code !== 0) throw new Error(`ssh login failed: ${r.stderr}`);
    return t;
  };

  try {
    for (let i = 0; i < 3; i++) { await login(custosSock); await login(opensshSock); } // warm-up
    const custosTimes: number[] = [];
    const opensshTimes: number[] = [];
    const signsBefore = contract.counts.sign;
    // Interleaved so machine-load drift hits both sides alike.
    for (let i = 0; i < LOGINS; i++) {
      custosTimes.push(await login(custosSock));
      opensshTimes.push(await login(opensshSock));
    }
    if (contract.counts.sign - signsBefore < LOGINS) throw new Error('custos logins did not sign through the service');

    const data = Buffer.alloc(150, 0x42); // about the size of an SSH userauth request
    const blob = Buffer.from(contract.keys[0]!.config.keyBlob!, 'base64');
    const signP = async (sock: string): Promise<number[]> => {
      const c = await AgentClient.connect(sock);
      const times: number[] = [];
      for (let i = 0; i < 20; i++) await c.sign(blob, data); // warm-up
      for (let i = 0; i < SIGNS; i++) {
        const t0 = performance.now();
        await c.sign(blob, data);
        times.push(performance.now() - t0);
      }
      c.close();
      return times;
    };
    const custosSign = await signP(custosSock);
    const opensshSign = await signP(opensshSock);
    const cfg = contract.keys[0]!.config;
    const kindSign: number[] = [];
    for (let i = 0; i < SIGNS; i++) {
      const s = secretOf(key);
      const t0 = performance.now();
      sshKind.sign(s, cfg, data, 0);
      kindSign.push(performance.now() - t0);
    }

    const ratioMedian = pct(custosTimes, 50) / pct(opensshTimes, 50);
    const ratioMean = mean(custosTimes) / mean(opensshTimes);
    console.log(`ssh login wall time, ${LOGINS} logins each (ssh … true against a local sshd):`);
    console.log(`  custos ssh-agent : p50 ${ms(pct(custosTimes, 50))}  mean ${ms(mean(custosTimes))}  p95 ${ms(pct(custosTimes, 95))}`);
    console.log(`  OpenSSH ssh-agent: p50 ${ms(pct(opensshTimes, 50))}  mean ${ms(mean(opensshTimes))}  p95 ${ms(pct(opensshTimes, 95))}`);
    console.log(`  ratio custos/OpenSSH: p50 ${ratioMedian.toFixed(3)}×  mean ${ratioMean.toFixed(3)}×  (target ≤ 1.2×)`);
    console.log(`sign round trip over the agent socket, ${SIGNS} signs:`);
    console.log(`  custos ssh-agent (socket → HTTP → kind.sign): p50 ${ms(pct(custosSign, 50))}  p95 ${ms(pct(custosSign, 95))}`);
    console.log(`  OpenSSH ssh-agent (in-process key)          : p50 ${ms(pct(opensshSign, 50))}  p95 ${ms(pct(opensshSign, 95))}`);
    console.log(`  ssh kind sign alone (parse key + Ed25519)   : p50 ${ms(pct(kindSign, 50))}`);
  } finally {
    if (custosPid) try { process.kill(custosPid, 'SIGTERM'); } catch { /* gone */ }
    openssh.kill();
    await sshd.stop();
    await contract.close();
    rmSync(dir, { recursive: true, force: true });
    removeKeyDirs();
  }
}

await main();
