/**
 * Sends a brokered request upstream (DESIGN.md §9) with undici 7.
 *
 *  - Redirects are never followed: undici's request API does not follow them (there is no redirect
 *    interceptor on our agents), so a 3xx, with its Location, goes back to the agent as is. Following
 *    one would replay the injected credential to wherever Location points.
 *  - The destination address is checked at connect time by the guarded connector (guard.ts).
 *  - One keep-alive Agent per policy (strict / private-literal-allowed, per connect timeout) is shared
 *    by every call: no per-call Agent, no per-call DNS for IP-literal base URLs, and DNS for host names
 *    only when a new connection is opened.
 *  - Bounded: request body size, connect timeout, one overall deadline (headers and body), response
 *    body read up to maxResponseBytes and the rest aborted (truncated: true).
 *  - `accept-encoding: identity` is always sent, and a compressed answer is decoded (within the same
 *    cap) so the scrubber sees plain bytes.
 * Errors are CustosErrors whose messages never contain the URL, its query, or any header.
 */
import { performance } from 'node:perf_hooks';
import { isIP, type LookupFunction } from 'node:net';
import zlib from 'node:zlib';
import { Agent, type Dispatcher } from 'undici';
import { CustosError } from '../errors.ts';
import type { OutboundRequest } from '../kinds/credential-kind.ts';
import { createGuardedConnector, destinationRefused, isBlockedAddress, privateDestinationAllowed } from './guard.ts';
import { isBrokerMethod } from './methods.ts';
import type { UpstreamResponse } from './types.ts';

export type { UpstreamResponse } from './types.ts';

/** Default request body cap when the caller does not pass one (config broker.maxRequestBytes). */
export const DEFAULT_MAX_REQUEST_BYTES = 1_048_576;

export interface SendOptions {
  /**
   * Operator switch: may a base URL that literally names a private address (IP literal or
   * `localhost`) be reached? Even when true, a host NAME never reaches a private address.
   */
  allowPrivate: boolean;
  /** Overall deadline: connect + headers + body. */
  timeoutMs: number;
  connectTimeoutMs: number;
  maxResponseBytes: number;
  maxRequestBytes?: number;
  /**
   * A dispatcher to use instead of the shared guarded agents. It must come from
   * createBrokerAgent() (or enforce the same policy): a plain undici Agent has no address guard.
   */
  dispatcher?: Dispatcher;
  /** Resolver for the guarded agent (tests); agents are cached per lookup function. */
  lookup?: LookupFunction;
}

export interface BrokerAgentOptions {
  allowPrivate: boolean;
  connectTimeoutMs: number;
  lookup?: LookupFunction;
  /** Address policy override, for tests only. */
  isBlocked?: (address: string) => boolean;
  /** Extra trusted CA certificates (PEM) for TLS upstreams. */
  ca?: string | Buffer | Array<string | Buffer>;
}

/** A keep-alive undici Agent whose every connection passes the address guard. */
export function createBrokerAgent(options: BrokerAgentOptions): Agent {
  return new Agent({
    connect: createGuardedConnector(options),
    keepAliveTimeout: 10_000,
    keepAliveMaxTimeout: 60_000,
    // Never more than one request in flight per connection: a response cannot be attributed to
    // another call's request.
    pipelining: 1,
  });
}

const sharedAgents = new Map<string, Agent>();
// Agents for an injected resolver (tests). Keyed by the function: pass a long-lived one.
const lookupAgents = new Map<LookupFunction, Map<string, Agent>>();

function sharedAgent(allowPrivate: boolean, connectTimeoutMs: number, lookup: LookupFunction | undefined): Agent {
  const key = `${allowPrivate ? 1 : 0}:${connectTimeoutMs}`;
  let map = sharedAgents;
  if (lookup !== undefined) {
    map = lookupAgents.get(lookup) ?? new Map<string, Agent>();
    lookupAgents.set(lookup, map);
  }
  let agent = map.get(key);
  if (agent === undefined) {
    agent = createBrokerAgent(lookup === undefined ? { allowPrivate, connectTimeoutMs } : { allowPrivate, connectTimeoutMs, lookup });
    map.set(key, agent);
  }
  return agent;
}

/** Closes the shared agents (graceful shutdown, test teardown). Later calls open new ones. */
export async function closeBrokerAgents(): Promise<void> {
  const agents = [...sharedAgents.values()];
  for (const map of lookupAgents.values()) agents.push(...map.values());
  sharedAgents.clear();
  lookupAgents.clear();
  await Promise.all(agents.map((a) => a.close()));
}

