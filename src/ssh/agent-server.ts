/**
 * The local ssh-agent endpoint: a Unix socket at a private path, serving agent-protocol.ts and
 * forwarding to a SignerClient (the Custos service). Like OpenSSH's agent, the socket lives in a
 * fresh 0700 directory under the temp dir and is itself 0600, so only this user can reach it (node
 * has no getpeereid, so the file modes are the access check; see docs/ssh-agent.md).
 */
import { mkdtemp, rm, chmod, unlink, stat } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { CustosError, isCustosError } from '../errors.ts';
import { serveConnection, type AgentEvent, MAX_FRAME_BYTES } from './agent-protocol.ts';
import type { SignerClient } from './signer-client.ts';

/** One line, no newline: written to stderr (foreground) or the agent's log file (daemon). */
export type AgentLog = (line: string) => void;

export interface AgentServerOptions {
  client: SignerClient;
  /** Where to bind; default a fresh private directory like OpenSSH's /tmp/ssh-XXXX/agent.<pid>. */
  socketPath?: string | undefined;
  /** The pid in the default socket name (OpenSSH uses the launching process's pid). */
  namePid?: number;
  log: AgentLog;
  /** Also log served requests and unsupported extensions (session-bind happens on every login). */
  verbose?: boolean;
  maxFrame?: number;
}

export interface RunningAgent {
  readonly socketPath: string;
  /** The private directory we created (and remove on close), if we chose the path. */
  readonly ownedDir: string | undefined;
  close(): Promise<void>;
}

/** A fresh 0700 directory under the temp dir (mkdtemp creates it 0700 atomically). */
export async function createPrivateSocketDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'custos-ssh-'));
  await chmod(dir, 0o700);
  return dir;
}

function errorText(err: unknown): string {
  if (isCustosError(err)) return err.message;
  if (err instanceof Error) return `internal error (${err.name})`;
  return 'internal error';
}

/** Turns protocol events into log lines: one line per failure, nothing secret in any of them. */
export function eventLogger(log: AgentLog, verbose = false): (e: AgentEvent) => void {
  return (e) => {
    switch (e.kind) {
      case 'service-error':
        log(`${e.request === 'sign' ? 'sign' : 'list identities'} failed, answered SSH_AGENT_FAILURE: ${errorText(e.error)}`);
        break;
      case 'bad-service-answer':
        log('sign failed, answered SSH_AGENT_FAILURE: the service returned a malformed signature');
        break;
      case 'refused':
        log(`refused ${e.what}: keys are held by the Custos service, this agent only lists and signs`);
        break;
      case 'malformed':
        log(`answered SSH_AGENT_FAILURE to a malformed request (${e.reason})`);
        break;
      case 'oversized':
        log(`closed a connection that sent a frame over ${MAX_FRAME_BYTES} bytes`);
        break;
      case 'unsupported':
        if (verbose) log(`answered SSH_AGENT_FAILURE to unsupported ${e.what}`);
        break;
      case 'served':
        if (verbose) log(`served ${e.request}`);
        break;
    }
  };
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

export async function startAgentServer(options: AgentServerOptions): Promise<RunningAgent> {
  let ownedDir: string | undefined;
  let socketPath = options.socketPath;
  if (!socketPath) {
    ownedDir = await createPrivateSocketDir();
    socketPath = join(ownedDir, `agent.${options.namePid ?? process.pid}`);
  } else if (await exists(socketPath)) {
    // Never unlink a path someone chose: it may be another agent's live socket.
    throw new CustosError('CUSTOS_ERR_CONFLICT', `${socketPath} already exists; remove it or choose another path with -a`);
  }

  const onEvent = eventLogger(options.log, options.verbose);
  const sockets = new Set<Socket>();
  // allowHalfOpen: a client may send its requests and shut its write side; it still gets answers.
  const server: Server = createServer({ allowHalfOpen: true }, (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    serveConnection(socket, { client: options.client, onEvent, maxFrame: options.maxFrame ?? MAX_FRAME_BYTES });
  });

  // Create the socket 0600 from the start (no window where it is group/world accessible).
  const oldMask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    if (ownedDir) await rm(ownedDir, { recursive: true, force: true });
    const code = (err as { code?: string }).code;
    throw new CustosError('CUSTOS_ERR_UNAVAILABLE', `cannot listen on ${socketPath} (${code ?? 'error'})`);
  } finally {
    process.umask(oldMask);
  }
  await chmod(socketPath, 0o600);
  server.on('error', (err) => options.log(`socket error: ${errorText(err)}`));

  let closing: Promise<void> | undefined;
  const path = socketPath;
  return {
    socketPath: path,
    ownedDir,
    close(): Promise<void> {
      closing ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          for (const s of sockets) s.destroy();
        });
        await unlink(path).catch(() => {});
        if (ownedDir && dirname(path) === ownedDir) await rm(ownedDir, { recursive: true, force: true });
      })();
      return closing;
    },
  };
}
