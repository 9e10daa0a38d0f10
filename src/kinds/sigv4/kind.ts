/**
 * SigV4: AWS Signature Version 4 (S3, STS, any AWS-compatible API such as R2 or MinIO). Each request
 * is signed at call time for the credential's region and service; the credential is bound to its
 * base URL (the broker enforces the origin; this kind signs exactly the request it is given).
 */
import { z } from 'zod';
import { secretText, type PublicView } from '../credential-kind.ts';

export const sigv4SecretSchema = z.strictObject({
  // Appears in `Credential=<id>/<scope>`, so no '/', ',', '=' or spaces.
  accessKeyId: secretText('accessKeyId', /^[A-Za-z0-9._~+-]+$/, 'must be letters, digits or ._~+-', 128),
  secretAccessKey: secretText('secretAccessKey', /^[\x21-\x7e]+$/, 'must be visible ASCII without spaces', 256),
  sessionToken: secretText('sessionToken', /^[\x21-\x7e]+$/, 'must be visible ASCII without spaces', 8192).optional(),
});

export const sigv4ConfigSchema = z.strictObject({
  region: z
    .string({ error: 'region is required.' })
    .regex(/^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$/, 'region must be an AWS region name such as us-east-1 (lower-case letters, digits, dashes).'),
  service: z
    .string({ error: 'service is required.' })
    .regex(/^[a-z0-9](?:[a-z0-9.-]{0,62}[a-z0-9])?$/, 'service must be an AWS signing name such as s3 or sts (lower-case letters, digits, dots, dashes).'),
});
export type Sigv4Config = z.infer<typeof sigv4ConfigSchema>;

export function describeSigv4(config: Sigv4Config): PublicView {
  return { authScheme: 'sigv4', region: config.region, service: config.service };
}
