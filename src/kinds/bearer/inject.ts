import { CustosError } from '../../errors.ts';
import { isHeaderSafeValue, secretField, type KindContext, type OutboundRequest, type SecretFields } from '../credential-kind.ts';
import type { BearerConfig } from './kind.ts';

export async function injectBearer(
  req: OutboundRequest,
  secret: SecretFields,
  _config: BearerConfig,
  _ctx: KindContext,
): Promise<Buffer[]> {
  const value = secretField(secret, 'value');
  // Re-checked at use time, not only at save time: the stored bytes are what reach the wire.
  if (!isHeaderSafeValue(value) || value.includes(0x20)) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'The stored bearer token has characters an HTTP header cannot carry; replace the secret.');
  }
  // Node's HTTP client takes header values as strings: this one is built here, at the last moment,
  // and lives only on this request object (invariant 4).
  req.headers.authorization = `Bearer ${value.toString('latin1')}`;
  // A copy, not `value`: the actor zeroes `value` when we return, but the broker still needs the
  // bytes to scrub the response; the actor zeroes this copy after scrubbing.
  return [Buffer.from(value)];
}
