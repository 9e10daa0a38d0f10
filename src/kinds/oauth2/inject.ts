import { createHash } from 'node:crypto';
import { CustosError } from '../../errors.ts';
import { secretField, type KindContext, type OutboundRequest, type SecretFields } from '../credential-kind.ts';
import { oauth2ConfigSchema, type Oauth2Config } from './kind.ts';
import { classifyRefreshError, refreshGrant, type RefreshFailure } from './token-endpoint.ts';

/** Lifetime assumed when the token endpoint gives no expires_in. */
export const DEFAULT_ACCESS_TOKEN_TTL_MS = 5 * 60_000;

/**
 * In-flight refreshes, one per (workspace, credential, token identity). Holds promises only, never
 * a token: the leader writes the access token into ctx.cache and every waiter reads it from there,
 * so 50 concurrent calls with an expired token cause exactly one token request in this process
 * (other processes are serialised by the refresh port's row lock).
 */
const inFlight = new Map<string, Promise<void>>();

/**
 * Where the access token lives in the credential's cache. A fingerprint of what the token was
 * issued for (client, token URL, scopes), so a config change never reuses a token for other scopes.
 */
export function accessTokenCacheKey(clientId: Buffer, config: Oauth2Config): string {
  const fp = createHash('sha256').update(clientId).update('\0').update(config.tokenUrl).update('\0').update(config.scopes.join(' ')).digest('hex').slice(0, 16);
  return `oauth2:access:${fp}`;
}

/** How long to cache: until `skew` before expiry, but at least half the lifetime for short tokens. */
export function accessTokenTtlMs(expiresIn: number | undefined, skewSeconds: number): number {
  if (expiresIn === undefined) return DEFAULT_ACCESS_TOKEN_TTL_MS;
  const lifetime = expiresIn * 1000;
  return Math.max(lifetime - skewSeconds * 1000, lifetime / 2);
}

function parseConfig(raw: unknown): Oauth2Config {
  const parsed = oauth2ConfigSchema.safeParse(raw);
  if (!parsed.success) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'The credential\'s OAuth2 configuration is invalid; a person must fix it.');
  }
  return parsed.data;
}

async function runRefresh(ctx: KindContext, config: Oauth2Config, cacheKey: string): Promise<void> {
  const port = ctx.refresh;
  if (!port) {
    // Without the row lock a rotated refresh token could be spent twice or lost: refuse.
    throw new CustosError('CUSTOS_ERR_CONFIG', 'OAuth2 credentials need the actor\'s refresh port.', { expose: false });
  }
  // The callback returns failures instead of throwing them, so the transaction that records
  // `reauth_required` commits rather than rolling back with the error.
  const failure = await port.withLock(async (fresh, tx): Promise<RefreshFailure | undefined> => {
    let grant;
    try {
      grant = await refreshGrant(fresh, config);
    } catch (err) {
      const failed = classifyRefreshError(err);
      if (failed.reauth) await tx.setHealth('reauth_required', failed.reason);
      // Only ids and the secret-free reason: never `err` (it carries the raw token request).
      ctx.log.warn({ credentialId: ctx.credentialId, event: 'oauth2.refresh', outcome: failed.reauth ? 'reauth_required' : 'failed', reason: failed.reason }, 'OAuth2 refresh failed');
      return failed;
    }
    let access: Buffer | undefined = grant.accessToken;
    try {
      const previous = fresh.refreshToken;
      if (grant.refreshToken && !(previous && grant.refreshToken.equals(previous))) {
        // Persisted (encrypted, under the lock) BEFORE the new access token is used: the server has
        // already retired the old refresh token, so losing the new one would strand the credential.
        await tx.persistSecret({ refreshToken: grant.refreshToken });
      }
      await tx.setHealth('ok');
      ctx.cache.set(cacheKey, access, ctx.now() + accessTokenTtlMs(grant.expiresIn, config.expirySkewSeconds));
      access = undefined; // the cache owns it now
      ctx.log.info({ credentialId: ctx.credentialId, event: 'oauth2.refresh', outcome: 'ok', rotated: grant.refreshToken !== undefined }, 'OAuth2 access token refreshed');
    } finally {
      access?.fill(0);
      grant.refreshToken?.fill(0);
    }
    return undefined;
  });
  if (failure) throw failure.error;
}

function refreshOnce(ctx: KindContext, config: Oauth2Config, cacheKey: string): Promise<void> {
  const flightKey = `${ctx.workspaceId}\0${ctx.credentialId}\0${cacheKey}`;
  let flight = inFlight.get(flightKey);
  if (!flight) {
    flight = runRefresh(ctx, config, cacheKey).finally(() => inFlight.delete(flightKey));
    inFlight.set(flightKey, flight);
  }
  return flight;
}

export async function injectOauth2(
  req: OutboundRequest,
  secret: SecretFields,
  rawConfig: Oauth2Config,
  ctx: KindContext,
): Promise<Buffer[]> {
  const config = parseConfig(rawConfig);
  const cacheKey = accessTokenCacheKey(secretField(secret, 'clientId'), config);
  let token = ctx.cache.get(cacheKey);
  // A second round only if the token vanished between the refresh and our read (passivation).
  for (let round = 0; !token && round < 2; round += 1) {
    await refreshOnce(ctx, config, cacheKey);
    token = ctx.cache.get(cacheKey);
  }
  if (!token) throw new CustosError('CUSTOS_ERR_UPSTREAM', 'No OAuth2 access token could be kept for this call; try again.');
  // `token` is the cache's Buffer: used synchronously here, copied for the broker, never kept.
  // The header string is built at the last moment for Node's HTTP client and lives on this request only.
  req.headers.authorization = `Bearer ${token.toString('latin1')}`;
  const scrub = [Buffer.from(token)];
  // Defence in depth: the long-lived secrets are not sent upstream, but are scrubbed if echoed.
  for (const field of ['clientSecret', 'refreshToken']) {
    const value = Object.hasOwn(secret, field) ? secret[field] : undefined;
    if (value && value.length > 0) scrub.push(Buffer.from(value));
  }
  return scrub;
}
