/**
 * The conformance macro every injecting kind (bearer, header, sigv4, oauth2) passes, plus the small
 * real-HTTP harness it uses. It pins the kind contract from DESIGN.md §1 and §4 with a planted
 * marker secret:
 *  - secretSchema refuses missing, empty, extra and header-breaking fields, without echoing values;
 *  - configSchema refuses each bad config the case lists; describe() never shows a secret;
 *  - inject() puts the credential on the wire of a real 127.0.0.1 upstream, returns Buffers holding
 *    what went out (so the broker can scrub it) that are copies, not the actor's input Buffers;
 *  - fields the case names as never-on-the-wire (sigv4 secret key, oauth2 client secret and
 *    refresh token) do not reach the upstream;
 *  - nothing the kind caches contains a secret field's plaintext, and the cache zeroes what it holds;
 *  - input Buffers are not retained: zeroing them after the call does not break the next call;
 *  - errors and log lines never contain the marker.
 * Test-only module (it imports ava); nothing in the service imports it.
 */
import test, { type ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ActorCache } from '../actors/actor-cache.ts';
import { CustosError } from '../errors.ts';
import { createLogger } from '../log.ts';
import type { ActorCache as ActorCachePort, CredentialKind, Injector, KindContext, OutboundRequest, RefreshPort, SecretFields } from './credential-kind.ts';

export interface RecordedRequest {
  method: string;
  /** path and query exactly as received */
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
}

export interface RecordingUpstream {
  url: URL;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

export type UpstreamHandler = (req: RecordedRequest, res: ServerResponse) => void | Promise<void>;

/** A real HTTP server on 127.0.0.1 that records every request (raw headers and body) it receives. */
export async function startRecordingUpstream(handler?: UpstreamHandler): Promise<RecordingUpstream> {
  const requests: RecordedRequest[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const recorded: RecordedRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks),
      };
      requests.push(recorded);
      Promise.resolve(handler ? handler(recorded, res) : undefined)
        .then(() => {
          if (!res.headersSent) {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end('{"ok":true}');
          }
        })
        .catch(() => {
          res.writeHead(500);
          res.end();
        });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: new URL(`http://127.0.0.1:${port}/`),
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Sends an OutboundRequest as built (method, URL, headers, body); redirects are not followed. */
export function sendOutbound(req: OutboundRequest): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const out = httpRequest(req.url, { method: req.method, headers: req.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    out.on('error', reject);
    out.end(req.body);
  });
}

/** Everything a recorded request carried, for "is this value on the wire" checks. */
export function wireBytes(recorded: RecordedRequest): Buffer {
  return Buffer.concat([Buffer.from(`${recorded.method} ${recorded.url}\n${recorded.rawHeaders.join('\n')}\n`, 'latin1'), recorded.body]);
}

/** Captured log output: a pino destination that keeps every line. */
export function captureLog(): { destination: { write(line: string): void }; text(): string } {
  const lines: string[] = [];
  return { destination: { write: (line: string) => void lines.push(line) }, text: () => lines.join('') };
}

/** What a case sets up for one run against the harness's upstream. */
export interface Arranged {
  /** Raw config as a person would submit it; the macro parses it with the kind's configSchema. */
  config: unknown;
  refresh?: RefreshPort;
  /** The text that must appear on the upstream's wire (the marker, or a token derived from it). */
  onWire: string;
  now?: () => number;
  teardown?(): Promise<void>;
}

export interface InjectorCase {
  kind: CredentialKind<any> & Injector<any>;
  /** A valid secret with the marker planted in every field (distinct values per field). */
  secret(marker: string): Record<string, string>;
  /** Secret fields that may be omitted. */
  optionalSecretFields?: readonly string[];
  /** Secret fields whose value must never reach the upstream. */
  neverOnWire?: readonly string[];
  /** Configs the configSchema must refuse. */
  badConfigs: readonly unknown[];
  arrange(marker: string, upstream: URL): Promise<Arranged>;
}

