/**
 * What of an upstream answer may reach the agent (DESIGN.md §9, invariant 1).
 *
 * scrubResponse: every secret and derived token the call put on the wire is replaced by
 * `[redacted]` in header names/values and in the body, in the encodings an upstream plausibly echoes
 * them in: raw bytes (also upper- and lower-cased), base64 (standard and URL alphabets, padded or not, and at any byte offset inside
 * a longer base64 string such as `Basic base64(user:secret)`), hex, URL-encoding (upper/lower hex,
 * `+` for space, RFC 3986 strict), and JSON string escaping (incl. `\/` and `\uXXXX` for non-ASCII).
 * Search is Buffer.indexOf per needle (no regex over large strings); a clean body is not copied.
 * Secrets shorter than MIN_SECRET_BYTES are ignored: redacting every "abc" would mangle responses and
 * a 3-byte secret is no secret. A body cut at maxResponseBytes could end in the first bytes of a
 * secret (an echo upstream lets the agent choose where); so a truncated body also loses any tail
 * that is a prefix of a needle.
 *
 * Limits (docs/broker.md): an upstream that transforms a secret in other ways (reversal, encryption,
 * hashing, mixed-case hex, HTML entities, splitting it) defeats any scrubber; the broker only reaches
 * the credential's own origin, so that needs the credential's own service to misbehave.
 */
import type { UpstreamResponse } from './types.ts';

export const REDACTED = '[redacted]';
export const MIN_SECRET_BYTES = 4;
/** Appended to a text body cut at the preview size (and to one the upstream read truncated). */
export const TRUNCATION_MARKER = '…[truncated by custos]';
/** Unaligned base64 fragments shorter than this are not searched (too many false matches). */
const MIN_B64_CORE_CHARS = 8;

const REDACTED_BUF = Buffer.from(REDACTED, 'latin1');

