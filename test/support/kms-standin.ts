/**
 * A small AWS KMS stand-in on 127.0.0.1 speaking the real wire protocol (JSON 1.1,
 * `x-amz-target: TrentService.<Op>`, base64 blobs), so the aws-kms backend is tested through the
 * real @aws-sdk/client-kms. It does real AES-256-GCM inside with the EncryptionContext as
 * associated data, so a wrong context fails exactly like KMS (InvalidCiphertextException). It
 * verifies nothing about SigV4. Key material lives in the object, not the listener: stop() then
 * start() comes back on the same port with the same keys (to prove the backend recovers).
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface KmsStandInRequest {
  target: string;
  keyId: string | undefined;
  encryptionContext: Record<string, string> | undefined;
}

export interface KmsStandIn {
  readonly endpoint: string;
  readonly port: number;
  /** The first configured key id. */
  readonly keyId: string;
  /** Requests seen (operation, key id, context: never plaintext). */
  readonly requests: KmsStandInRequest[];
  /** Answer every request with this HTTP status (5xx: KMSInternalException) until set to null. */
  failWith(status: number | null): void;
  start(): Promise<void>;
  stop(): Promise<void>;
}

const MAGIC = Buffer.from('CSKM');

export async function startKmsStandIn(options: { keyIds?: string[]; port?: number } = {}): Promise<KmsStandIn> {
  const keyIds = options.keyIds ?? ['alias/custos-test'];
  const keys = new Map<string, Buffer>(keyIds.map((id) => [id, randomBytes(32)]));
  const requests: KmsStandInRequest[] = [];
  const sockets = new Set<Socket>();
  let failStatus: number | null = null;
  let port = options.port ?? 0;
  let server: Server | null = null;

  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const target = String(req.headers['x-amz-target'] ?? '');
      const send = (status: number, body: unknown): void => {
        const text = JSON.stringify(body);
        res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      };
      const fail = (type: string, message: string, status = 400): void => send(status, { __type: type, message });
      let input: Record<string, unknown>;
      try {
        input = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
      } catch {
        fail('SerializationException', 'bad JSON');
        return;
      }
      const keyId = typeof input.KeyId === 'string' ? input.KeyId : undefined;
      const ctx = (input.EncryptionContext ?? undefined) as Record<string, string> | undefined;
      requests.push({ target, keyId, encryptionContext: ctx ? { ...ctx } : undefined });
      if (failStatus !== null) {
        fail(failStatus >= 500 ? 'KMSInternalException' : 'ThrottlingException', 'stand-in failure', failStatus);
        return;
      }
      const op = target.replace(/^TrentService\./, '');
      if (op === 'Encrypt' || op === 'GenerateDataKey') {
        const key = keyId === undefined ? undefined : keys.get(keyId);
        if (!key || keyId === undefined) {
          fail('NotFoundException', 'key not found');
          return;
        }
        let plain: Buffer;
        if (op === 'Encrypt') {
          if (typeof input.Plaintext !== 'string') {
            fail('ValidationException', 'Plaintext required');
            return;
          }
          plain = Buffer.from(input.Plaintext, 'base64');
        } else {
          const n = input.KeySpec === 'AES_128' ? 16 : typeof input.NumberOfBytes === 'number' ? input.NumberOfBytes : 32;
          plain = randomBytes(n);
        }
        const blob = seal(key, keyId, plain, ctx);
        const out: Record<string, unknown> = { CiphertextBlob: blob.toString('base64'), KeyId: keyId, EncryptionAlgorithm: 'SYMMETRIC_DEFAULT' };
        if (op === 'GenerateDataKey') out.Plaintext = plain.toString('base64');
        plain.fill(0);
        send(200, out);
        return;
      }
      if (op === 'Decrypt') {
        if (typeof input.CiphertextBlob !== 'string') {
          fail('ValidationException', 'CiphertextBlob required');
          return;
        }
        const parsed = parse(Buffer.from(input.CiphertextBlob, 'base64'));
        const key = parsed ? keys.get(parsed.keyId) : undefined;
        if (!parsed || !key) {
          fail('InvalidCiphertextException', 'invalid ciphertext');
          return;
        }
        if (keyId !== undefined && keyId !== parsed.keyId) {
          fail('IncorrectKeyException', 'the ciphertext was made under another key');
          return;
        }
        try {
          const decipher = createDecipheriv('aes-256-gcm', key, parsed.iv, { authTagLength: 16 });
          decipher.setAAD(aadFor(parsed.keyId, ctx));
          decipher.setAuthTag(parsed.tag);
          const plain = Buffer.concat([decipher.update(parsed.body), decipher.final()]);
          send(200, { KeyId: parsed.keyId, Plaintext: plain.toString('base64'), EncryptionAlgorithm: 'SYMMETRIC_DEFAULT' });
          plain.fill(0);
        } catch {
          fail('InvalidCiphertextException', 'invalid ciphertext');
        }
        return;
      }
      fail('UnknownOperationException', `unknown operation ${op}`);
    });
  };

  const standIn: KmsStandIn = {
    get endpoint() {
      return `http://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    keyId: keyIds[0]!,
    requests,
    failWith(status) {
      failStatus = status;
    },
    async start() {
      if (server) return;
      const s = createServer(handler);
      s.on('connection', (socket) => {
        sockets.add(socket);
        socket.on('close', () => sockets.delete(socket));
      });
      await new Promise<void>((resolve, reject) => {
        s.once('error', reject);
        s.listen(port, '127.0.0.1', () => resolve());
      });
      port = (s.address() as AddressInfo).port;
      server = s;
    },
    async stop() {
      const s = server;
      if (!s) return;
      server = null;
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    },
  };
  await standIn.start();
  return standIn;
}

function aadFor(keyId: string, ctx: Record<string, string> | undefined): Buffer {
  const entries = Object.entries(ctx ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Buffer.from(JSON.stringify([keyId, entries]), 'utf8');
}

function seal(key: Buffer, keyId: string, plain: Buffer, ctx: Record<string, string> | undefined): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: 16 });
  cipher.setAAD(aadFor(keyId, ctx));
  const body = Buffer.concat([cipher.update(plain), cipher.final()]);
  const id = Buffer.from(keyId, 'utf8');
  return Buffer.concat([MAGIC, Buffer.from([id.length]), id, iv, body, cipher.getAuthTag()]);
}

function parse(blob: Buffer): { keyId: string; iv: Buffer; body: Buffer; tag: Buffer } | null {
  if (blob.length < MAGIC.length + 1 || !blob.subarray(0, MAGIC.length).equals(MAGIC)) return null;
  const idLen = blob[MAGIC.length]!;
  const idEnd = MAGIC.length + 1 + idLen;
  if (blob.length < idEnd + 12 + 16) return null;
  return {
    keyId: blob.subarray(MAGIC.length + 1, idEnd).toString('utf8'),
    iv: blob.subarray(idEnd, idEnd + 12),
    body: blob.subarray(idEnd + 12, blob.length - 16),
    tag: blob.subarray(blob.length - 16),
  };
}
