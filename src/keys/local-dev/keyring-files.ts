/**
 * The local-dev KEK ring on disk. Version 1 lives in the configured key file; version N ≥ 2 lives
 * beside it as `<stem>.v<N><ext>` (e.g. local-dev-kek.key, local-dev-kek.v2.key). Each file holds
 * exactly 32 random bytes, mode 0600, in a directory created 0700.
 *
 * Files are created write-then-link: the bytes go to a private temp file which is then hard-linked
 * to the final name. link() fails if the name exists, so two processes racing to create the same
 * version never overwrite each other (the loser reads the winner's key), and a crash never leaves
 * a truncated key under the final name.
 *
 * A key file readable by group or others is refused, like ssh refuses a private key: anyone who
 * can read it can unwrap every workspace key.
 */
import { randomBytes } from 'node:crypto';
import { constants as fsConstants, promises as fs } from 'node:fs';
import path from 'node:path';
import { CustosError } from '../../errors.ts';

export const LOCAL_KEK_BYTES = 32;

export function versionFilePath(keyFile: string, version: number): string {
  if (version === 1) return keyFile;
  const ext = path.extname(keyFile);
  const stem = keyFile.slice(0, keyFile.length - ext.length);
  return `${stem}.v${version}${ext}`;
}

/** Lists the versions present next to `keyFile` (1 when the key file itself exists). */
export async function listVersions(keyFile: string): Promise<number[]> {
  const dir = path.dirname(keyFile);
  const base = path.basename(keyFile);
  const ext = path.extname(base);
  const stem = base.slice(0, base.length - ext.length);
  const pattern = new RegExp(`^${escapeRegExp(stem)}\\.v([1-9][0-9]{0,8})${escapeRegExp(ext)}$`);
  let names: string[];
  try {
    names = await fs.readdir(dir);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return [];
    throw configError(`Cannot read the local-dev key directory ${dir}.`, err);
  }
  const versions: number[] = [];
  for (const name of names) {
    if (name === base) versions.push(1);
    const m = pattern.exec(name);
    if (m && Number(m[1]) >= 2) versions.push(Number(m[1]));
  }
  return versions.sort((a, b) => a - b);
}

/** Reads one version's key; refuses loose permissions and wrong sizes. Caller zeroes it. */
export async function readKeyFile(file: string): Promise<Buffer> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
  } catch (err) {
    throw configError(`Cannot open the local-dev key file ${file}.`, err);
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw configError(`The local-dev key file ${file} is not a regular file.`);
    if ((st.mode & 0o077) !== 0) {
      throw configError(
        `The local-dev key file ${file} has mode ${(st.mode & 0o777).toString(8)}; it must be 600 (chmod 600 it).`,
      );
    }
    if (st.size !== LOCAL_KEK_BYTES) {
      throw configError(`The local-dev key file ${file} must hold exactly ${LOCAL_KEK_BYTES} bytes.`);
    }
    const key = Buffer.alloc(LOCAL_KEK_BYTES);
    const { bytesRead } = await handle.read(key, 0, LOCAL_KEK_BYTES, 0);
    if (bytesRead !== LOCAL_KEK_BYTES) {
      key.fill(0);
      throw configError(`The local-dev key file ${file} could not be read completely.`);
    }
    return key;
  } finally {
    await handle.close();
  }
}

/**
 * Creates `file` with 32 fresh random bytes unless it already exists. Returns true when this call
 * created it. The parent directory is created 0700 when missing.
 */
export async function createKeyFileIfMissing(file: string): Promise<boolean> {
  const dir = path.dirname(file);
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`;
  const key = randomBytes(LOCAL_KEK_BYTES);
  try {
    const handle = await fs.open(tmp, 'wx', 0o600);
    try {
      await handle.writeFile(key);
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await fs.link(tmp, file);
      return true;
    } catch (err) {
      if (isErrno(err, 'EEXIST')) return false;
      throw err;
    }
  } catch (err) {
    if (err instanceof CustosError) throw err;
    throw configError(`Cannot create the local-dev key file ${file}.`, err);
  } finally {
    key.fill(0);
    await fs.rm(tmp, { force: true });
  }
}

export async function directoryIsPrivate(dir: string): Promise<boolean> {
  const st = await fs.stat(dir);
  return (st.mode & 0o077) === 0;
}

function configError(message: string, cause?: unknown): CustosError {
  return new CustosError('CUSTOS_ERR_CONFIG', message, { cause });
}

function isErrno(err: unknown, code: string): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === code;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
