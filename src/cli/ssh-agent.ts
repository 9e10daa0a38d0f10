/**
 * `custos ssh-agent [-s|-c] [-D|-d] [-a SOCKET] | -k`: an ssh-agent whose keys live in the Custos
 * service. Started like OpenSSH's (`eval "$(custos ssh-agent)"`), it prints the same shell lines,
 * daemonises, and serves identities and signatures by forwarding them to CUSTOS_URL with
 * CUSTOS_SSH_TOKEN. It holds no key; key management requests are refused.
 *
 * Daemonising: node cannot fork, so the command re-spawns itself (same node, same execArgv so tsx
 * keeps working) detached in its own session, with a pipe on fd 3. The child binds the socket and
 * writes `READY <path>` (or `ERROR <message>`) to the pipe; the parent prints the shell lines only
 * after READY, so `eval` never exports a socket that does not exist yet.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { isCustosError } from '../errors.ts';
import { startAgentServer, type AgentLog, type RunningAgent } from '../ssh/agent-server.ts';
import { HttpSignerClient, checkSshToken, parseServiceUrl } from '../ssh/service-client.ts';

type Env = Record<string, string | undefined>;

export interface SshAgentCommandOptions {
  stdout?: (text: string) => void;
  stderr?: (text: string) => void;
  /**
   * How to re-run this command (arguments after `process.execPath`, before our own flags). Default:
   * process.execArgv + whatever precedes `argv` in process.argv (e.g. `src/cli/main.ts ssh-agent`).
   */
  selfCommand?: string[];
  /** How long the parent waits for the daemon's socket (default 30 s). */
  startTimeoutMs?: number;
}

/** Environment names of the parent→daemon handshake (internal). */
const READY_FD_ENV = 'CUSTOS_SSH_AGENT_READY_FD';
const NAME_PID_ENV = 'CUSTOS_SSH_AGENT_NAME_PID';
/** Optional: a persistent log file for the daemon (default: agent.log next to the socket). */
export const LOG_ENV = 'CUSTOS_SSH_AGENT_LOG';

const USAGE = `usage: custos ssh-agent [-c | -s] [-D | -d] [-a bind_address]
       custos ssh-agent [-c | -s] -k

  Serves the ssh-agent protocol on a private socket and forwards list/sign requests to the Custos
  service. Needs CUSTOS_URL and CUSTOS_SSH_TOKEN. Start with:  eval "$(custos ssh-agent)"

  -s   print Bourne-shell commands (default unless $SHELL ends in csh)
  -c   print C-shell commands
  -k   kill the agent named by $SSH_AGENT_PID
  -D   run in the foreground (log to stderr)
  -d   like -D, and also log every request
  -a   bind the socket at this path instead of a fresh private directory
`;

interface Parsed {
  shell: 'sh' | 'csh' | undefined;
  kill: boolean;
  foreground: boolean;
  verbose: boolean;
  socketPath: string | undefined;
  help: boolean;
}

class UsageError extends Error {}

function parseArgs(argv: string[]): Parsed {
  const p: Parsed = { shell: undefined, kill: false, foreground: false, verbose: false, socketPath: undefined, help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') { p.help = true; continue; }
    if (!arg.startsWith('-') || arg === '-' || arg.startsWith('--')) {
      throw new UsageError(`unexpected argument "${arg.slice(0, 40)}" (running a command under the agent is not supported; use eval)`);
    }
    // Clustered short options, as getopt allows: -sD, -Da /path, -a/path.
    for (let j = 1; j < arg.length; j++) {
      const c = arg[j]!;
      switch (c) {
        case 's': p.shell = 'sh'; break;
        case 'c': p.shell = 'csh'; break;
        case 'k': p.kill = true; break;
        case 'D': p.foreground = true; break;
        case 'd': p.foreground = true; p.verbose = true; break;
        case 'a': {
          const rest = arg.slice(j + 1);
          const value = rest.length > 0 ? rest : argv[++i];
          if (!value) throw new UsageError('-a needs a socket path');
          p.socketPath = value;
          j = arg.length;
          break;
        }
        default:
          throw new UsageError(`unknown option -${c}`);
      }
    }
  }
  if (p.kill && (p.foreground || p.socketPath)) throw new UsageError('-k cannot be combined with -D, -d or -a');
  return p;
}

