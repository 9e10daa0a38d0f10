/**
 * OAuth2 (refresh-token grant): the person stores a client id, client secret and refresh token once;
 * each call uses a short-lived access token obtained from the credential's token URL, cached in the
 * actor until shortly before it expires, and sent as `Authorization: Bearer <access token>`.
 */
import { z } from 'zod';
import { secretText, type PublicView } from '../credential-kind.ts';

const LOOPBACK = /^(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])$/;

export const oauth2SecretSchema = z.strictObject({
  // RFC 6749 appendix A: client id and secret are VSCHARs; we also refuse spaces (never used in practice).
  clientId: secretText('clientId', /^[\x21-\x7e]+$/, 'must be visible ASCII without spaces', 512),
  clientSecret: secretText('clientSecret', /^[\x21-\x7e]+$/, 'must be visible ASCII without spaces', 1024),
  refreshToken: secretText('refreshToken', /^[\x21-\x7e]+$/, 'must be visible ASCII without spaces', 8192),
});

export const oauth2ConfigSchema = z.strictObject({
  tokenUrl: z
    .string({ error: 'tokenUrl is required.' })
    .max(2048, 'tokenUrl must be at most 2048 characters.')
    .refine((value) => {
      let url: URL;
      try {
        url = new URL(value);
      } catch {
        return false;
      }
      if (url.username || url.password || url.hash) return false;
      // The client secret and refresh token travel to this URL: only over TLS, except to loopback
      // (a local authorization server in development and tests).
      return url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK.test(url.hostname));
    }, 'tokenUrl must be an https:// URL without credentials or fragment (http:// only for loopback).'),
  // RFC 6749 §3.3 scope-token characters.
  scopes: z
    .array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'each scope must be a scope token (visible ASCII, no spaces, quotes or backslashes).'))
    .max(64, 'at most 64 scopes.')
    .default([]),
  /** How the client authenticates to the token endpoint: HTTP Basic (default, RFC 6749 §2.3.1) or form body. */
  authStyle: z.enum(['header', 'body']).default('header'),
  /** Refresh this many seconds before the access token expires (clock skew, slow calls). */
  expirySkewSeconds: z.number().int().min(0).max(3600).default(60),
  /** Token endpoint timeout. */
  timeoutMs: z.number().int().min(100).max(60_000).default(10_000),
});
export type Oauth2Config = z.infer<typeof oauth2ConfigSchema>;

export function describeOauth2(config: Oauth2Config): PublicView {
  return {
    authScheme: 'oauth2',
    headerName: 'authorization',
    format: 'Bearer <access token>',
    tokenUrl: config.tokenUrl,
    scopes: [...config.scopes],
    authStyle: config.authStyle,
  };
}
