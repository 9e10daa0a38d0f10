/**
 * The SigV4 signing key, derived and cached inside the actor.
 *
 * Why not aws4's own path: `RequestSigner.prototype.signature()` caches derived keys in a
 * module-level LRU keyed by the *plaintext* secretAccessKey string, i.e. secret material in a
 * process-wide structure that outlives the actor and can never be zeroed. We derive the key here
 * with node:crypto from a Buffer (zeroed after use) and keep it in ctx.cache (zeroed on expiry,
 * passivation and secret change), one derivation per UTC day, region and service.
 */
import { createHash, createHmac } from 'node:crypto';
import type { ActorCache } from '../credential-kind.ts';

function hmac(key: Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

/** kDate → kRegion → kService → kSigning (AWS SigV4 key derivation), from 'AWS4' + secret. */
export function deriveSigningKey(secretAccessKey: Buffer, date: string, region: string, service: string): Buffer {
  const seed = Buffer.alloc(4 + secretAccessKey.length);
  seed.write('AWS4', 0, 'latin1');
  secretAccessKey.copy(seed, 4);
  const steps: Buffer[] = [];
  try {
    steps.push(hmac(seed, date));
    steps.push(hmac(steps[0]!, region));
    steps.push(hmac(steps[1]!, service));
    return hmac(steps[2]!, 'aws4_request');
  } finally {
    seed.fill(0);
    for (const step of steps) step.fill(0);
  }
}

/** Midnight UTC after `date` (YYYYMMDD): a signing key is valid for its scope's day only. */
export function endOfUtcDay(date: string): number {
  return Date.UTC(Number(date.slice(0, 4)), Number(date.slice(4, 6)) - 1, Number(date.slice(6, 8)) + 1);
}

/**
 * Cache key for a derived key. It carries a 64-bit fingerprint of the key pair so a replaced secret
 * can never be served a stale key even if the actor missed the change; a truncated SHA-256 of a
 * 160+-bit random secret reveals nothing usable about it.
 */
export function signingKeyCacheKey(accessKeyId: Buffer, secretAccessKey: Buffer, date: string, region: string, service: string): string {
  const fp = createHash('sha256').update(accessKeyId).update('\0').update(secretAccessKey).digest('hex').slice(0, 16);
  return `sigv4:key:${fp}:${date}:${region}:${service}`;
}

/**
 * Returns the cached signing key (owned by the cache: use it synchronously, don't keep it) or
 * derives, caches and returns a new one.
 */
export function signingKey(
  cache: ActorCache,
  accessKeyId: Buffer,
  secretAccessKey: Buffer,
  date: string,
  region: string,
  service: string,
): Buffer {
  const key = signingKeyCacheKey(accessKeyId, secretAccessKey, date, region, service);
  const cached = cache.get(key);
  if (cached) return cached;
  const derived = deriveSigningKey(secretAccessKey, date, region, service);
  cache.set(key, derived, endOfUtcDay(date));
  return derived;
}
