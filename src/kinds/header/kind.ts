/**
 * Named header: a static key sent in a header the person names (x-api-key, PRIVATE-TOKEN,
 * DD-API-KEY…), optionally after a fixed scheme word (`Authorization: Token <key>`).
 */
import { z } from 'zod';
import { secretText, type PublicView } from '../credential-kind.ts';

/**
 * Headers a credential may not occupy: framing and hop-by-hop headers (the request would be
 * mis-framed or smuggled), Host (routing), cookies (session state, not API keys), proxy and
 * forwarding headers (they speak for intermediaries, not the caller) and fetch metadata.
 */
const REFUSED_EXACT = new Set([
  'host', 'content-length', 'content-type', 'content-encoding', 'transfer-encoding', 'connection',
  'keep-alive', 'upgrade', 'te', 'trailer', 'expect', 'cookie', 'set-cookie', 'forwarded', 'via',
  'x-real-ip', 'origin', 'referer', 'range', 'accept-encoding',
]);
const REFUSED_PREFIXES = ['proxy-', 'x-forwarded-', 'sec-', 'x-amz-'];

// RFC 9110 token characters: a header name cannot carry ':' or whitespace, so no header injection.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

export const headerConfigSchema = z.strictObject({
  headerName: z
    .string({ error: 'headerName is required.' })
    .min(1, 'headerName must not be empty.')
    .max(64, 'headerName must be at most 64 characters.')
    .regex(TOKEN, 'headerName must be an HTTP header name (letters, digits and !#$%&\'*+-.^_`|~).')
    .transform((name) => name.toLowerCase())
    .refine((name) => !REFUSED_EXACT.has(name) && !REFUSED_PREFIXES.some((p) => name.startsWith(p)), {
      message: 'headerName names a header that cannot carry a credential (framing, Host, cookies, proxy or forwarding headers).',
    }),
  /** A fixed scheme word put before the secret, e.g. "Token" gives `Token <secret>`. */
  valuePrefix: z
    .string()
    .regex(/^[A-Za-z][A-Za-z0-9._-]{0,31}$/, 'valuePrefix must be one word of letters, digits, dot, dash or underscore.')
    .optional(),
});
export type HeaderConfig = z.infer<typeof headerConfigSchema>;

export const headerSecretSchema = z.strictObject({
  value: secretText('value', /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/, 'must be visible ASCII (inner spaces allowed)'),
});

export function describeHeader(config: HeaderConfig): PublicView {
  return {
    authScheme: 'header',
    headerName: config.headerName,
    format: config.valuePrefix ? `${config.valuePrefix} <secret>` : '<secret>',
  };
}
