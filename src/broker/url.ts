/**
 * Joins a credential's base URL and an agent-supplied path (DESIGN.md §9). The agent controls the
 * path only; the result must keep the base URL's origin (scheme, host, port) and stay under its path,
 * on a segment boundary: base /v1 admits /v1 and /v1/x, never /v1x or /v2.
 *
 * The checks run on the raw string BEFORE the WHATWG URL parser sees it, because the parser
 * "helpfully" rewrites hostile input: it strips tabs and newlines, turns `\` into `/`, resolves
 * `%2e%2e` as `..`. After the join the parsed result is checked again (origin, prefix, no userinfo,
 * no fragment) so a gap in the first layer still cannot leave the base.
 *
 * Decisions (docs/broker.md):
 *  - a path not starting with `/` gets one prepended (`users/1` → `/users/1`, `?q=1` → `/?q=1`),
 *    after the "looks like scheme:" check, so `evil.com:80/x` or `mailto:x` are refused, not joined;
 *  - any `@` before the query is refused (simplest rule that rules out every userinfo confusion);
 *  - any backslash, `#`, or control character (raw) anywhere is refused;
 *  - in the path part, `%2f`/`%5c` (encoded slashes), encoded control characters, malformed `%`
 *    escapes and double-encoded `%252e`/`%252f`/`%255c`/`%2525` are refused;
 *  - a segment made only of dots (and spaces), raw or encoded, and also before a `;` (Tomcat's
 *    `..;/`), is refused: `.`, `..`, `%2e%2e`, `.%2e`, `%2E.`, `...`, `.. `;
 *  - the query string is kept as given (the URL parser percent-encodes what it must).
 * Base URLs: http/https only, no userinfo, no query, no fragment, no whitespace/control characters.
 */
import { CustosError } from '../errors.ts';

export const MAX_PATH_LENGTH = 8192;
export const MAX_BASE_URL_LENGTH = 2048;

interface BaseInfo {
  /** e.g. "https://api.example.com" (default port elided, as URL.origin does) */
  origin: string;
  /** base pathname without one trailing slash: "" for "/", "/v1" for "/v1" and "/v1/" */
  prefix: string;
}

function refuse(message: string): CustosError {
  return new CustosError('CUSTOS_ERR_URL_REFUSED', message);
}

function hex2(code: number): string {
  return `0x${code.toString(16).padStart(2, '0')}`;
}

// Parsed base URLs are cached by their exact string: the hot path then does no base parsing.
const baseCache = new Map<string, BaseInfo>();
const BASE_CACHE_MAX = 2048;

/**
 * Validates a base URL (credential config) and returns its origin and path prefix.
 * Exported so services can validate a base URL when it is stored, with the same rules.
 */
export function parseBaseUrl(baseUrl: string): { origin: string; prefix: string; url: URL } {
  const info = baseInfo(baseUrl);
  return { ...info, url: new URL(baseUrl) };
}

function baseInfo(baseUrl: string): BaseInfo {
  const cached = baseCache.get(baseUrl);
  if (cached !== undefined) return cached;
  if (typeof baseUrl !== 'string' || baseUrl.length === 0) throw refuse('The base URL is empty.');
  if (baseUrl.length > MAX_BASE_URL_LENGTH) {
    throw refuse(`The base URL is too long (${baseUrl.length} characters; at most ${MAX_BASE_URL_LENGTH}).`);
  }
  for (let i = 0; i < baseUrl.length; i++) {
    const c = baseUrl.charCodeAt(i);
    // The parser would silently strip tab/CR/LF and trim spaces; refuse instead of guessing.
    if (c <= 0x20 || c === 0x7f) throw refuse(`The base URL contains a space or control character (${hex2(c)}) at position ${i}.`);
    if (c === 0x5c) throw refuse('The base URL contains a backslash.');
  }
  if (baseUrl.includes('#')) throw refuse('The base URL must not have a fragment (#).');
  if (baseUrl.includes('?')) throw refuse('The base URL must not have a query string (?).');
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw refuse('The base URL is not a valid absolute URL.');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw refuse('The base URL must use http or https.');
  const schemeEnd = baseUrl.indexOf('//') + 2;
  const authorityEnd = baseUrl.indexOf('/', schemeEnd);
  const authority = baseUrl.slice(schemeEnd, authorityEnd < 0 ? undefined : authorityEnd);
  if (url.username !== '' || url.password !== '' || authority.includes('@')) {
    throw refuse('The base URL must not contain userinfo (user:password@).');
  }
  if (url.hostname === '') throw refuse('The base URL has no host.');
  const path = url.pathname;
  const info: BaseInfo = { origin: url.origin, prefix: path.endsWith('/') ? path.slice(0, -1) : path };
  if (baseCache.size >= BASE_CACHE_MAX) baseCache.clear();
  baseCache.set(baseUrl, info);
  return info;
}

