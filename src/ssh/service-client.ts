/**
 * SignerClient over HTTP: the Custos service's `/api/v1/ssh/identities` and `/api/v1/ssh/sign`,
 * authenticated with a `custos_ssh_…` token. The agent holds no key; this is its only way to one.
 *
 * Errors become CustosErrors whose message is one clear, token-free sentence fit for the agent's
 * log ("the service refused the SSH token (HTTP 401 CUSTOS_ERR_TOKEN_INVALID: …)").
 */
import { CustosError, ERROR_CODES, type ErrorCode } from '../errors.ts';
import type { Identity, SignerClient } from './signer-client.ts';

export const SSH_TOKEN_PATTERN = /^custos_ssh_[A-Za-z0-9]{32,200}$/;
export const DEFAULT_TIMEOUT_MS = 10_000;
/** The service answers with a few hundred bytes; a runaway body is not worth reading. */
const MAX_RESPONSE_BYTES = 1024 * 1024;

export interface ServiceClientOptions {
  /** CUSTOS_URL: the service's base URL (http or https). */
  baseUrl: string;
  /** CUSTOS_SSH_TOKEN. */
  token: string;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/** Checks CUSTOS_URL; returns the parsed URL or throws CUSTOS_ERR_VALIDATION (message has no userinfo). */
export function parseServiceUrl(raw: string | undefined): URL {
  if (!raw) throw new CustosError('CUSTOS_ERR_VALIDATION', 'CUSTOS_URL is not set (the URL of the Custos service, e.g. https://custos.example.com).');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'CUSTOS_URL is not a valid URL.');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'CUSTOS_URL must be an http:// or https:// URL.');
  }
  if (url.username || url.password) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'CUSTOS_URL must not contain a user name or password.');
  }
  return url;
}

export function checkSshToken(token: string | undefined): string {
  if (!token) throw new CustosError('CUSTOS_ERR_VALIDATION', 'CUSTOS_SSH_TOKEN is not set (create an SSH token in Custos and export it).');
  if (!SSH_TOKEN_PATTERN.test(token)) {
    // Say what shape is expected, never echo what was given.
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'CUSTOS_SSH_TOKEN does not look like an SSH token (expected custos_ssh_ followed by letters and digits).');
  }
  return token;
}

function knownCode(code: unknown): ErrorCode | undefined {
  return typeof code === 'string' && Object.hasOwn(ERROR_CODES, code) ? (code as ErrorCode) : undefined;
}

/** Printable, one line, bounded, and guaranteed not to contain the token. */
function clean(text: string, token: string): string {
  let t = text.replace(/[^\x20-\x7e]/g, ' ').slice(0, 200);
  if (token && t.includes(token)) t = t.split(token).join('[token]');
  return t;
}

export class HttpSignerClient implements SignerClient {
  private readonly base: URL;
  private readonly origin: string;
  private readonly token: string;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ServiceClientOptions) {
    this.base = parseServiceUrl(options.baseUrl);
    this.origin = this.base.origin;
    this.token = checkSshToken(options.token);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.fetchImpl = options.fetch ?? fetch;
  }

  async listIdentities(): Promise<Identity[]> {
    const body = await this.post('identities', {});
    const list = (body as { identities?: unknown }).identities;
    if (!Array.isArray(list)) throw this.badAnswer('identities');
    return list.map((item: unknown) => {
      const { keyBlob, comment } = (item ?? {}) as { keyBlob?: unknown; comment?: unknown };
      if (typeof keyBlob !== 'string' || keyBlob.length === 0) throw this.badAnswer('identities');
      return {
        keyBlob: Buffer.from(keyBlob, 'base64'),
        comment: typeof comment === 'string' ? comment.replace(/[\u0000-\u001f\u007f]/g, ' ').slice(0, 200) : '',
      };
    });
  }

  async sign(keyBlob: Buffer, data: Buffer, flags: number): Promise<Buffer> {
    const body = await this.post('sign', { keyBlob: keyBlob.toString('base64'), data: data.toString('base64'), flags });
    const sig = (body as { signature?: unknown }).signature;
    if (typeof sig !== 'string' || sig.length === 0) throw this.badAnswer('sign');
    return Buffer.from(sig, 'base64');
  }

  private badAnswer(what: string): CustosError {
    return new CustosError('CUSTOS_ERR_UPSTREAM', `the Custos service at ${this.origin} gave an unexpected ${what} answer`);
  }

  private async post(route: 'identities' | 'sign', payload: unknown): Promise<unknown> {
    const url = new URL(`api/v1/ssh/${route}`, this.base.href.endsWith('/') ? this.base : new URL(this.base.href + '/'));
    let res: Response;
    try {
      res = await this.fetchImpl(url, {
        method: 'POST',
        // The token must be a string for the header; it came from the environment as one.
        headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(payload),
        redirect: 'error', // never replay the bearer token to wherever a redirect points
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      const timedOut = (err as { name?: string }).name === 'TimeoutError';
      throw new CustosError(
        timedOut ? 'CUSTOS_ERR_UPSTREAM_TIMEOUT' : 'CUSTOS_ERR_UNAVAILABLE',
        timedOut
          ? `the Custos service at ${this.origin} did not answer within ${this.timeoutMs} ms`
          : `the Custos service at ${this.origin} is unreachable (${clean(String((err as { cause?: { code?: string } }).cause?.code ?? 'connection failed'), this.token)})`,
      );
    }
    const text = await readCapped(res);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (res.ok) {
      if (json === undefined || typeof json !== 'object' || json === null) throw this.badAnswer(route);
      return json;
    }
    const e = (json as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
    const code = knownCode(e?.code);
    const detail = `HTTP ${res.status}${code ? ` ${code}` : ''}${typeof e?.message === 'string' ? `: ${clean(e.message, this.token)}` : ''}`;
    const what =
      res.status === 401 ? 'refused the SSH token (revoked, expired or unknown)'
        : res.status === 403 ? 'denied this SSH token the request'
          : res.status === 404 ? (route === 'sign' ? 'does not know this key (deleted, or not available to this token)' : 'has no SSH endpoint at this URL')
            : `failed the ${route} request`;
    throw new CustosError(code ?? (res.status >= 500 ? 'CUSTOS_ERR_UNAVAILABLE' : 'CUSTOS_ERR_UPSTREAM'), `the Custos service at ${this.origin} ${what} (${detail})`);
  }
}

async function readCapped(res: Response): Promise<string> {
  if (!res.body) return '';
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    total += chunk.length;
    if (total > MAX_RESPONSE_BYTES) break;
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString('utf8');
}