/** Quote only when needed, so the usual output is byte-for-byte what ssh-agent prints. */
function shellWord(s: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

export function startLines(shell: 'sh' | 'csh', socketPath: string, pid: number): string {
  const sock = shellWord(socketPath);
  return shell === 'csh'
    ? `setenv SSH_AUTH_SOCK ${sock};\nsetenv SSH_AGENT_PID ${pid};\necho Agent pid ${pid};\n`
    : `SSH_AUTH_SOCK=${sock}; export SSH_AUTH_SOCK;\nSSH_AGENT_PID=${pid}; export SSH_AGENT_PID;\necho Agent pid ${pid};\n`;
}

export function killLines(shell: 'sh' | 'csh', pid: number): string {
  return shell === 'csh'
    ? `unsetenv SSH_AUTH_SOCK;\nunsetenv SSH_AGENT_PID;\necho Agent pid ${pid} killed;\n`
    : `unset SSH_AUTH_SOCK;\nunset SSH_AGENT_PID;\necho Agent pid ${pid} killed;\n`;
}

function defaultShell(env: Env): 'sh' | 'csh' {
  // OpenSSH's rule: C-shell syntax when $SHELL ends in "csh" (csh, tcsh), Bourne otherwise.
  return (env['SHELL'] ?? '').endsWith('csh') ? 'csh' : 'sh';
}

function message(err: unknown): string {
  if (isCustosError(err)) return err.message;
  return err instanceof Error ? `internal error (${err.name})` : 'internal error';
}

function waitForSignal(signals: NodeJS.Signals[]): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const handler = (sig: NodeJS.Signals): void => {
      for (const s of signals) process.off(s, handler);
      resolve(sig);
    };
    for (const s of signals) process.on(s, handler);
  });
}

function fileLog(path: string): AgentLog {
  return (line) => {
    try {
      appendFileSync(path, `${new Date().toISOString()} custos ssh-agent[${process.pid}]: ${line}\n`, { mode: 0o600 });
    } catch {
      /* a full disk must not take the agent down */
    }
  };
}

export async function sshAgentCommand(argv: string[], env: Env, options: SshAgentCommandOptions = {}): Promise<number> {
  const out = options.stdout ?? ((s: string) => void process.stdout.write(s));
  const err = options.stderr ?? ((s: string) => void process.stderr.write(s));
  let args: Parsed;
  try {
    args = parseArgs(argv);
  } catch (e) {
    err(`custos ssh-agent: ${(e as Error).message}\n${USAGE}`);
    return 1;
  }
  if (args.help) {
    out(USAGE);
    return 0;
  }
  const shell = args.shell ?? defaultShell(env);

  if (args.kill) return killAgent(env, shell, out, err);

  let client: HttpSignerClient;
  try {
    const token = checkSshToken(env['CUSTOS_SSH_TOKEN']);
    const url = parseServiceUrl(env['CUSTOS_URL']);
    client = new HttpSignerClient({ baseUrl: url.href, token });
  } catch (e) {
    err(`custos ssh-agent: ${message(e)}\n`);
    return 1;
  }

  const readyFd = env[READY_FD_ENV];
  if (readyFd !== undefined) return runDaemonChild(Number(readyFd), env, args, client);
  if (args.foreground) return runForeground(args, shell, client, out, err);
  return daemonise(argv, env, args, shell, options, out, err);
}

function killAgent(env: Env, shell: 'sh' | 'csh', out: (s: string) => void, err: (s: string) => void): number {
  const raw = env['SSH_AGENT_PID'];
  if (!raw) {
    err('custos ssh-agent: SSH_AGENT_PID not set, cannot kill agent\n');
    return 1;
  }
  const pid = Number(raw);
  if (!/^\d+$/.test(raw) || pid < 2) {
    err('custos ssh-agent: SSH_AGENT_PID is not a valid pid\n');
    return 1;
  }
  try {
    process.kill(pid, 'SIGTERM');
  } catch (e) {
    err(`custos ssh-agent: cannot kill agent pid ${pid} (${(e as { code?: string }).code ?? 'error'})\n`);
    return 1;
  }
  out(killLines(shell, pid));
  return 0;
}

async function serveUntilSignal(agent: RunningAgent, log: AgentLog, signals: NodeJS.Signals[]): Promise<number> {
  const sig = await waitForSignal(signals);
  log(`received ${sig}, removing ${agent.socketPath} and exiting`);
  await agent.close();
  return 0;
}

async function runForeground(
  args: Parsed, shell: 'sh' | 'csh', client: HttpSignerClient, out: (s: string) => void, err: (s: string) => void,
): Promise<number> {
  const log: AgentLog = (line) => err(`custos ssh-agent[${process.pid}]: ${line}\n`);
  let agent: RunningAgent;
  try {
    agent = await startAgentServer({ client, socketPath: args.socketPath, log, verbose: args.verbose });
  } catch (e) {
    err(`custos ssh-agent: ${message(e)}\n`);
    return 1;
  }
  out(startLines(shell, agent.socketPath, process.pid));
  return serveUntilSignal(agent, log, ['SIGTERM', 'SIGINT', 'SIGHUP']);
}

