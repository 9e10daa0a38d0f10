/**
 * Shared helpers for the SSH tests and bench: real keys from ssh-keygen, and a local stand-in for
 * the Custos service's SSH contract (POST /api/v1/ssh/identities and /sign) that signs with the
 * real ssh kind. The stand-in is what is mocked here: tokens, grants and the workspace actor are the
 * service's; the end-to-end test through the real service lives with the service.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sshKind, type SshConfig } from '../../src/kinds/ssh/index.ts';
import type { SecretFields } from '../../src/kinds/credential-kind.ts';

export interface KeyPair {
  dir: string;
  privatePath: string;
  publicPath: string;
  pem: Buffer;
  publicLine: string;
  /** `ssh-keygen -lf` output, e.g. `256 SHA256:… comment (ED25519)` */
  keygenFingerprintLine: string;
  fingerprint: string;
}

export function run(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; input?: string; cwd?: string } = {}) {
  const r = spawnSync(cmd, args, { env: opts.env ?? process.env, input: opts.input, cwd: opts.cwd, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

/**
 * Async variant: required whenever the command talks to a server living in this process (the
 * contract stand-in, the recording proxy), which spawnSync would starve by blocking the event loop.
 */
export function runAsync(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.stdout.on('data', (d: Buffer) => { stdout += d; });
    child.stderr.on('data', (d: Buffer) => { stderr += d; });
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}

const keyDirs: string[] = [];
/** Removes every key directory makeKey created in this process (call from test.after.always). */
export function removeKeyDirs(): void {
  for (const d of keyDirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

export function makeKey(opts: { type?: string; passphrase?: string; comment?: string; extra?: string[] } = {}): KeyPair {
  const dir = mkdtempSync(join(tmpdir(), 'custos-sshkey-'));
  keyDirs.push(dir);
  const privatePath = join(dir, 'id');
  const r = run('ssh-keygen', ['-q', '-t', opts.type ?? 'ed25519', '-N', opts.passphrase ?? '', '-C', opts.comment ?? 'test@custos', ...(opts.extra ?? []), '-f', privatePath]);
  if (r.code !== 0) throw new Error(`ssh-keygen failed: ${r.stderr}`);
  const lf = run('ssh-keygen', ['-lf', `${privatePath}.pub`]).stdout.trim();
  return {
    dir,
    privatePath,
    publicPath: `${privatePath}.pub`,
    pem: readFileSync(privatePath),
    publicLine: readFileSync(`${privatePath}.pub`, 'utf8').trim(),
    keygenFingerprintLine: lf,
    fingerprint: lf.split(' ')[1]!,
  };
}

export function secretOf(key: KeyPair, passphrase?: string): Record<string, Buffer> {
  const s: Record<string, Buffer> = { privateKey: Buffer.from(key.pem) };
  if (passphrase !== undefined) s['passphrase'] = Buffer.from(passphrase);
  return s;
}

export function randomToken(): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return 'custos_ssh_' + Array.from(randomBytes(38), (b) => alphabet[b % 62]).join('');
}

export type ContractMode = 'ok' | 'revoked' | 'deleted' | 'garbage-signature';

export interface ContractServer {
  url: string;
  token: string;
  mode: ContractMode;
  counts: { identities: number; sign: number };
  /** Every request body and Authorization header the server saw (for marker checks). */
  seen: string[];
  keys: Array<{ config: SshConfig }>;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** The service's SSH contract, backed by the real ssh kind's deriveConfig and sign. */
export async function startContractServer(
  keys: Array<{ secret: SecretFields; label?: string }>, token = randomToken(),
): Promise<ContractServer> {
  const held = keys.map((k) => ({
    secret: k.secret,
    config: sshKind.deriveConfig!(k.secret, k.label ? { label: k.label } : {}),
  }));
  const state: ContractServer = {
    url: '',
    token,
    mode: 'ok',
    counts: { identities: 0, sign: 0 },
    seen: [],
    keys: held.map((h) => ({ config: h.config })),
    close: async () => {},
  };
  const fail = (res: import('node:http').ServerResponse, status: number, code: string, message: string): void => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { code, message } }));
  };
  const server: Server = createServer(async (req, res) => {
    const body = await readBody(req);
    state.seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? ''} ${body}`);
    if (req.method !== 'POST') return fail(res, 405, 'CUSTOS_ERR_VALIDATION', 'POST only');
    if (req.headers.authorization !== `Bearer ${token}` || state.mode === 'revoked') {
      return fail(res, 401, 'CUSTOS_ERR_TOKEN_INVALID', 'The SSH token is invalid, expired or revoked.');
    }
    const json = JSON.parse(body || '{}') as { keyBlob?: string; data?: string; flags?: number };
    if (req.url === '/api/v1/ssh/identities') {
      state.counts.identities++;
      const ids = state.mode === 'deleted' ? [] : held.map((h) => ({
        keyBlob: h.config.keyBlob, comment: h.config.comment, fingerprint: h.config.fingerprint, credentialId: 'cred-1',
      }));
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ identities: ids }));
    }
    if (req.url === '/api/v1/ssh/sign') {
      state.counts.sign++;
      const h = held.find((k) => k.config.keyBlob === json.keyBlob);
      if (!h || state.mode === 'deleted') return fail(res, 404, 'CUSTOS_ERR_NOT_FOUND', 'SSH key not found.');
      if (state.mode === 'garbage-signature') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ signature: Buffer.from('not a blob').toString('base64') }));
      }
      // As the actor does: hand the kind copies, zero them right after.
      const secret = Object.fromEntries(Object.entries(h.secret).map(([k, v]) => [k, Buffer.from(v)]));
      try {
        const sig = sshKind.sign(secret, h.config, Buffer.from(json.data ?? '', 'base64'), json.flags ?? 0);
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ signature: sig.toString('base64') }));
      } finally {
        for (const v of Object.values(secret)) v.fill(0);
      }
    }
    return fail(res, 404, 'CUSTOS_ERR_NOT_FOUND', 'Not found.');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  state.close = () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); });
  return state;
}

/** A base64 view of the key's private section body, for "never appears" checks. */
export function pemBody(pem: Buffer): string {
  return pem.toString('utf8').replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
}
