/**
 * The credential-kind seam. A kind knows how to validate what a person types once (the secret, as
 * named string fields), what non-secret config it carries, and how to *use* the secret. Kinds run
 * only inside the workspace actor (DESIGN.md invariant 3): the actor decrypts each secret field into
 * a Buffer, calls the kind, and zeroes every Buffer right after the call returns.
 *
 * Capabilities are separate small interfaces with type guards (Injector, Querier, Signer), not flags.
 */
import { z, type ZodType } from 'zod';
import type { Logger } from '../log.ts';
import { CustosError } from '../errors.ts';

/** The auth schemes of the spec; each is one folder under src/kinds/. */
export const AUTH_SCHEMES = ['bearer', 'header', 'sigv4', 'oauth2', 'database', 'ssh'] as const;
export type AuthScheme = (typeof AUTH_SCHEMES)[number];

/** Schemes whose credentials are injected into HTTP requests (call_api); they need a base URL. */
export const HTTP_AUTH_SCHEMES: ReadonlySet<string> = new Set<AuthScheme>(['bearer', 'header', 'sigv4', 'oauth2']);
export const isHttpScheme = (scheme: string): boolean => HTTP_AUTH_SCHEMES.has(scheme);

/** Decrypted secret fields, by field name. Owned by the actor; zeroed after the call. */
export type SecretFields = Readonly<Record<string, Buffer>>;

/** Non-secret view a `read` holder (and list_services) may see. */
export interface PublicView {
  authScheme: AuthScheme;
  /** e.g. { headerName: 'x-api-key' } or { region, service } or { host, port, database, user } */
  [key: string]: unknown;
}

/** An HTTP request being built for the upstream; kinds add credential headers to it. */
export interface OutboundRequest {
  method: string;
  url: URL;
  /** lower-case header names */
  headers: Record<string, string>;
  body: Buffer | undefined;
}

/**
 * A small per-actor cache (derived SigV4 keys, OAuth2 access tokens). Lives inside the actor and is
 * zeroed when the actor passivates or the credential's secret changes. Values are Buffers so they
 * can be zeroed; expired entries are zeroed on access.
 */
export interface ActorCache {
  get(key: string): Buffer | undefined;
  set(key: string, value: Buffer, expiresAtMs: number): void;
  delete(key: string): void;
}

/** What the actor gives a kind besides the secret. */
export interface KindContext {
  workspaceId: string;
  credentialId: string;
  /** This credential's cache: keys are private to the credential. */
  cache: ActorCache;
  log: Logger;
  now(): number;
  /** Present for kinds whose secret changes by itself (OAuth2 refresh-token rotation). */
  refresh?: RefreshPort;
}

/**
 * Cross-process serialisation of a credential's refresh, for rotating refresh tokens: the actor
 * implements it with a database row lock on the credential, so two nodes never both spend the same
 * refresh token, and a rotated one is persisted (encrypted) before it is used.
 */
export interface RefreshPort {
  /**
   * Runs `fn` while holding the credential's row lock. `fresh` is the secret as stored right now
   * (re-read and decrypted under the lock: another node may have rotated it). Buffers are zeroed
   * after `fn` settles.
   */
  withLock<T>(fn: (fresh: SecretFields, tx: RefreshTx) => Promise<T>): Promise<T>;
}

export interface RefreshTx {
  /** Encrypts and stores replacement secret fields (e.g. a rotated refresh token) inside the lock. */
  persistSecret(fields: Record<string, Buffer>): Promise<void>;
  /** Records that a person must re-authorise (refresh failed) or that the credential is healthy. */
  setHealth(health: 'ok' | 'reauth_required', reason?: string): Promise<void>;
}

