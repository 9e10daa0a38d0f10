/**
 * The one HTTP call of `custos run`: POST {CUSTOS_URL}/api/v1/ci/secrets with the CI token.
 * node:http/node:https rather than fetch: the global fetch loads Node's bundled undici on first use,
 * which costs start-up time on every CI command.
 *
 * Security: the token goes only in the Authorization header and never into a message; plain http is
 * refused except to loopback (it would put the token and every secret on the wire in clear); the
 * response body (plaintext secrets) is collected into Buffers that are zeroed once parsed. Redirects
 * are not followed (a redirect would replay the token to another origin).
 */
import http from 'node:http';
import https from 'node:https';
import { CiRunError, EXIT } from './exit-codes.ts';
import { parseCiSecretsResponse, type CiSecretsRequest, type CiSecretsResponse } from './contract.ts';

export const CI_SECRETS_PATH = '/api/v1/ci/secrets';
/** Largest answer accepted: a workspace's secrets are KiBs; this only stops a runaway body. */
const MAX_BODY_BYTES = 16 * 1024 * 1024;
const DEFAULT_TIMEOUT_MS = 30_000;

/** `custos_ci_` + base62 body: DESIGN.md §6 (32+ random chars and a 6-char checksum). */
const CI_TOKEN_RE = /^custos_ci_[0-9A-Za-z]{38,}$/;

/** The token from the environment, trimmed (secrets pasted with a trailing newline are common). */
export function readCiToken(raw: string | undefined): string {
  const token = raw?.trim() ?? '';
  if (token === '') {
    throw new CiRunError(EXIT.USAGE, 'CUSTOS_CI_TOKEN is not set; set it to a CI token (custos_ci_…) from your CI system\'s secret store.');
  }
  if (!CI_TOKEN_RE.test(token)) {
    const kind = /^custos_([a-z]+)_/.exec(token)?.[1];
    // Name the token type when recognisable, never echo the value.
    throw new CiRunError(EXIT.USAGE, kind && kind !== 'ci'
      ? `CUSTOS_CI_TOKEN holds a custos_${kind}_… token; custos run needs a CI token (custos_ci_…).`
      : 'CUSTOS_CI_TOKEN does not look like a Custos CI token (custos_ci_ followed by letters and digits).');
  }
  return token;
}

function isLoopbackHost(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** The secrets endpoint under CUSTOS_URL (which may carry a path prefix, e.g. https://x/custos). */
export function secretsUrl(rawBase: string | undefined, allowInsecureHttp: boolean): URL {
  const base = rawBase?.trim() ?? '';
  if (base === '') throw new CiRunError(EXIT.USAGE, 'CUSTOS_URL is not set; set it to the Custos service address, e.g. https://custos.example.com.');
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    throw new CiRunError(EXIT.USAGE, 'CUSTOS_URL is not a valid URL.');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new CiRunError(EXIT.USAGE, 'CUSTOS_URL must be an https:// URL.');
  }
  if (url.protocol === 'http:' && !isLoopbackHost(url.hostname) && !allowInsecureHttp) {
    throw new CiRunError(EXIT.USAGE, 'CUSTOS_URL uses plain http:// to a non-loopback host, which would send the token and secrets unencrypted; use https:// (or set CUSTOS_INSECURE_HTTP=1 if TLS is terminated on this host\'s own network path).');
  }
  const out = new URL(url.origin);
  out.pathname = url.pathname.replace(/\/+$/, '') + CI_SECRETS_PATH;
  return out;
}

/** Service text is shown to the user: one line, printable, bounded (a hostile or broken proxy
 *  could otherwise write terminal escapes into the CI log). */
function clean(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ').trim().slice(0, 300);
}

function describeServiceError(status: number, body: Buffer): string {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { error?: { code?: unknown; message?: unknown } };
    const code = typeof parsed.error?.code === 'string' ? clean(parsed.error.code) : undefined;
    const message = typeof parsed.error?.message === 'string' ? clean(parsed.error.message) : undefined;
    if (code || message) return [code, message].filter(Boolean).join(': ');
  } catch {
    // not JSON: fall through to the bare status
  }
  return `HTTP ${status}`;
}

export interface FetchCiSecretsOptions {
  url: URL;
  token: string;
  request: CiSecretsRequest;
  timeoutMs?: number;
}

/** Fetches and validates the secrets, or throws a CiRunError with the documented exit code. */
export function fetchCiSecrets(opts: FetchCiSecretsOptions): Promise<CiSecretsResponse> {
  const payload = Buffer.from(JSON.stringify(opts.request));
  const client = opts.url.protocol === 'https:' ? https : http;
  const where = opts.url.origin; // origin only: no userinfo, no path, in messages
  return new Promise<CiSecretsResponse>((resolve, reject) => {
    const req = client.request(opts.url, {
      method: 'POST',
      headers: {
        // The token is a string because the header API needs one; it lives as long as this request.
        authorization: `Bearer ${opts.token}`,
        'content-type': 'application/json',
        accept: 'application/json',
        'content-length': String(payload.length),
        'user-agent': 'custos-run',
      },
      timeout: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    });
    req.on('timeout', () => {
      req.destroy(new CiRunError(EXIT.UNREACHABLE, `the Custos service at ${where} did not answer within ${Math.round((opts.timeoutMs ?? DEFAULT_TIMEOUT_MS) / 1000)} s.`));
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err instanceof CiRunError) return reject(err);
      reject(new CiRunError(EXIT.UNREACHABLE, `cannot reach the Custos service at ${where} (${err.code ?? clean(err.message)}).`));
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BODY_BYTES) {
          for (const c of chunks) c.fill(0);
          chunks.length = 0;
          req.destroy(new CiRunError(EXIT.UNREACHABLE, `the Custos service at ${where} sent an answer larger than ${MAX_BODY_BYTES} bytes.`));
          return;
        }
        chunks.push(chunk);
      });
      res.on('error', () => { /* reported through req's 'error' */ });
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        for (const c of chunks) c.fill(0);
        try {
          resolve(interpret(res.statusCode ?? 0, body, where));
        } catch (err) {
          reject(err);
        } finally {
          body.fill(0); // plaintext secrets: the parsed strings are all that remain (see docs/ci.md)
        }
      });
    });
    req.end(payload);
  });
}

function interpret(status: number, body: Buffer, where: string): CiSecretsResponse {
  if (status === 200) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      throw new CiRunError(EXIT.UNREACHABLE, `the Custos service at ${where} sent an answer that is not JSON.`);
    }
    const result = parseCiSecretsResponse(parsed);
    if (typeof result === 'string') throw new CiRunError(EXIT.UNREACHABLE, `the Custos service at ${where} sent an unexpected answer: ${result}.`);
    return result;
  }
  const detail = describeServiceError(status, body);
  if (status === 401) {
    throw new CiRunError(EXIT.AUTH, `the CI token was refused (${detail}). It may be revoked, expired or mistyped; mint a new one.`);
  }
  if (status === 403) {
    throw new CiRunError(EXIT.AUTH, `permission denied (${detail}). CI injection needs the \`reveal\` permission on the workspace.`);
  }
  if (status === 404) throw new CiRunError(EXIT.NOT_FOUND, `not found (${detail}).`);
  if (status === 400 || status === 422) throw new CiRunError(EXIT.USAGE, `the Custos service refused the request (${detail}).`);
  throw new CiRunError(EXIT.UNREACHABLE, `the Custos service at ${where} answered HTTP ${status} (${detail}).`);
}
