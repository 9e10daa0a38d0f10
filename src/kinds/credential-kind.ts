/**
 * The credential-kind seam. A kind knows how to validate what a person types once (the secret, as
 * named string fields), what non-secret config it carries, and how to *use* the secret. Kinds run
 * only inside the workspace actor (DESIGN.md invariant 3): the actor decrypts each secret field into
 * a Buffer, calls the kind, and zeroes every Buffer right after the call returns.
 *
 * Capabilities are separate small interfaces with type guards (Injector, Querier, Signer), not flags.
 */
import type { ZodType } from 'zod';
import type { Logger } from '../log.ts';

/** The auth schemes of the spec; each is one folder under src/kinds/. */
export const AUTH_SCHEMES = ['bearer', 'header', 'sigv4', 'oauth2', 'database', 'ssh'] as const;
export type AuthScheme = (typeof AUTH_SCHEMES)[number];

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