export interface CredentialKind<Config extends Record<string, unknown> = Record<string, unknown>> {
  readonly scheme: AuthScheme;
  /** Secret field names, in the order a person supplies them. Each is encrypted separately. */
  readonly secretFields: readonly string[];
  /** What a person types once (write-only); string fields named in `secretFields`. */
  readonly secretSchema: ZodType<Record<string, string>>;
  /** Non-secret config a person supplies (header name, region…), shown to `read`. */
  readonly configSchema: ZodType<Config>;
  /**
   * Non-secret config derived from the secret at save time (e.g. an SSH public key and its
   * fingerprint, a database's host/port/user). Runs inside the actor; must not return secret parts.
   */
  deriveConfig?(secret: SecretFields, config: Config): Config;
  describe(config: Config): PublicView;
}

/** Adds credentials to an outbound HTTP request (bearer, header, sigv4, oauth2). */
export interface Injector<Config extends Record<string, unknown> = Record<string, unknown>> {
  /**
   * Mutates `req` to carry the credential and returns every secret or derived value it put on the
   * wire (as Buffers), so the broker can scrub them from the response before the agent sees it.
   */
  inject(req: OutboundRequest, secret: SecretFields, config: Config, ctx: KindContext): Promise<Buffer[]>;
}

export function isInjector(kind: CredentialKind<any>): kind is CredentialKind<any> & Injector<any> {
  return typeof (kind as Partial<Injector>).inject === 'function';
}

/**
 * Produces SSH signatures with a stored private key (the ssh kind). Only the signature leaves the
 * call: the private key is decrypted by the actor into `secret`, used, and zeroed by the actor after.
 */
export interface Signer<Config extends Record<string, unknown> = Record<string, unknown>> {
  /**
   * Signs `data` as the SSH agent protocol's SIGN_REQUEST would and returns the SSH signature blob
   * (`string algorithm ‖ string signature`). `flags` are the agent protocol's (ed25519 ignores the
   * RSA SHA-2 flags). `ctx`, when given, lets a kind cache derived material (e.g. a decrypted key)
   * in the actor's zeroing cache. Throws CustosError on a key that does not match `config`.
   */
  sign(secret: SecretFields, config: Config, data: Buffer, flags: number, ctx?: KindContext): Buffer;
}

export function isSigner(kind: CredentialKind<any>): kind is CredentialKind<any> & Signer<any> {
  return typeof (kind as Partial<Signer>).sign === 'function';
}

/**
 * True when `buf` may be put in an HTTP header value as latin1: visible ASCII with inner spaces
 * only. Refusing CR, LF, NUL and other controls stops header injection through a stored secret;
 * refusing bytes >= 0x80 keeps the wire bytes identical to the stored bytes (no re-encoding), so
 * the broker can scrub exactly what was sent.
 */
export function isHeaderSafeValue(buf: Buffer): boolean {
  if (buf.length === 0) return false;
  const first = buf[0]!;
  const last = buf[buf.length - 1]!;
  if (first === 0x20 || last === 0x20) return false;
  for (const byte of buf) if (byte < 0x20 || byte > 0x7e) return false;
  return true;
}

/**
 * A write-only secret text field for a kind's secretSchema: required, non-empty, bounded and
 * restricted to `pattern`. Messages name the field and the rule, never the value (zod does not echo
 * input unless asked to), so a refusal can be shown to the person who typed it and logged.
 */
export function secretText(field: string, pattern: RegExp, rule: string, maxLength = 8192) {
  return z
    .string({ error: (issue) => (issue.input === undefined ? `${field} is required.` : `${field} must be a string.`) })
    .min(1, `${field} must not be empty.`)
    .max(maxLength, `${field} must be at most ${maxLength} characters.`)
    .regex(pattern, `${field} ${rule}.`);
}

/**
 * The decrypted Buffer of a required secret field. A missing or empty field means the stored secret
 * is incomplete: a person must supply it again (the message names the field, not any value).
 */
export function secretField(secret: SecretFields, field: string): Buffer {
  const value = Object.hasOwn(secret, field) ? secret[field] : undefined;
  if (!Buffer.isBuffer(value) || value.length === 0) {
    throw new CustosError('CUSTOS_ERR_NOT_READY', `The stored secret has no ${field}; a person must supply the secret again.`);
  }
  return value;
}
