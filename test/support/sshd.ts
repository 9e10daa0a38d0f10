/**
 * A throwaway OpenSSH sshd for tests: private config, per-run host key, its own authorized_keys,
 * 127.0.0.1 on a free high port, foreground (`-D -e`) so it dies with the test. As root, sshd
 * insists on its privilege-separation directory /run/sshd; we create it if missing (an empty
 * root-owned 0755 directory, which is exactly what the openssh-server package would create).
 *
 * A missing sshd is an error, never a skip (CI must fail, and outside CI failing is clearer).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export { freePort } from './net.ts';
import { freePort } from './net.ts';

export const SSHD = '/usr/sbin/sshd';

export interface Sshd {
  port: number;
  user: string;
  dir: string;
  /** Lines sshd wrote to stderr so far (LogLevel VERBOSE: "Accepted publickey … SHA256:…"). */
  log(): string;
  /** Options for `ssh` that reach this server with no user config and no known_hosts. */
  sshOptions(): string[];
  stop(): Promise<void>;
}

export function requireOpenSsh(): void {
  for (const bin of [SSHD, '/usr/bin/ssh', '/usr/bin/ssh-add', '/usr/bin/ssh-keygen', '/usr/bin/ssh-agent']) {
    if (!existsSync(bin)) {
      throw new Error(`${bin} is missing: install openssh-client and openssh-server (apt-get install -y openssh-server)`);
    }
  }
}

export async function startSshd(authorizedKeys: string): Promise<Sshd> {
  requireOpenSsh();
  if (process.getuid?.() === 0 && !existsSync('/run/sshd')) mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  const dir = mkdtempSync(join(tmpdir(), 'custos-sshd-'));
  const hostKey = join(dir, 'host_ed25519');
  const kg = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', hostKey]);
  if (kg.status !== 0) throw new Error(`ssh-keygen for the host key failed: ${kg.stderr}`);
  writeFileSync(join(dir, 'authorized_keys'), authorizedKeys, { mode: 0o600 });
  const port = await freePort();
  const conf = join(dir, 'sshd_config');
  writeFileSync(
    conf,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKey}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin prohibit-password',
      'StrictModes no',
      'UsePAM no',
      'PrintMotd no',
      'LogLevel VERBOSE',
      'MaxStartups 100:30:200',
      '',
    ].join('\n'),
  );
  const check = spawnSync(SSHD, ['-t', '-f', conf]);
  if (check.status !== 0) throw new Error(`sshd rejected its test config: ${check.stderr}`);

  const child: ChildProcess = spawn(SSHD, ['-D', '-e', '-f', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr!.on('data', (d: Buffer) => { log += d.toString('utf8'); });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sshd did not start: ${log}`)), 15_000);
    const onData = (): void => {
      if (log.includes(`Server listening on 127.0.0.1 port ${port}`)) {
        clearTimeout(timer);
        child.stderr!.off('data', onData);
        resolve();
      }
    };
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`sshd exited with ${code}: ${log}`));
    });
  });

  const user = userInfo().username;
  return {
    port,
    user,
    dir,
    log: () => log,
    sshOptions: () => [
      '-F', '/dev/null',
      '-p', String(port),
      '-o', 'IdentitiesOnly=no',
      '-o', 'StrictHostKeyChecking=no',
      '-o', 'UserKnownHostsFile=/dev/null',
      '-o', 'BatchMode=yes',
      '-o', 'PreferredAuthentications=publickey',
      '-o', 'LogLevel=ERROR',
    ],
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
