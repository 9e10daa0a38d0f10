import { createHmac } from 'node:crypto';
import aws4 from 'aws4';
import { CustosError } from '../../errors.ts';
import { secretField, type KindContext, type OutboundRequest, type SecretFields } from '../credential-kind.ts';
import { sigv4ConfigSchema, type Sigv4Config } from './kind.ts';
import { signingKey } from './signing-key.ts';

/**
 * aws4's signer with `signature()` replaced: aws4 still builds the canonical request and the string
 * to sign (the fiddly, well-tested part), but the HMAC uses our actor-cached signing key, so aws4's
 * module-level, plaintext-keyed credential cache is never touched (see signing-key.ts).
 */
class ActorKeySigner extends aws4.RequestSigner {
  readonly #key: Buffer;

  constructor(request: aws4.Request, credentials: aws4.Credentials, key: Buffer) {
    super(request, credentials);
    this.#key = key;
  }

  override signature(): string {
    return createHmac('sha256', this.#key).update(this.stringToSign(), 'utf8').digest('hex');
  }
}

// Characters a WHATWG URL leaves raw in a path but aws4 would re-encode before signing. We encode
// them on the URL itself so the path that is sent is byte-for-byte the path that is signed.
const RAW_IN_PATH = /[^0-9A-Za-z;,/?:@&=+$\-_.!~*'()#%]/g;

function amzDateTime(nowMs: number): string {
  return new Date(nowMs).toISOString().replace(/[:-]|\.\d{3}/g, '');
}

export async function injectSigv4(
  req: OutboundRequest,
  secret: SecretFields,
  rawConfig: Sigv4Config,
  ctx: KindContext,
): Promise<Buffer[]> {
  const parsed = sigv4ConfigSchema.safeParse(rawConfig);
  if (!parsed.success) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'The credential\'s SigV4 region/service configuration is invalid; a person must fix it.');
  }
  const { region, service } = parsed.data;
  const accessKeyId = secretField(secret, 'accessKeyId');
  const secretAccessKey = secretField(secret, 'secretAccessKey');
  const sessionToken = Object.hasOwn(secret, 'sessionToken') && secret.sessionToken?.length ? secret.sessionToken : undefined;

  let pathname = req.url.pathname.replace(RAW_IN_PATH, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
  // aws4 reads '+' in an S3 path as a space (form decoding) but S3 keys take it literally: send %2B.
  if (service === 's3') pathname = pathname.replace(/\+/g, '%2B');
  if (pathname !== req.url.pathname) req.url.pathname = pathname;

  const datetime = amzDateTime(ctx.now());
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    // A clean slate for everything SigV4 owns: stale or agent-supplied values must not be signed.
    if (name === 'authorization' || name === 'host' || name.startsWith('x-amz-')) continue;
    headers[name] = value;
  }
  headers.host = req.url.host;
  headers['x-amz-date'] = datetime;
  // Strings built at the last moment: aws4 and Node's HTTP client need them; they live only on
  // this request and the short-lived signer.
  if (sessionToken) headers['x-amz-security-token'] = sessionToken.toString('latin1');

  const request: aws4.Request = {
    method: req.method,
    host: req.url.hostname,
    path: req.url.pathname + req.url.search,
    headers,
    service,
    region,
    ...(req.body ? { body: req.body } : {}),
  };
  const key = signingKey(ctx.cache, accessKeyId, secretAccessKey, datetime.slice(0, 8), region, service);
  // The secretAccessKey is never given to aws4: only the key id, which goes on the wire anyway.
  const signer = new ActorKeySigner(request, { accessKeyId: accessKeyId.toString('latin1') }, key);
  const signed = signer.sign();

  // aws4 may add Content-Type/Content-Length (and X-Amz-Content-Sha256 for s3); keep our lower-case form.
  // Mutated in place: the broker may hold a reference to req.headers.
  for (const name of Object.keys(req.headers)) delete req.headers[name];
  for (const [name, value] of Object.entries(signed.headers ?? {})) {
    if (value === undefined) continue;
    req.headers[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  // aws4 canonicalises the query (RFC 3986, '+' read as space); send the query it signed.
  const signedPath = signed.path ?? '/';
  const q = signedPath.indexOf('?');
  req.url.search = q >= 0 ? signedPath.slice(q) : '';

  // For the broker's scrubbing: what went on the wire (key id, session token) and, as defence in
  // depth, the secret key itself. Copies: the actor zeroes the inputs when we return.
  const scrub = [Buffer.from(accessKeyId), Buffer.from(secretAccessKey)];
  if (sessionToken) scrub.push(Buffer.from(sessionToken));
  return scrub;
}
