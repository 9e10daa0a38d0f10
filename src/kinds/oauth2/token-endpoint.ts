/**
 * One refresh-token grant against the credential's token URL, through simple-oauth2.
 *
 * Honest note on strings: simple-oauth2 (and @hapi/wreck under it) take the client id, client
 * secret and refresh token as JS strings and build the request body / Basic header from them. We
 * create those strings here, at the last moment, from the actor's Buffers, and create the client
 * per refresh so no long-lived object holds them; they become garbage when this call returns but
 * cannot be zeroed. Never run the service with DEBUG=simple-oauth2:*: that library's debug output
 * prints the request options, client secret included.
 */
import { AuthorizationCode } from 'simple-oauth2';
import { CustosError } from '../../errors.ts';
import { isHeaderSafeValue, secretField, type SecretFields } from '../credential-kind.ts';
import type { Oauth2Config } from './kind.ts';

export interface TokenGrant {
  accessToken: Buffer;
  /** Present when the server rotated the refresh token. */
  refreshToken: Buffer | undefined;
  /** Seconds, when the server said. */
  expiresIn: number | undefined;
}

export async function refreshGrant(fresh: SecretFields, config: Oauth2Config): Promise<TokenGrant> {
  const clientId = secretField(fresh, 'clientId');
  const clientSecret = secretField(fresh, 'clientSecret');
  const refreshToken = secretField(fresh, 'refreshToken');
  const url = new URL(config.tokenUrl);
  const client = new AuthorizationCode({
    client: { id: clientId.toString('latin1'), secret: clientSecret.toString('latin1') },
    auth: { tokenHost: url.origin, tokenPath: url.pathname + url.search },
    options: { authorizationMethod: config.authStyle },
    // Wreck does not follow redirects by default (a token endpoint that redirects is refused, so
    // the client secret is never replayed to another host); bounded time and size.
    http: { timeout: config.timeoutMs, maxBytes: 256 * 1024, redirects: false },
  });
  const token = client.createToken({ refresh_token: refreshToken.toString('latin1') });
  const next = await token.refresh(config.scopes.length > 0 ? { scope: config.scopes } : {});
  const raw = next.token as Record<string, unknown>;

  const access = typeof raw.access_token === 'string' ? Buffer.from(raw.access_token, 'latin1') : undefined;
  if (!access || !isHeaderSafeValue(access) || access.includes(0x20)) {
    access?.fill(0);
    throw new CustosError('CUSTOS_ERR_UPSTREAM', 'The OAuth2 token endpoint answered without a usable access token.');
  }
  const rotated = typeof raw.refresh_token === 'string' && raw.refresh_token.length > 0 ? Buffer.from(raw.refresh_token, 'latin1') : undefined;
  const expiresIn = Number(raw.expires_in);
  return { accessToken: access, refreshToken: rotated, expiresIn: Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn : undefined };
}

export interface RefreshFailure {
  /** True when a person must act (the grant or the client was refused). */
  reauth: boolean;
  /** A short, secret-free reason for the credential's health (an OAuth2 error code or HTTP status). */
  reason: string;
  error: CustosError;
}

/**
 * Maps what simple-oauth2/wreck threw to a secret-free CustosError. The thrown Boom carries the
 * raw response and request (Authorization: Basic <client credentials> included), so it is never
 * attached as a cause or logged.
 */
export function classifyRefreshError(err: unknown): RefreshFailure {
  if (err instanceof CustosError) return { reauth: false, reason: err.code, error: err };
  const boom = err as { isBoom?: boolean; output?: { statusCode?: number }; data?: { isResponseError?: boolean; payload?: unknown } };
  const status = boom?.output?.statusCode;
  if (boom?.isBoom && boom.data?.isResponseError && (status === 400 || status === 401)) {
    const payload = boom.data.payload as { error?: unknown } | undefined;
    const code = payload && typeof payload === 'object' && typeof payload.error === 'string' && /^[a-z_]{1,64}$/.test(payload.error) ? payload.error : undefined;
    const reason = code ?? `http_${status}`;
    return {
      reauth: true,
      reason,
      error: new CustosError(
        'CUSTOS_ERR_REAUTH_REQUIRED',
        `OAuth2 refresh failed: a person must re-authorise this credential (the token endpoint answered ${reason}) and store a new refresh token.`,
        { details: { reason } },
      ),
    };
  }
  if (boom?.isBoom && boom.data?.isResponseError && typeof status === 'number') {
    return { reauth: false, reason: `http_${status}`, error: new CustosError('CUSTOS_ERR_UPSTREAM', `The OAuth2 token endpoint answered HTTP ${status}; try again later.`) };
  }
  if (boom?.isBoom && status === 504) {
    return { reauth: false, reason: 'timeout', error: new CustosError('CUSTOS_ERR_UPSTREAM_TIMEOUT', 'The OAuth2 token endpoint did not answer in time; try again later.') };
  }
  return { reauth: false, reason: 'unreachable', error: new CustosError('CUSTOS_ERR_UPSTREAM', 'The OAuth2 token endpoint could not be reached or gave an unreadable answer; try again later.') };
}