// Per-hostname literal check, cached: a hot call to an IP-literal base does no parsing here.
const literalBlocked = new Map<string, boolean>();
function hostIsBlockedLiteral(hostname: string): boolean {
  let v = literalBlocked.get(hostname);
  if (v === undefined) {
    const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
    v = isIP(bare) !== 0 && isBlockedAddress(bare);
    if (literalBlocked.size >= 4096) literalBlocked.clear();
    literalBlocked.set(hostname, v);
  }
  return v;
}

const SAFE_CODE_RE = /^[A-Z0-9_]{1,40}$/;
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT']);

function mapError(err: unknown, timedOut: boolean, timeoutMs: number): CustosError {
  if (err instanceof CustosError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  if (timedOut || (typeof code === 'string' && TIMEOUT_CODES.has(code))) {
    return new CustosError('CUSTOS_ERR_UPSTREAM_TIMEOUT', `The upstream did not answer within ${timeoutMs} ms.`, { cause: err });
  }
  if (code === 'UND_ERR_INVALID_ARG') {
    // e.g. a credential value with a newline in it: undici refuses the header. Its message names
    // the header; ours names neither header nor value.
    return new CustosError(
      'CUSTOS_ERR_VALIDATION',
      'The outbound request was refused by the HTTP client: a header name or value, or another request field, is invalid. If this started after a secret was saved, check the secret for line breaks.',
      { cause: err },
    );
  }
  const safe = typeof code === 'string' && SAFE_CODE_RE.test(code) ? ` (${code})` : '';
  return new CustosError('CUSTOS_ERR_UPSTREAM', `The upstream could not be reached or broke the connection${safe}.`, { cause: err });
}

function flattenHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name in headers) {
    const v = headers[name];
    if (v === undefined) continue;
    out[name] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

/** Decodes a gzip/deflate/br body, keeping at most `max` bytes of output. */
function decodeBody(input: Buffer, coding: string, max: number, inputTruncated: boolean): Promise<{ body: Buffer; truncated: boolean }> {
  let z: zlib.Gunzip | zlib.Inflate | zlib.BrotliDecompress;
  if (coding === 'gzip' || coding === 'x-gzip') z = zlib.createGunzip();
  else if (coding === 'deflate') z = zlib.createInflate();
  else if (coding === 'br') z = zlib.createBrotliDecompress();
  else {
    return Promise.reject(new CustosError('CUSTOS_ERR_UPSTREAM', 'The upstream answered with a content encoding the broker cannot decode.'));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = (truncated: boolean): void => {
      if (settled) return;
      settled = true;
      resolve({ body: Buffer.concat(chunks, size), truncated });
    };
    z.on('data', (chunk: Buffer) => {
      if (settled) return;
      const room = max - size;
      if (chunk.length > room) {
        chunks.push(chunk.subarray(0, room));
        size += room;
        finish(true);
        z.destroy();
        return;
      }
      chunks.push(chunk);
      size += chunk.length;
    });
    z.on('end', () => finish(inputTruncated));
    z.on('error', (err) => {
      if (settled) return;
      // A cut-off input ends in "unexpected end of file": keep what was decoded.
      if (inputTruncated) {
        finish(true);
        return;
      }
      settled = true;
      reject(new CustosError('CUSTOS_ERR_UPSTREAM', 'The upstream sent a compressed body that could not be decoded.', { cause: err }));
    });
    z.end(input);
  });
}

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  truncated: boolean;
}

class DeadlineExceeded extends Error {
  constructor() {
    super('deadline exceeded');
    this.name = 'DeadlineExceeded';
  }
}
class BodyCapReached extends Error {
  constructor() {
    super('response body cap reached');
    this.name = 'BodyCapReached';
  }
}

/**
 * One request through undici's handler API: chunks are collected directly (no body stream, no async
 * iterator: this is the hot path), at most `max` bytes; past that the request is aborted, which
 * destroys the connection so the rest is never read. One timer enforces the overall deadline.
 */