const URI_PLAIN_RE = /^[A-Za-z0-9\-_.~]*$/;
const JSON_PLAIN_RE = /^[\x20-\x7e]*$/;
const JSON_SPECIAL_RE = /["\\/]/;

function strictUriEncode(uri: string): string {
  return uri.replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function lowerPercentHex(s: string): string {
  return s.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase());
}

/**
 * Base64 characters of `secret` that stay the same wherever it sits in a longer base64 string:
 * for each byte alignment k (0, 1, 2), the characters made only of secret bits.
 */
function pushBase64Cores(secret: Buffer, forms: string[]): void {
  const shifted = Buffer.alloc(secret.length + 2);
  try {
    secret.copy(shifted, 2);
    for (let k = 0; k < 3; k++) {
      const start = Math.ceil((8 * k) / 6);
      const end = Math.floor((8 * (k + secret.length)) / 6);
      if (end - start < MIN_B64_CORE_CHARS) continue;
      const core = shifted.toString('base64', 2 - k).slice(start, end);
      forms.push(core);
      if (core.includes('+') || core.includes('/')) forms.push(core.replace(/\+/g, '-').replace(/\//g, '_'));
    }
  } finally {
    shifted.fill(0); // it held a copy of the secret
  }
}

/** Adds the text encodings (URL, JSON) of a secret that is valid UTF-8. */
function pushTextForms(text: string, forms: string[]): void {
  if (!URI_PLAIN_RE.test(text)) {
    const uri = encodeURIComponent(text);
    const strict = strictUriEncode(uri);
    forms.push(uri, lowerPercentHex(uri), uri.replace(/%20/g, '+'));
    if (strict !== uri) forms.push(strict, lowerPercentHex(strict), strict.replace(/%20/g, '+'));
  }
  if (!JSON_PLAIN_RE.test(text) || JSON_SPECIAL_RE.test(text)) {
    const json = JSON.stringify(text).slice(1, -1);
    forms.push(json, json.replace(/\//g, '\\/'));
    const asciiJson = json.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    forms.push(asciiJson, asciiJson.replace(/\//g, '\\/'));
  }
}

/**
 * The byte strings to search for, longest first, deduplicated, as latin1 strings (one char per byte,
 * so they match header values, which undici decodes as latin1) and as Buffers. These are derived
 * secret material: scrubResponse zeroes the Buffers after use. (The JS strings cannot be zeroed;
 * they are local to the call and unreachable after it.)
 */
export function secretNeedleStrings(secrets: readonly Buffer[]): string[] {
  const set = new Set<string>();
  for (const secret of secrets) {
    if (!Buffer.isBuffer(secret) || secret.length < MIN_SECRET_BYTES) continue;
    const raw = secret.toString('latin1');
    // Raw, and upper-/lower-cased for an upstream that changes case when it echoes.
    const forms: string[] = [raw, raw.toLowerCase(), raw.toUpperCase()];
    const b64 = secret.toString('base64');
    forms.push(b64);
    if (b64.endsWith('=')) forms.push(b64.replace(/=+$/, ''));
    if (b64.includes('+') || b64.includes('/')) forms.push(secret.toString('base64url'));
    pushBase64Cores(secret, forms);
    const hex = secret.toString('hex');
    forms.push(hex, hex.toUpperCase());
    const ascii = !/[\x80-\xff]/.test(raw);
    if (ascii) {
      pushTextForms(raw, forms);
    } else {
      const text = secret.toString('utf8');
      if (Buffer.from(text, 'utf8').equals(secret)) {
        const textForms: string[] = [];
        pushTextForms(text, textForms);
        // Non-ASCII text forms are searched as their UTF-8 bytes.
        for (const f of textForms) forms.push(Buffer.from(f, 'utf8').toString('latin1'));
      }
    }
    for (const f of forms) set.add(f);
  }
  return [...set].sort((a, b) => b.length - a.length);
}

/** secretNeedleStrings as Buffers (the caller zeroes them). */
export function secretNeedles(secrets: readonly Buffer[]): Buffer[] {
  return secretNeedleStrings(secrets).map((s) => Buffer.from(s, 'latin1'));
}

/** Replaces every occurrence of each needle; returns `buf` itself when nothing matched. */
export function scrubBuffer(buf: Buffer, needles: readonly Buffer[]): Buffer {
  let current = buf;
  for (const needle of needles) {
    let at = current.indexOf(needle);
    if (at < 0) continue;
    const parts: Buffer[] = [];
    let from = 0;
    while (at >= 0) {
      parts.push(current.subarray(from, at), REDACTED_BUF);
      from = at + needle.length;
      at = current.indexOf(needle, from);
    }
    parts.push(current.subarray(from));
    current = Buffer.concat(parts);
  }
  return current;
}

/** The same on a latin1 string (header values). */
function scrubString(value: string, needles: readonly string[]): string {
  let current = value;
  for (const n of needles) if (current.includes(n)) current = current.split(n).join(REDACTED);
  return current;
}

/** Removes a tail that is the beginning of some needle (a secret cut in half by truncation). */
function trimPartialTail(buf: Buffer, needles: readonly Buffer[]): Buffer {
  let cut = 0;
  for (const needle of needles) {
    for (let len = Math.min(needle.length - 1, buf.length); len > cut; len--) {
      if (buf.compare(needle, 0, len, buf.length - len, buf.length) === 0) {
        cut = len;
        break;
      }
    }
  }
  return cut === 0 ? buf : buf.subarray(0, buf.length - cut);
}

/**
 * Returns a copy of `resp` with every secret (and encoding of it) replaced by `[redacted]` in header
 * names, header values and the body. A header whose NAME carries a secret is dropped entirely.
 */
export function scrubResponse(resp: UpstreamResponse, secrets: Buffer[]): UpstreamResponse {
  const strings = secretNeedleStrings(secrets);
  if (strings.length === 0) return { ...resp, headers: { ...resp.headers } };
  const needles = strings.map((s) => Buffer.from(s, 'latin1'));
  try {
    const headers: Record<string, string> = {};
    // Header names arrive lower-cased (HTTP names are case-insensitive), so a secret planted in a
    // name is compared case-insensitively; a header whose name carries one is dropped.
    let lowerNeedles: string[] | undefined;
    for (const name in resp.headers) {
      const value = resp.headers[name]!;
      const lowerName = name.toLowerCase();
      lowerNeedles ??= strings.map((s) => s.toLowerCase());
      if (lowerNeedles.some((n) => lowerName.includes(n))) continue;
      headers[name] = scrubString(value, strings);
    }
    let body = scrubBuffer(resp.body, needles);
    if (resp.truncated) body = trimPartialTail(body, needles);
    return { ...resp, headers, body };
  } finally {
    for (const n of needles) n.fill(0);
  }
}

/** Response headers an agent may see; everything else (Set-Cookie first of all) is dropped. */
const SAFE_HEADERS: ReadonlySet<string> = new Set([
  'content-type',
  'content-language',
  'content-disposition',
  'content-range',
  'accept-ranges',
  'date',
  'age',
  'expires',
  'etag',
  'last-modified',
  'cache-control',
  'vary',
  'location',
  'content-location',
  'link',
  'allow',
  'retry-after',
  'www-authenticate',
  'x-request-id',
  'request-id',
  'x-correlation-id',
  'x-amz-request-id',
  'x-amzn-requestid',
  'x-github-request-id',
  'x-total-count',
  'ratelimit',
  'ratelimit-policy',
]);
const SAFE_PREFIXES = ['x-ratelimit-', 'x-rate-limit-', 'ratelimit-'];

/**
 * Filters (already scrubbed) upstream headers to an allow-list. Dropped on purpose: set-cookie (a
 * session is a derived credential), proxy-authenticate, content-length and content-encoding (the body
 * the agent gets is decoded, scrubbed and possibly truncated, so they would lie), and anything unknown.
 * Kept: www-authenticate (the agent needs a 401's error="invalid_token" to report it usefully; it
 * carries a challenge, not a credential, and was scrubbed like every header).
 */
export function safeResponseHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const n = name.toLowerCase();
    if (SAFE_HEADERS.has(n) || SAFE_PREFIXES.some((p) => n.startsWith(p))) out[n] = value;
  }
  return out;
}

export interface RenderedBody {
  /** a parsed JSON value, a string (text, possibly ending in TRUNCATION_MARKER), or base64 */
  body: unknown;
  truncated: boolean;
  encoding: 'json' | 'text' | 'base64';
}

const TEXT_TYPES = new Set([
  'application/xml',
  'application/javascript',
  'application/ecmascript',
  'application/x-www-form-urlencoded',
  'application/graphql',
  'application/yaml',
  'application/x-yaml',
  'application/x-ndjson',
  'application/jsonl',
  'application/csv',
  'application/sql',
  'image/svg+xml',
]);

function mediaType(contentType: string | undefined): { type: string; charset: string | undefined } {
  if (contentType === undefined) return { type: '', charset: undefined };
  const [type = '', ...params] = contentType.split(';');
  let charset: string | undefined;
  for (const p of params) {
    const [k, v] = p.split('=');
    if (k?.trim().toLowerCase() === 'charset' && v !== undefined) charset = v.trim().replace(/^"|"$/g, '').toLowerCase();
  }
  return { type: type.trim().toLowerCase(), charset };
}

function isJsonType(type: string): boolean {
  return type === 'application/json' || type === 'text/json' || type.endsWith('+json');
}

/** Largest cut ≤ `max` that does not split a UTF-8 sequence. */
function utf8Cut(buf: Buffer, max: number): number {
  if (buf.length <= max) return buf.length;
  let cut = max;
  while (cut > 0 && (buf[cut]! & 0xc0) === 0x80) cut--;
  return cut;
}

const utf8Fatal = new TextDecoder('utf-8', { fatal: true });

function looksLikeText(buf: Buffer): boolean {
  if (buf.includes(0)) return false;
  try {
    utf8Fatal.decode(buf.subarray(0, utf8Cut(buf, 65536)));
    return true;
  } catch {
    return false;
  }
}

function decodeText(buf: Buffer, charset: string | undefined): string {
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    try {
      return new TextDecoder(charset).decode(buf);
    } catch {
      /* unknown label: fall back to UTF-8 */
    }
  }
  return buf.toString('utf8');
}

/**
 * Shapes an (already scrubbed) body for the agent. JSON content that parses and fits in
 * `previewBytes` becomes a JSON value; text (text/*, JSON/XML/YAML/form types, or untyped UTF-8)
 * becomes a string cut at `previewBytes` on a character boundary with TRUNCATION_MARKER appended;
 * anything else becomes base64 of at most `previewBytes` bytes (truncation shown by the flag only).
 * `upstreamTruncated` says the broker already cut the body at maxResponseBytes.
 */
export function renderBody(body: Buffer, contentType: string | undefined, previewBytes: number, upstreamTruncated = false): RenderedBody {
  const { type, charset } = mediaType(contentType);
  const json = isJsonType(type);
  if (json && !upstreamTruncated && body.length <= previewBytes && body.length > 0) {
    try {
      return { body: JSON.parse(body.toString('utf8')) as unknown, truncated: false, encoding: 'json' };
    } catch {
      /* not valid JSON (or too deep): show it as text */
    }
  }
  const text = json || type.startsWith('text/') || type.endsWith('+xml') || TEXT_TYPES.has(type) || (type === '' && looksLikeText(body));
  if (text) {
    const cut = utf8Cut(body, previewBytes);
    const truncated = upstreamTruncated || cut < body.length;
    const s = decodeText(body.subarray(0, cut), charset);
    return { body: truncated ? s + TRUNCATION_MARKER : s, truncated, encoding: 'text' };
  }
  const truncated = upstreamTruncated || body.length > previewBytes;
  return { body: body.subarray(0, Math.min(body.length, previewBytes)).toString('base64'), truncated, encoding: 'base64' };
}