/** The detached child: bind, report READY on the pipe, serve until SIGTERM. */
async function runDaemonChild(fd: number, env: Env, args: Parsed, client: HttpSignerClient): Promise<number> {
  delete process.env[READY_FD_ENV];
  const report = (line: string): void => {
    try {
      writeSync(fd, `${line}\n`);
      closeSync(fd);
    } catch {
      /* the parent gave up waiting; nothing to tell */
    }
  };
  const namePid = Number(env[NAME_PID_ENV]) || process.pid;
  let agent: RunningAgent;
  let log: AgentLog = () => {};
  try {
    agent = await startAgentServer({ client, socketPath: args.socketPath, namePid, log: (l) => log(l), verbose: args.verbose });
  } catch (e) {
    report(`ERROR ${message(e).replace(/\n/g, ' ')}`);
    return 1;
  }
  const logPath = env[LOG_ENV] || (agent.ownedDir ? join(agent.ownedDir, 'agent.log') : `${agent.socketPath}.log`);
  log = fileLog(logPath);
  process.on('uncaughtException', (e) => {
    log(`crashed: ${message(e)}`);
    void agent.close().finally(() => process.exit(70));
  });
  log(`listening on ${agent.socketPath} for ${new URL(env['CUSTOS_URL']!).origin}`);
  report(`READY ${agent.socketPath}`);
  // No controlling terminal after setsid, so SIGHUP only comes from someone meaning it: ignore it
  // as OpenSSH's agent does; SIGTERM (from -k) and SIGINT stop us.
  process.on('SIGHUP', () => {});
  return serveUntilSignal(agent, log, ['SIGTERM', 'SIGINT']);
}

function selfCommand(argv: string[], options: SshAgentCommandOptions): string[] | undefined {
  if (options.selfCommand) return options.selfCommand;
  const all = process.argv;
  const tail = all.slice(all.length - argv.length);
  if (argv.length > all.length - 1 || tail.some((a, i) => a !== argv[i])) return undefined;
  return [...process.execArgv, ...all.slice(1, all.length - argv.length)];
}

async function daemonise(
  argv: string[], env: Env, args: Parsed, shell: 'sh' | 'csh', options: SshAgentCommandOptions,
  out: (s: string) => void, err: (s: string) => void,
): Promise<number> {
  const self = selfCommand(argv, options);
  if (!self) {
    err('custos ssh-agent: cannot work out how to re-run this command to daemonise; use -D\n');
    return 1;
  }
  const childArgs = [...self, args.verbose ? '-d' : '-D', ...(args.socketPath ? ['-a', args.socketPath] : [])];
  const childEnv: Env = { ...env, [READY_FD_ENV]: '3', [NAME_PID_ENV]: String(process.pid) };
  let child;
  try {
    child = spawn(process.execPath, childArgs, {
      detached: true, // its own session: closing the terminal does not stop the agent
      stdio: ['ignore', 'ignore', 'ignore', 'pipe'],
      env: childEnv as NodeJS.ProcessEnv,
      // cwd stays the parent's: execArgv such as `--import tsx` resolve relative to it.
    });
  } catch (e) {
    err(`custos ssh-agent: cannot start the agent (${message(e)})\n`);
    return 1;
  }
  const pipe = child.stdio[3] as NodeJS.ReadableStream & { destroy(): void };
  const timeoutMs = options.startTimeoutMs ?? 30_000;
  const answer = await new Promise<string>((resolve) => {
    let buf = '';
    const timer = setTimeout(() => resolve('ERROR the agent did not start within ' + timeoutMs + ' ms'), timeoutMs);
    const done = (line: string): void => {
      clearTimeout(timer);
      resolve(line);
    };
    pipe.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      const nl = buf.indexOf('\n');
      if (nl >= 0) done(buf.slice(0, nl));
    });
    pipe.on('error', () => done('ERROR the agent closed its start-up pipe'));
    child.once('exit', (code) => done(`ERROR the agent exited during start-up (code ${code ?? 'signal'})`));
    child.once('error', (e) => done(`ERROR cannot start the agent (${(e as { code?: string }).code ?? 'error'})`));
  });
  pipe.destroy();
  child.unref();
  if (!answer.startsWith('READY ')) {
    if (child.exitCode === null && child.pid) {
      try { process.kill(child.pid, 'SIGTERM'); } catch { /* already gone */ }
    }
    err(`custos ssh-agent: ${answer.replace(/^ERROR /, '')}\n`);
    return 1;
  }
  const socketPath = answer.slice('READY '.length);
  out(startLines(shell, socketPath, child.pid!));
  return 0;
}
