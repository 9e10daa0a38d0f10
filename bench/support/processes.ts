/** Processes benchmarks run against: an upstream, nginx, and a real `custos serve`. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export { freePort } from '../../test/support/net.ts';
import { freePort } from '../../test/support/net.ts';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

async function waitFor(url: string, ms = 30_000): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    try {
      const r = await fetch(url);
      if (r.status < 500) return;
    } catch {
      /* not yet */
    }
    if (Date.now() > until) throw new Error(`timed out waiting for ${url}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const UPSTREAM_JS = `
const http = require('http');
const body = JSON.stringify({ ok: true, items: [1, 2, 3], note: 'benchmark upstream' });
http.createServer((req, res) => { req.resume(); req.on('end', () => { res.setHeader('content-type', 'application/json'); res.end(body); }); })
  .listen(Number(process.argv[1]), '127.0.0.1');
`;

export async function startUpstreamProcess(): Promise<{ url: string; port: number; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(process.execPath, ['-e', UPSTREAM_JS, String(port)], { stdio: 'ignore' });
  await waitFor(`http://127.0.0.1:${port}/`);
  return { url: `http://127.0.0.1:${port}`, port, child };
}

export async function startNginx(upstreamPort: number, authorization: string): Promise<{ url: string; child: ChildProcess } | null> {
  if (!existsSync('/usr/sbin/nginx')) return null;
  const dir = mkdtempSync(path.join(tmpdir(), 'custos-nginx-'));
  const port = await freePort();
  const conf = path.join(dir, 'nginx.conf');
  writeFileSync(conf, `
worker_processes 1;
error_log ${dir}/error.log warn;
pid ${dir}/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream up { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "${authorization}";
    }
  }
}
`);
  const child = spawn('/usr/sbin/nginx', ['-p', dir, '-c', conf, '-g', 'daemon off;'], { stdio: 'ignore' });
  await waitFor(`http://127.0.0.1:${port}/`);
  return { url: `http://127.0.0.1:${port}`, child };
}

export interface CustosProcess {
  url: string;
  child: ChildProcess;
  dataDir: string;
  metrics(): Promise<Record<string, number>>;
}

export async function startCustosProcess(env: Record<string, string> = {}): Promise<CustosProcess> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'custos-bench-'));
  const port = await freePort();
  // BENCH_NODE_ARGS: extra node flags for the server (e.g. --cpu-prof --cpu-prof-dir=/tmp/prof).
  const nodeArgs = process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : [];
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'src/cli/main.ts', 'serve'], {
    cwd: ROOT, stdio: ['ignore', 'ignore', process.env.BENCH_SERVER_STDERR ? 'inherit' : 'ignore'],
    env: { ...process.env, CUSTOS_DATA_DIR: dataDir, CUSTOS_PORT: String(port), CUSTOS_LOG_LEVEL: 'warn', CUSTOS_SCRYPT_COST: '16384',
      CUSTOS_MCP_RATE_PER_MINUTE: '100000000', ...env },
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`${url}/healthz`);
  return {
    url, child, dataDir,
    async metrics() {
      const text = await (await fetch(`${url}/metrics`)).text();
      return Object.fromEntries(text.trim().split('\n').map((l) => l.split(' ')).map(([k, v]) => [k!.replace(/^custos_/, ''), Number(v)]));
    },
  };
}

/** A signed-up person with a cookie and CSRF token, for setting up benchmark fixtures. */
export async function person(url: string): Promise<{ post(p: string, body: unknown): Promise<any>; workspaceId: string; email: string }> {
  const email = `bench-${Date.now()}@example.com`;
  const r = await fetch(`${url}/api/v1/auth/signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: 'correct horse battery staple' }) });
  const body = (await r.json()) as { csrfToken: string; workspace: { id: string } };
  const cookie = r.headers.get('set-cookie')!.split(';')[0]!;
  return {
    email,
    workspaceId: body.workspace.id,
    async post(p, b) {
      const res = await fetch(`${url}/api/v1${p}`, { method: 'POST', headers: { 'content-type': 'application/json', cookie, 'x-csrf-token': body.csrfToken }, body: JSON.stringify(b) });
      const json = await res.json();
      if (res.status >= 300) throw new Error(`${p}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    },
  };
}

export function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