function dispatchOnce(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions, max: number, timeoutMs: number): Promise<RawAnswer> {
  return new Promise<RawAnswer>((resolve, reject) => {
    let controller: Dispatcher.DispatchController | undefined;
    let settled = false;
    let timedOut = false;
    let status = 0;
    let headers: Record<string, string> = {};
    let chunks: Buffer[] = [];
    let size = 0;
    const settle = (err: unknown, answer?: RawAnswer): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (answer !== undefined) resolve(answer);
      else reject(mapError(err, timedOut, timeoutMs));
    };
    const timer = setTimeout(() => {
      timedOut = true;
      // Not yet on a socket (queued or connecting): fail now; onRequestStart aborts it later.
      controller?.abort(new DeadlineExceeded());
      settle(new DeadlineExceeded());
    }, timeoutMs);
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        if (settled) c.abort(new DeadlineExceeded());
      },
      onResponseStart(_c, statusCode, responseHeaders) {
        // Called again after a 1xx: the last call is the real answer.
        status = statusCode;
        headers = flattenHeaders(responseHeaders as Record<string, string | string[] | undefined>);
        chunks = [];
        size = 0;
      },
      onResponseData(c, chunk) {
        if (settled) return;
        const room = max - size;
        if (chunk.length > room) {
          if (room > 0) chunks.push(chunk.subarray(0, room));
          size = max;
          settle(undefined, { status, headers, body: Buffer.concat(chunks, size), truncated: true });
          c.abort(new BodyCapReached());
          return;
        }
        chunks.push(chunk);
        size += chunk.length;
      },
      onResponseEnd() {
        settle(undefined, { status, headers, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size), truncated: false });
      },
      onResponseError(_c, err) {
        settle(err);
      },
    };
    try {
      dispatcher.dispatch(options, handler);
    } catch (err) {
      settle(err);
    }
  });
}

/**
 * Sends `req` (already carrying the injected credential) and returns the upstream's answer, unscrubbed:
 * the caller must pass it through scrubResponse() before anything reaches the agent.
 */
export async function sendOutbound(req: OutboundRequest, opts: SendOptions): Promise<UpstreamResponse> {
  const url = req.url;
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new CustosError('CUSTOS_ERR_URL_REFUSED', 'Only http and https upstreams are supported.');
  }
  if (url.username !== '' || url.password !== '') {
    throw new CustosError('CUSTOS_ERR_URL_REFUSED', 'The upstream URL must not contain userinfo.');
  }
  if (!isBrokerMethod(req.method)) {
    throw new CustosError('CUSTOS_ERR_METHOD_NOT_ALLOWED', 'The HTTP method is not allowed by the broker.');
  }
  const maxRequestBytes = opts.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
  if (req.body !== undefined && req.body.length > maxRequestBytes) {
    throw new CustosError('CUSTOS_ERR_BODY_TOO_LARGE', `The request body is too large (${req.body.length} bytes; at most ${maxRequestBytes}).`);
  }
  // A private destination needs both the operator's switch and a base URL that names it literally.
  const allowPrivate = opts.allowPrivate && privateDestinationAllowed(url);
  // Cheap early refusal of a blocked IP literal (the connector refuses it too, at connect time).
  if (!allowPrivate && hostIsBlockedLiteral(url.hostname)) throw destinationRefused();

  // Kinds set headers; a Host among them must name the URL's own host (virtual-host switching).
  for (const name in req.headers) {
    if (name.length === 4 && name.toLowerCase() === 'host' && req.headers[name] !== url.host) {
      throw new CustosError('CUSTOS_ERR_HEADER_REFUSED', "The request's Host header does not match the upstream URL.");
    }
  }
  const dispatcher = opts.dispatcher ?? sharedAgent(allowPrivate, opts.connectTimeoutMs, opts.lookup);
  const headers: Record<string, string> = { ...req.headers, 'accept-encoding': 'identity' };
  const started = performance.now();
  const answer = await dispatchOnce(
    dispatcher,
    {
      origin: url.origin,
      path: url.pathname + url.search,
      method: req.method,
      headers,
      body: req.body ?? null,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
    },
    opts.maxResponseBytes,
    opts.timeoutMs,
  );
  let { body, truncated } = answer;
  const responseHeaders = answer.headers;
  const coding = responseHeaders['content-encoding']?.trim().toLowerCase();
  if (coding !== undefined && coding !== '' && coding !== 'identity') {
    const decoded = await decodeBody(body, coding, opts.maxResponseBytes, truncated);
    body = decoded.body;
    truncated = decoded.truncated;
    delete responseHeaders['content-encoding'];
    delete responseHeaders['content-length'];
  }
  return { status: answer.status, headers: responseHeaders, body, truncated, latencyMs: Math.round((performance.now() - started) * 10) / 10 };
}
