/**
 * `custos run --format dotenv|json export`: for tools that only read secrets from a file. This
 * writes PLAINTEXT, the one place `custos run` puts secrets on disk, so it is loud about it (a
 * warning on stderr), and careful: the file is created with O_CREAT|O_EXCL at mode 0600 (no
 * following a planted symlink, no window where it is world-readable), never overwritten without
 * --force, and the formatted Buffer is zeroed after the write.
 */
import { open, unlink } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import type { EnvEntry } from './env-names.ts';
import { CiRunError, EXIT } from './exit-codes.ts';

export type ExportFormat = 'dotenv' | 'json';

/** POSIX-shell single quoting: everything literal, `'` written as `'\''`. Newlines, spaces, `$`,
 *  backslashes and quotes all survive `set -a; . file; set +a` in sh/bash. */
function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

export function formatEnv(entries: readonly EnvEntry[], format: ExportFormat): Buffer {
  if (format === 'json') {
    const obj: Record<string, string> = {};
    for (const e of entries) obj[e.name] = e.value;
    return Buffer.from(`${JSON.stringify(obj, null, 2)}\n`, 'utf8');
  }
  const lines = ['# Written by `custos run export`: PLAINTEXT secrets. Delete this file when done.'];
  for (const e of entries) lines.push(`${e.name}=${shellQuote(e.value)}`);
  return Buffer.from(`${lines.join('\n')}\n`, 'utf8');
}

function writeTo(stream: Writable, data: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.write(data, (err) => (err ? reject(err) : resolve()));
  });
}

export interface ExportOptions {
  format: ExportFormat;
  /** File path; undefined = standard output. */
  output: string | undefined;
  force: boolean;
  stdout: Writable;
  stderr: Writable;
}

export async function exportEnv(entries: readonly EnvEntry[], opts: ExportOptions): Promise<void> {
  const data = formatEnv(entries, opts.format);
  const target = opts.output === undefined ? 'standard output' : opts.output;
  try {
    if (opts.output === undefined) {
      opts.stderr.write(`custos run: WARNING: writing ${entries.length} secret value(s) in PLAINTEXT to ${target}. Anything that can read it can use them.\n`);
      // Copy for the stream (it may hold the buffer after write returns); ours is zeroed below.
      await writeTo(opts.stdout, Buffer.from(data));
      return;
    }
    let handle;
    try {
      handle = await open(opts.output, 'wx', 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (!opts.force) throw new CiRunError(EXIT.USAGE, `${opts.output} already exists; refusing to overwrite it (add --force to replace it).`);
      // Replace rather than truncate: the old file's mode and owner must not carry over, and a
      // symlink planted at the path is removed, not followed.
      await unlink(opts.output);
      handle = await open(opts.output, 'wx', 0o600);
    }
    try {
      opts.stderr.write(`custos run: WARNING: writing ${entries.length} secret value(s) in PLAINTEXT to ${target} (mode 0600). Delete it when the job is done.\n`);
      await handle.chmod(0o600); // the umask can only remove bits; this pins exactly 0600
      await handle.writeFile(data);
    } finally {
      await handle.close();
    }
  } catch (err) {
    if (err instanceof CiRunError) throw err;
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new CiRunError(EXIT.FAILURE, `cannot write ${target} (${code}).`);
  } finally {
    data.fill(0);
  }
}
