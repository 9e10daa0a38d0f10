/**
 * Test harness: a real Custos (real HTTP server, real database, real key backend) per test file,
 * on SQLite and on the local PostgreSQL (a fresh database per instance, dropped on close).
 * Log lines are captured so tests can prove a marker secret never reaches them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { createTestDatabase } from './pg.ts';
import { loadConfig, type DeepPartial } from '../../src/config/loader.ts';
import type { Config } from '../../src/config/schema.ts';
import { createLogger } from '../../src/log.ts';
import { createCustos, type Custos } from '../../src/compose.ts';
import { startUpstream } from './upstream.ts';

type Upstream = Awaited<ReturnType<typeof startUpstream>>;

export type DbKind = 'sqlite' | 'postgres';
export const DB_KINDS: DbKind[] = ['sqlite', 'postgres'];

export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.lines.push(chunk.toString('utf8'));
    cb();
  }
  text(): string {
    return this.lines.join('');
  }
}

export interface TestCustos {
  custos: Custos;
  url: string;
  db: DbKind;
  dataDir: string;
  logs: LogCapture;
  pgUrl: string | null;
  close(): Promise<void>;
}

export async function startCustos(db: DbKind, overrides: DeepPartial<Config> = {}, env: NodeJS.ProcessEnv = {}): Promise<TestCustos> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'custos-test-'));
  const pgdb = db === 'postgres' ? await createTestDatabase('custos_test') : null;
  const config = loadConfig(env, {
    ...overrides,
    dataDir,
    server: { port: 0, ...(overrides.server ?? {}) },
    database: { url: pgdb?.url ?? null },
    // Lower scrypt cost in tests only (documented): OWASP's 2^17 costs ~0.3 s per hash.
    auth: { scryptCost: 16384, ...(overrides.auth ?? {}) },
    log: { level: 'debug' },
  } as DeepPartial<Config>);
  const logs = new LogCapture();
  const log = createLogger({ level: 'debug', destination: logs });
  const custos = await createCustos(config, { log, env });
  const { url } = await custos.listen();
  return {
    custos, url, db, dataDir, logs, pgUrl: pgdb?.url ?? null,
    async close() {
      await custos.close();
      if (pgdb) await pgdb.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface Res<T = any> {
  status: number;
  body: T;
  headers: Headers;
  text: string;
}

/** A person's browser: keeps the session cookie and sends the CSRF token on state changes. */
export class Client {
  cookie = '';
  csrf = '';
  constructor(readonly base: string) {}

  async request<T = any>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Res<T>> {
    const h: Record<string, string> = { ...headers };
    if (this.cookie) h.cookie = this.cookie;
    if (this.csrf && !['GET', 'HEAD'].includes(method) && !('x-csrf-token' in h)) h['x-csrf-token'] = this.csrf;
    if (body !== undefined && !('content-type' in h)) h['content-type'] = 'application/json';
    const res = await fetch(this.base + path, {
      method, headers: h, ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const setCookie = res.headers.get('set-cookie');
    if (setCookie) this.cookie = setCookie.split(';')[0]!;
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON */
    }
    if (parsed && typeof parsed === 'object' && 'csrfToken' in parsed) this.csrf = (parsed as { csrfToken: string }).csrfToken;
    return { status: res.status, body: parsed as T, headers: res.headers, text };
  }

  get = <T = any>(p: string, h?: Record<string, string>) => this.request<T>('GET', p, undefined, h);
  post = <T = any>(p: string, b?: unknown, h?: Record<string, string>) => this.request<T>('POST', p, b ?? {}, h);
  put = <T = any>(p: string, b?: unknown, h?: Record<string, string>) => this.request<T>('PUT', p, b ?? {}, h);
  patch = <T = any>(p: string, b?: unknown, h?: Record<string, string>) => this.request<T>('PATCH', p, b ?? {}, h);
  del = <T = any>(p: string, h?: Record<string, string>) => this.request<T>('DELETE', p, undefined, h);

  static async signup(base: string, email = `u${randomBytes(4).toString('hex')}@example.com`, password = 'correct horse battery staple'): Promise<{ client: Client; email: string; password: string; accountId: string; workspaceId: string; orgId: string }> {
    const client = new Client(`${base}/api/v1`);
    const r = await client.post('/auth/signup', { email, password });
    if (r.status !== 201) throw new Error(`signup failed: ${r.status} ${r.text}`);
    return { client, email, password, accountId: r.body.account.id, workspaceId: r.body.workspace.id, orgId: r.body.organization.id };
  }
}

/**
 * One Custos per database kind for a test file (and, if asked, one shared recording upstream),
 * started before the file's tests and closed after them.
 */
export function perDatabase(test: { before(fn: () => Promise<void>): void; after: { always(fn: () => Promise<void>): void } }, opts: { upstream?: boolean; overrides?: DeepPartial<Config> } = {}) {
  const instances = new Map<DbKind, TestCustos>();
  let up: Upstream | undefined;
  test.before(async () => {
    if (opts.upstream) up = await startUpstream();
    for (const db of DB_KINDS) instances.set(db, await startCustos(db, opts.overrides));
  });
  test.after.always(async () => {
    for (const i of instances.values()) await i.close();
    await up?.close();
  });
  return {
    get: (db: DbKind): TestCustos => instances.get(db)!,
    get upstream(): Upstream {
      if (!up) throw new Error('perDatabase: started without { upstream: true }');
      return up;
    },
  };
}

/** Runs a CLI command in this process, capturing what it prints on stdout. */
export async function captureStdout(fn: () => Promise<number>): Promise<{ code: number; out: string }> {
  const orig = process.stdout.write.bind(process.stdout);
  let out = '';
  process.stdout.write = ((chunk: string | Uint8Array) => {
    out += chunk.toString();
    return true;
  }) as typeof process.stdout.write;
  try {
    return { code: await fn(), out };
  } finally {
    process.stdout.write = orig;
  }
}
