/**
 * Policy for headers an agent adds to a brokered call (DESIGN.md §9). The agent may add ordinary
 * request headers (Accept, Content-Type, If-None-Match, X-GitHub-Api-Version…) but never:
 *  - credential-bearing headers (Authorization, Proxy-Authorization, Cookie, X-Amz-*, and the
 *    credential's own header names): it could override the injected credential, or plant a value
 *    the kind would then sign or merge;
 *  - Host: virtual-host switching on a shared front end reaches another tenant with our credential;
 *  - hop-by-hop and framing headers (Connection, Transfer-Encoding, Content-Length, TE, Trailer,
 *    Upgrade, Keep-Alive, Proxy-*, Expect): request smuggling and connection hijacking;
 *  - Accept-Encoding: the broker asks for identity so the scrubber sees plain bytes (a gzip body
 *    would carry an echoed secret past it);
 *  - routing/override headers honoured by common frameworks that would defeat the path or method
 *    policy: X-Original-URL, X-Rewrite-URL, X-HTTP-Method-Override, X-HTTP-Method,
 *    X-Method-Override, Forwarded, X-Forwarded-*.
 * Names are lower-cased; invalid names or values (CR, LF, NUL, other controls, non-Latin-1) and
 * oversize sets are refused. Refusals name the header (a validated token) but never echo a value.
 */
import { CustosError } from '../errors.ts';

export const MAX_AGENT_HEADERS = 32;
export const MAX_HEADER_NAME_LENGTH = 128;
export const MAX_HEADER_VALUE_LENGTH = 8192;
/** Sum of name and value lengths over all agent headers. */
export const MAX_AGENT_HEADER_BYTES = 16384;

const TOKEN_RE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

const REFUSED = new Map<string, string>([
  ['authorization', 'it carries credentials; the broker injects them'],
  ['proxy-authorization', 'it carries credentials'],
  ['cookie', 'it carries credentials'],
  ['cookie2', 'it carries credentials'],
  ['host', 'the host is fixed by the credential'],
  ['connection', 'it is a hop-by-hop header'],
  ['keep-alive', 'it is a hop-by-hop header'],
  ['transfer-encoding', 'message framing is set by the broker'],
  ['content-length', 'message framing is set by the broker'],
  ['te', 'it is a hop-by-hop header'],
  ['trailer', 'it is a hop-by-hop header'],
  ['upgrade', 'protocol upgrades are not brokered'],
  ['expect', 'the broker sends bodies without 100-continue'],
  ['http2-settings', 'it is a hop-by-hop header'],
  ['accept-encoding', 'the broker requests identity encoding so it can scrub responses'],
  ['forwarded', 'it would misstate where the request comes from'],
  ['x-original-url', 'it can override the request path on some servers'],
  ['x-rewrite-url', 'it can override the request path on some servers'],
  ['x-http-method-override', 'it can override the method scope on some servers'],
  ['x-http-method', 'it can override the method scope on some servers'],
  ['x-method-override', 'it can override the method scope on some servers'],
]);

const REFUSED_PREFIXES: ReadonlyArray<readonly [string, string]> = [
  ['proxy-', 'proxy headers are not brokered'],
  ['x-amz-', 'AWS headers are set and signed by the broker'],
  ['x-forwarded-', 'it would misstate where the request comes from'],
];

function refuse(message: string): CustosError {
  return new CustosError('CUSTOS_ERR_HEADER_REFUSED', message);
}

/** Why a (lower-case, valid) header name is refused, or undefined when it is allowed. */
function refusalReason(name: string, credentialNames: ReadonlySet<string>): string | undefined {
  if (credentialNames.has(name)) return "it is this credential's own header";
  const exact = REFUSED.get(name);
  if (exact !== undefined) return exact;
  for (const [prefix, reason] of REFUSED_PREFIXES) if (name.startsWith(prefix)) return reason;
  return undefined;
}

/** Field-value characters: HTAB, visible ASCII, space, obs-text (0x80–0xFF). No CR/LF/NUL/DEL. */
function validValue(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 0x09) continue;
    if (c < 0x20 || c === 0x7f || c > 0xff) return false;
  }
  return true;
}

/**
 * Returns the agent's headers with lower-case names, or throws CUSTOS_ERR_HEADER_REFUSED.
 * The result has no prototype, so a header named `__proto__` stays an ordinary key.
 */
export function sanitizeAgentHeaders(
  headers: Record<string, string> | undefined,
  credentialHeaderNames: readonly string[],
): Record<string, string> {
  const out = Object.create(null) as Record<string, string>;
  if (headers === undefined || headers === null) return out;
  if (typeof headers !== 'object' || Array.isArray(headers)) throw refuse('Headers must be an object of name → string value.');
  const entries = Object.entries(headers);
  if (entries.length > MAX_AGENT_HEADERS) throw refuse(`Too many headers (${entries.length}; at most ${MAX_AGENT_HEADERS}).`);
  const credentialNames = new Set(credentialHeaderNames.map((n) => n.toLowerCase()));
  let total = 0;
  for (let i = 0; i < entries.length; i++) {
    const [rawName, value] = entries[i]!;
    if (rawName.length === 0 || rawName.length > MAX_HEADER_NAME_LENGTH || !TOKEN_RE.test(rawName)) {
      throw refuse(`Header #${i + 1} has an invalid name (letters, digits and !#$%&'*+-.^_\`|~ only; at most ${MAX_HEADER_NAME_LENGTH}).`);
    }
    const name = rawName.toLowerCase();
    const reason = refusalReason(name, credentialNames);
    if (reason !== undefined) throw refuse(`The header ${name} may not be set by an agent: ${reason}.`);
    if (typeof value !== 'string') throw refuse(`The header ${name} must have a string value.`);
    if (value.length > MAX_HEADER_VALUE_LENGTH) {
      throw refuse(`The header ${name} is too long (${value.length} characters; at most ${MAX_HEADER_VALUE_LENGTH}).`);
    }
    if (!validValue(value)) {
      throw refuse(`The header ${name} has an invalid value (control characters such as CR, LF or NUL, or characters beyond Latin-1).`);
    }
    if (Object.hasOwn(out, name)) throw refuse(`The header ${name} is given twice (names are case-insensitive).`);
    total += name.length + value.length;
    if (total > MAX_AGENT_HEADER_BYTES) throw refuse(`The headers are too large in total (at most ${MAX_AGENT_HEADER_BYTES} characters).`);
    out[name] = value;
  }
  return out;
}