const SCHEME_RE = /^[A-Za-z][A-Za-z0-9+.-]*:/;
const HEX_RE = /^[0-9A-Fa-f]{2}$/;
const DOUBLE_ENCODED_RE = /%25(?:2e|2f|5c|25)/i;
const DOTS_ONLY_RE = /^[. ]*\.[. ]*$/;
const ENCODED_DOT_RE = /%2e/gi;
const ENCODED_SPACE_RE = /%20/g;

/** Checks the path part (before `?`); throws on the first hostile construct. */
function checkPathPart(pathPart: string): void {
  if (pathPart.startsWith('//')) throw refuse("The path must not start with '//' (protocol-relative URL).");
  if (pathPart.includes('@')) throw refuse("The path must not contain '@' (use %40 if you mean a literal @).");
  let pct = pathPart.indexOf('%');
  while (pct >= 0) {
    const hex = pathPart.slice(pct + 1, pct + 3);
    if (!HEX_RE.test(hex)) throw refuse(`The path has a malformed percent-escape at position ${pct}.`);
    const code = parseInt(hex, 16);
    if (code === 0x2f || code === 0x5c) {
      throw refuse('The path must not contain an encoded slash or backslash (%2F, %5C).');
    }
    if (code < 0x20 || code === 0x7f) throw refuse(`The path contains an encoded control character (%${hex}).`);
    pct = pathPart.indexOf('%', pct + 3);
  }
  if (DOUBLE_ENCODED_RE.test(pathPart)) throw refuse('The path contains a double-encoded dot, slash or percent.');
  // Dot segments. A segment's matrix parameters (after ';') are ignored first: Tomcat and others
  // treat "..;x" as "..".
  let start = 1; // pathPart[0] is '/'
  while (start <= pathPart.length) {
    let end = pathPart.indexOf('/', start);
    if (end < 0) end = pathPart.length;
    let seg = pathPart.slice(start, end);
    const semi = seg.indexOf(';');
    if (semi >= 0) seg = seg.slice(0, semi);
    if (seg.length > 0 && (seg.includes('.') || seg.includes('%'))) {
      const decoded = seg.replace(ENCODED_DOT_RE, '.').replace(ENCODED_SPACE_RE, ' ');
      if (DOTS_ONLY_RE.test(decoded)) throw refuse("The path contains a '.' or '..' segment (raw or percent-encoded).");
    }
    start = end + 1;
  }
}

/**
 * Returns the upstream URL for `path` under `baseUrl`, or throws CUSTOS_ERR_URL_REFUSED saying why.
 * Messages never echo the input (it may be huge or hostile); they name the rule and a position.
 */
export function buildUpstreamUrl(baseUrl: string, path: string): URL {
  const base = baseInfo(baseUrl);
  if (typeof path !== 'string') throw refuse('The path must be a string.');
  if (path.length > MAX_PATH_LENGTH) {
    throw refuse(`The path is too long (${path.length} characters; at most ${MAX_PATH_LENGTH}).`);
  }
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) throw refuse(`The path contains a control character (${hex2(c)}) at position ${i}.`);
    if (c === 0x5c) throw refuse('The path must not contain a backslash.');
    if (c === 0x23) throw refuse("The path must not contain '#' (fragments are never sent upstream).");
  }
  if (SCHEME_RE.test(path)) throw refuse("The path looks like an absolute URL (scheme:); send a path such as '/v1/items'.");
  if (path.startsWith('//')) throw refuse("The path must not start with '//' (protocol-relative URL).");
  const p = path.startsWith('/') ? path : `/${path}`;
  const q = p.indexOf('?');
  const pathPart = q < 0 ? p : p.slice(0, q);
  const query = q < 0 ? '' : p.slice(q);
  checkPathPart(pathPart);

  let url: URL;
  try {
    url = new URL(base.origin + base.prefix + pathPart + query);
  } catch {
    throw refuse('The path does not form a valid URL with the base URL.');
  }
  // Second layer: whatever the parser did, the result must still be under the base.
  if (
    url.origin !== base.origin ||
    url.username !== '' ||
    url.password !== '' ||
    url.hash !== '' ||
    !(url.pathname === base.prefix || url.pathname.startsWith(`${base.prefix}/`))
  ) {
    throw refuse("The path leaves the credential's base URL.");
  }
  return url;
}
