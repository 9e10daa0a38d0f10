/**
 * Runs the command of `custos run` as a child process and reports its fate as an exit code:
 * the child's own code, 128 + signal number if a signal killed it, 127 if it was not found, 126 if
 * it could not be executed. No shell: argv goes to execvp as is, so nothing is re-parsed or expanded.
 *
 * stdin is inherited (interactive tools and `< file` work unchanged). stdout and stderr go through
 * one MaskStream each, so a secret the command prints becomes `***` in the CI log; with --no-mask
 * they are inherited directly. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to `custos run` are
 * forwarded to the child, which decides how to stop; `custos run` stays alive until the child is
 * gone and its output is flushed, so a CI runner cancelling the job sees the child's own shutdown.
 */
import { spawn, type StdioOptions } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { MaskStream, maskPatterns } from './mask-stream.ts';
import { CiRunError, EXIT } from './exit-codes.ts';

export const FORWARDED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'] as const;

export interface RunChildOptions {
  command: string;
  args: string[];
  /** The child's complete environment. Emptied by runChild once the child has been spawned. */
  env: NodeJS.ProcessEnv;
  /** Secret values to mask; empty or mask=false → no masking. */
  secrets: string[];
  mask: boolean;
  /** The caller's streams. undefined stdin, and the process's own stdout/stderr with masking off,
   *  are inherited (no copy through this process; process.stdin is never touched). */
  stdin: Readable | undefined;
  stdout: Writable;
  stderr: Writable;
}

function ended(stream: Readable): Promise<void> {
  return new Promise((resolve) => {
    if (stream.readableEnded) return resolve();
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', () => resolve());
  });
}

export async function runChild(opts: RunChildOptions): Promise<number> {
  const outMode = (dest: Writable, own: Writable): 'inherit' | 'pipe' => (!opts.mask && dest === own ? 'inherit' : 'pipe');
  const stdio: StdioOptions = [
    opts.stdin === undefined ? 'inherit' : 'pipe',
    outMode(opts.stdout, process.stdout),
    outMode(opts.stderr, process.stderr),
  ];

  let child;
  try {
    child = spawn(opts.command, opts.args, { env: opts.env, stdio });
  } catch (err) {
    // Errors libuv does not report asynchronously (ENOTDIR, E2BIG…) are thrown here.
    throw new CiRunError(EXIT.CANNOT_EXECUTE, `cannot start ${opts.command} (${(err as NodeJS.ErrnoException).code ?? 'error'}).`);
  }
  // The environment block has been copied into the child by now (spawn is synchronous up to
  // execve). Drop our references to the secret strings; JS strings cannot be zeroed, so this only
  // shortens their life in this process's heap until GC (docs/ci.md, "Security notes").
  for (const key of Object.keys(opts.env)) delete opts.env[key];

  const drains: Promise<void>[] = [];
  const cleanups: Array<() => void> = [];
  const wire = (from: Readable | null, to: Writable): void => {
    if (!from) return;
    const last: Readable = opts.mask && opts.secrets.length > 0 ? from.pipe(new MaskStream(maskPatterns(opts.secrets))) : from;
    last.pipe(to, { end: false });
    drains.push(ended(last));
    // Our own output went away (`custos run -- cmd | head -1`): stop copying and close the child's
    // pipe, so the child's next write fails (EPIPE/ECONNRESET: Node's child pipes are socketpairs)
    // and it stops as it would in a plain pipeline, instead of custos run crashing on an unhandled
    // EPIPE while the child runs on.
    const onError = (): void => {
      last.unpipe(to);
      from.destroy();
      if (last !== from) last.destroy();
    };
    to.on('error', onError);
    cleanups.push(() => to.off('error', onError));
  };
  wire(child.stdout, opts.stdout);
  wire(child.stderr, opts.stderr);
  opts.secrets.length = 0; // the mask streams own Buffer copies now (zeroed when they end)
  if (opts.stdin && child.stdin) {
    child.stdin.on('error', () => { /* EPIPE: the child stopped reading; not our failure */ });
    opts.stdin.pipe(child.stdin);
  }

  const forward = (signal: NodeJS.Signals): void => {
    // The child may already be gone; kill() then returns false, which is fine.
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  for (const s of FORWARDED_SIGNALS) process.on(s, forward);

  try {
    return await new Promise<number>((resolve, reject) => {
      child.on('error', (err: NodeJS.ErrnoException) => {
        if (child.pid !== undefined) return; // an error after spawning (e.g. kill failure): keep waiting for close
        if (err.code === 'ENOENT') reject(new CiRunError(EXIT.COMMAND_NOT_FOUND, `command not found: ${opts.command}`));
        else if (err.code === 'EACCES' || err.code === 'EISDIR' || err.code === 'ENOEXEC') reject(new CiRunError(EXIT.CANNOT_EXECUTE, `cannot execute ${opts.command} (${err.code}).`));
        else reject(new CiRunError(EXIT.CANNOT_EXECUTE, `cannot start ${opts.command} (${err.code ?? 'error'}).`));
      });
      child.once('close', (code, signal) => {
        if (child.pid === undefined) return; // spawn failure: 'error' decides
        if (signal) resolve(128 + (osConstants.signals[signal] ?? 0));
        else resolve(code ?? 1);
      });
    }).finally(async () => {
      if (opts.stdin && child.stdin) opts.stdin.unpipe(child.stdin);
      await Promise.all(drains); // every masked byte written before we report the exit code
    });
  } finally {
    for (const c of cleanups) c();
    for (const s of FORWARDED_SIGNALS) process.off(s, forward);
  }
}
