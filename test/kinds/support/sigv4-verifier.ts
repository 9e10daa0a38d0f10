/**
 * An independent SigV4 verifier for the upstream side of tests: @smithy/signature-v4 (the AWS SDK's
 * own signer) recomputes the signature from the request as the server received it, with the
 * secret key the test planted, and compares it with the Authorization header. It shares no code
 * with aws4 or our key derivation.
 */
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import type { RecordedRequest } from '../../../src/kinds/conformance.ts';

/** smithy wants a Checksum constructor; this adapts node:crypto (sha256, or HMAC-sha256 when keyed). */
class NodeSha256 {
  readonly #secret: Buffer | string | undefined;
  #hash: Hash | Hmac;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.#secret =
      secret === undefined || typeof secret === 'string' ? secret
      : ArrayBuffer.isView(secret) ? Buffer.from(secret.buffer, secret.byteOffset, secret.byteLength)
      : Buffer.from(secret);
    this.#hash = this.#fresh();
  }
  #fresh(): Hash | Hmac {
    return this.#secret === undefined ? createHash('sha256') : createHmac('sha256', this.#secret);
  }
  update(data: Uint8Array | string): void {
    this.#hash.update(data);
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.#hash.digest());
  }
  reset(): void {
    this.#hash = this.#fresh();
  }
}

export interface VerifyInput {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  region: string;
  service: string;
}

export interface VerifyResult {
  ok: boolean;
  reason: string;
}

const AUTH = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$/;

export async function verifySigv4(recorded: RecordedRequest, expected: VerifyInput): Promise<VerifyResult> {
  const auth = recorded.headers.authorization;
  const m = typeof auth === 'string' ? AUTH.exec(auth) : null;
  if (!m) return { ok: false, reason: 'no SigV4 Authorization header' };
  const [, keyId, , region, service, signedHeaders] = m;
  if (keyId !== expected.accessKeyId) return { ok: false, reason: 'access key id differs' };
  if (region !== expected.region || service !== expected.service) return { ok: false, reason: 'scope differs' };
  const amzDate = recorded.headers['x-amz-date'];
  if (typeof amzDate !== 'string' || !/^\d{8}T\d{6}Z$/.test(amzDate)) return { ok: false, reason: 'no x-amz-date' };
  const signingDate = new Date(`${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`);

  // Only the headers the client says it signed, as received.
  const headers: Record<string, string> = {};
  for (const name of signedHeaders!.split(';')) {
    const value = recorded.headers[name];
    if (value === undefined) return { ok: false, reason: `signed header ${name} missing` };
    headers[name] = Array.isArray(value) ? value.join(',') : value;
  }
  // Path exactly as received; query decoded the way a server framework would.
  const q = recorded.url.indexOf('?');
  const path = q >= 0 ? recorded.url.slice(0, q) : recorded.url;
  const query: Record<string, string | string[]> = {};
  for (const [k, v] of new URLSearchParams(q >= 0 ? recorded.url.slice(q + 1) : '')) {
    const prev = query[k];
    query[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  const host = String(recorded.headers.host);
  const signer = new SignatureV4({
    credentials: { accessKeyId: expected.accessKeyId, secretAccessKey: expected.secretAccessKey, ...(expected.sessionToken ? { sessionToken: expected.sessionToken } : {}) },
    region: expected.region,
    service: expected.service,
    sha256: NodeSha256,
    uriEscapePath: expected.service !== 's3',
    applyChecksum: false,
  });
  const signed = await signer.sign(
    {
      method: recorded.method,
      protocol: 'http:',
      hostname: host.split(':')[0]!,
      path,
      query,
      headers,
      body: recorded.body,
    },
    { signingDate },
  );
  const recomputed = signed.headers.authorization;
  return recomputed === auth ? { ok: true, reason: 'signature matches' } : { ok: false, reason: `signature differs: ${recomputed} vs ${auth}` };
}