function toFields(secret: Record<string, string>): Record<string, Buffer> {
  return Object.fromEntries(Object.entries(secret).map(([k, v]) => [k, Buffer.from(v, 'latin1')]));
}

/** Wraps a cache so every value a kind stores is checked (and remembered, to prove it gets zeroed). */
function inspectingCache(inner: ActorCachePort, forbidden: Map<string, Buffer>, violations: string[], stored: Buffer[]): ActorCachePort {
  return {
    get: (key) => inner.get(key),
    delete: (key) => inner.delete(key),
    set: (key, value, expiresAtMs) => {
      for (const [field, plain] of forbidden) if (value.includes(plain)) violations.push(`cache entry ${key} holds ${field}`);
      stored.push(value);
      inner.set(key, value, expiresAtMs);
    },
  };
}

async function exec(t: ExecutionContext, c: InjectorCase): Promise<void> {
  const { kind } = c;
  const marker = `MARKER${randomBytes(8).toString('hex')}`;
  const secret = c.secret(marker);
  const optional = new Set(c.optionalSecretFields ?? []);
  const noMarker = (text: string, where: string) => t.false(text.includes(marker), `marker leaked into ${where}`);

  // --- secretSchema ---
  t.deepEqual(Object.keys(secret).sort(), [...kind.secretFields].sort(), 'the case plants every secret field');
  for (const value of Object.values(secret)) t.true(value.includes(marker), 'each planted field carries the marker');
  t.true(kind.secretSchema.safeParse(secret).success, 'a valid secret is accepted');
  for (const field of kind.secretFields) {
    const { [field]: _dropped, ...missing } = secret;
    const m = kind.secretSchema.safeParse(missing);
    if (optional.has(field)) {
      t.true(m.success, `${field} is optional`);
    } else {
      t.false(m.success, `missing ${field} is refused`);
      if (!m.success) {
        t.true(m.error.issues.some((i) => i.path[0] === field && i.message.includes(field)), `missing ${field}: the error names the field`);
      }
    }
    const empty = kind.secretSchema.safeParse({ ...secret, [field]: '' });
    t.false(empty.success, `empty ${field} is refused`);
    if (!empty.success) t.true(empty.error.issues.some((i) => i.path[0] === field), `empty ${field}: the error points at the field`);
    const crlf = kind.secretSchema.safeParse({ ...secret, [field]: `${marker}\r\nx-injected: 1` });
    t.false(crlf.success, `${field} with CR/LF is refused`);
    if (!crlf.success) noMarker(JSON.stringify(crlf.error.issues) + crlf.error.message, `the ${field} validation error`);
  }
  const extra = kind.secretSchema.safeParse({ ...secret, extraField: marker });
  t.false(extra.success, 'an extra secret field is refused');
  if (!extra.success) {
    t.true(extra.error.issues.some((i) => i.code === 'unrecognized_keys'), 'extra field: unrecognized_keys');
    noMarker(JSON.stringify(extra.error.issues) + extra.error.message, 'the extra-field error');
  }
  t.false(kind.secretSchema.safeParse(marker).success, 'a bare string is not a secret object');

  // --- run against a real upstream ---
  const upstream = await startRecordingUpstream();
  const arranged = await c.arrange(marker, upstream.url);
  const log = captureLog();
  const root = new ActorCache(arranged.now ? { now: arranged.now } : {});
  const forbidden = new Map(Object.entries(secret).map(([k, v]) => [k, Buffer.from(v, 'latin1')]));
  const violations: string[] = [];
  const stored: Buffer[] = [];
  try {
    // --- configSchema and describe ---
    const parsed = kind.configSchema.safeParse(arranged.config);
    t.true(parsed.success, 'the arranged config is accepted');
    if (!parsed.success) return;
    const config = parsed.data;
    for (const bad of c.badConfigs) t.false(kind.configSchema.safeParse(bad).success, `bad config refused: ${JSON.stringify(bad)}`);
    const view = kind.describe(config);
    t.is(view.authScheme, kind.scheme, 'describe() names the scheme');
    noMarker(JSON.stringify(view), 'describe()');

    const credentialId = `cred-${randomBytes(4).toString('hex')}`;
    const ctx: KindContext = {
      workspaceId: `ws-${randomBytes(4).toString('hex')}`,
      credentialId,
      cache: inspectingCache(root.scope(credentialId), forbidden, violations, stored),
      log: createLogger({ level: 'trace', destination: log.destination }),
      now: arranged.now ?? Date.now,
      ...(arranged.refresh ? { refresh: arranged.refresh } : {}),
    };

    // First call: POST with a body.
    const input1: SecretFields = toFields(secret);
    const req1: OutboundRequest = {
      method: 'POST',
      url: new URL('conformance/items?q=1', upstream.url),
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: Buffer.from('{"hello":"world"}'),
    };
    const scrub = await kind.inject(req1, input1, config, ctx);
    t.true(Array.isArray(scrub) && scrub.every((b) => Buffer.isBuffer(b)), 'inject returns Buffers');
    t.true(scrub.some((b) => b.includes(arranged.onWire)), 'the returned Buffers hold what went on the wire');
    for (const b of scrub) t.false(Object.values(input1).includes(b), 'returned Buffers are copies, not the actor\'s inputs');
    const res1 = await sendOutbound(req1);
    t.is(res1.status, 200, 'the upstream accepted the request');
    const wire1 = wireBytes(upstream.requests.at(-1)!);
    t.true(wire1.includes(arranged.onWire), 'the credential reached the upstream');
    for (const field of c.neverOnWire ?? []) t.false(wire1.includes(secret[field]!), `${field} never reaches the upstream`);

    // The actor zeroes its inputs right after the call: the returned copies must survive that.
    for (const b of Object.values(input1)) b.fill(0);
    t.true(scrub.some((b) => b.includes(arranged.onWire)), 'returned Buffers survive the inputs being zeroed');
    for (const b of scrub) b.fill(0);

    // Second call with fresh Buffers: nothing was retained from the zeroed ones.
    const input2: SecretFields = toFields(secret);
    const req2: OutboundRequest = { method: 'GET', url: new URL('conformance/items', upstream.url), headers: {}, body: undefined };
    const scrub2 = await kind.inject(req2, input2, config, ctx);
    const res2 = await sendOutbound(req2);
    t.is(res2.status, 200);
    t.true(wireBytes(upstream.requests.at(-1)!).includes(arranged.onWire), 'a second call with fresh Buffers still carries the credential');
    for (const b of [...Object.values(input2), ...scrub2]) b.fill(0);

    // An incomplete stored secret fails with a clear, secret-free error.
    const required = kind.secretFields.find((f) => !optional.has(f))!;
    const { [required]: _gone, ...partial } = secret;
    const err = await t.throwsAsync(kind.inject({ method: 'GET', url: new URL('x', upstream.url), headers: {}, body: undefined }, toFields(partial), config, ctx));
    t.true(err instanceof CustosError, 'an incomplete secret gives a CustosError');
    if (err) noMarker(`${err.message} ${JSON.stringify(err)}`, 'the incomplete-secret error');

    // Cache: no secret plaintext, and everything stored is zeroed when the actor clears it.
    t.deepEqual(violations, [], 'no cache entry holds a secret field');
    root.clear();
    t.true(stored.every((b) => b.every((byte) => byte === 0)), 'every cached Buffer is zero after clear()');
    noMarker(log.text(), 'the log');
  } finally {
    root.close();
    await arranged.teardown?.();
    await upstream.close();
  }
}

export const injectorConformance = test.macro({
  exec,
  title: (provided: string | undefined, c: InjectorCase) => `${provided ? `${provided} ` : ''}${c.kind.scheme} kind passes the injector conformance macro`,
});
