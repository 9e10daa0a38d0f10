/**
 * Spawns the real command, `node bin/custos.mjs run …`, the way a CI job runs `custos run` (from
 * the cached bundle, bin/run-bundle.mjs), and collects its exit code and output.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const RUN_MAIN = ['bin/custos.mjs', 'run'];

export interface CustosResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  stdoutBytes: Buffer;
}

export interface Started {
  child: ChildProcess;
  /** Resolves when `text` has appeared on the child's stdout. */
  waitForStdout(text: string): Promise<void>;
  result: Promise<CustosResult>;
}

/** The test runner's environment without any CUSTOS_* settings, plus `env`. */
export function baseEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('CUSTOS_')) out[k] = v;
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete out[k];
    else out[k] = v;
  }
  return out;
}

export function startCustos(args: string[], env: Record<string, string | undefined>, stdin?: string): Started {
  const child = spawn(process.execPath, [...RUN_MAIN, ...args], { cwd: ROOT, env: baseEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const waiters: Array<{ text: string; resolve: () => void }> = [];
  child.stdout!.on('data', (c: Buffer) => {
    out.push(c);
    const all = Buffer.concat(out).toString('utf8');
    for (const w of [...waiters]) {
      if (all.includes(w.text)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  });
  child.stderr!.on('data', (c: Buffer) => err.push(c));
  if (stdin !== undefined) child.stdin!.end(stdin);
  const result = new Promise<CustosResult>((resolve) => {
    child.on('close', (code, signal) => {
      const stdoutBytes = Buffer.concat(out);
      resolve({ code, signal, stdout: stdoutBytes.toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), stdoutBytes });
    });
  });
  return {
    child,
    result,
    waitForStdout: (text) => new Promise<void>((resolve, reject) => {
      if (Buffer.concat(out).toString('utf8').includes(text)) return resolve();
      waiters.push({ text, resolve });
      void result.then((r) => reject(new Error(`exited (${r.code}) before printing ${text}; stderr: ${r.stderr}`)));
    }),
  };
}

export function runCustos(args: string[], env: Record<string, string | undefined>, stdin?: string): Promise<CustosResult> {
  return startCustos(args, env, stdin).result;
}

/** `node -e <script> args…` as a command line for after `--`. */
export function nodeScript(script: string, ...args: string[]): string[] {
  return [process.execPath, '-e', script, ...args];
}
