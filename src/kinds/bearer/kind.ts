/**
 * Bearer: a static token sent as `Authorization: Bearer <value>` (OpenAI, GitHub, Stripe, Slack…).
 * The secret is one field; there is no non-secret config beyond the base URL the broker holds.
 */
import { z } from 'zod';
import { secretText, type PublicView } from '../credential-kind.ts';

// RFC 6750 b64token is narrower; real providers use visible ASCII without spaces. No CR/LF/NUL:
// the value goes into a header, so a stored value must never be able to start a new header line.
export const bearerSecretSchema = z.strictObject({
  value: secretText('value', /^[\x21-\x7e]+$/, 'must be visible ASCII without spaces'),
});

export const bearerConfigSchema = z.strictObject({});
export type BearerConfig = z.infer<typeof bearerConfigSchema>;

export function describeBearer(_config: BearerConfig): PublicView {
  return { authScheme: 'bearer', headerName: 'authorization', format: 'Bearer <secret>' };
}
