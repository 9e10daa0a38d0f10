import { CustosError } from '../../errors.ts';
import { isHeaderSafeValue, secretField, type KindContext, type OutboundRequest, type SecretFields } from '../credential-kind.ts';
import { headerConfigSchema, type HeaderConfig } from './kind.ts';

export async function injectHeader(
  req: OutboundRequest,
  secret: SecretFields,
  rawConfig: HeaderConfig,
  _ctx: KindContext,
): Promise<Buffer[]> {
  // Config comes from storage: re-validate so a tampered row cannot aim the key at Host or Cookie.
  const parsed = headerConfigSchema.safeParse(rawConfig);
  if (!parsed.success) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'The credential\'s header configuration is invalid; a person must fix it.');
  }
  const config = parsed.data;
  const value = secretField(secret, 'value');
  if (!isHeaderSafeValue(value)) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'The stored header value has characters an HTTP header cannot carry; replace the secret.');
  }
  // Built at the last moment because Node's HTTP client wants strings; it lives only on this request.
  const text = value.toString('latin1');
  req.headers[config.headerName] = config.valuePrefix ? `${config.valuePrefix} ${text}` : text;
  // A copy for the broker's response scrubbing; the actor zeroes it afterwards.
  return [Buffer.from(value)];
}
