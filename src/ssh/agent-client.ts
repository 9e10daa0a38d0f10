/**
 * A minimal ssh-agent protocol *client*: lists identities and asks for signatures over a Unix
 * socket. Used by the tests (to talk to OpenSSH's own agent and to ours byte-for-byte) and the
 * benchmark; Custos itself never needs it at run time.
 */
import { connect, type Socket } from 'node:net';
import { FrameDecoder, MSG, frame } from './agent-protocol.ts';
import type { Identity } from './signer-client.ts';

function u32(n: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(n >>> 0, 0);
  return b;
}
function str(b: Buffer | string): Buffer {
  const body = typeof b === 'string' ? Buffer.from(b) : b;
  return Buffer.concat([u32(body.length), body]);
}

export class AgentClient {
  private readonly decoder = new FrameDecoder(16 * 1024 * 1024);
  private readonly waiting: Array<{ resolve: (b: Buffer) => void; reject: (e: Error) => void }> = [];
  private closedError: Error | undefined;

  private constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      for (const f of this.decoder.push(chunk).frames) this.waiting.shift()?.resolve(f);
    });
    const fail = (e: Error): void => {
      this.closedError = e;
      for (const w of this.waiting.splice(0)) w.reject(e);
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new Error('agent connection closed')));
  }

  static connect(path: string): Promise<AgentClient> {
    return new Promise((resolve, reject) => {
      const s = connect(path, () => {
        s.off('error', reject);
        resolve(new AgentClient(s));
      });
      s.once('error', reject);
    });
  }

  /** Sends one payload (type byte + body) and resolves with the answer's payload. */
  request(payload: Buffer): Promise<Buffer> {
    return this.requestRaw(frame(payload));
  }

  /** Sends raw bytes (possibly not a well-formed frame) and waits for the next answer. */
  requestRaw(bytes: Buffer): Promise<Buffer> {
    if (this.closedError) return Promise.reject(this.closedError);
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.socket.write(bytes);
    });
  }

  async listIdentities(): Promise<Identity[]> {
    const a = await this.request(Buffer.from([MSG.REQUEST_IDENTITIES]));
    if (a[0] !== MSG.IDENTITIES_ANSWER) throw new Error(`agent answered type ${a[0]}`);
    let pos = 1;
    const n = a.readUInt32BE(pos);
    pos += 4;
    const ids: Identity[] = [];
    for (let i = 0; i < n; i++) {
      const bl = a.readUInt32BE(pos);
      const keyBlob = a.subarray(pos + 4, pos + 4 + bl);
      pos += 4 + bl;
      const cl = a.readUInt32BE(pos);
      const comment = a.subarray(pos + 4, pos + 4 + cl).toString('utf8');
      pos += 4 + cl;
      ids.push({ keyBlob: Buffer.from(keyBlob), comment });
    }
    return ids;
  }

  /** Returns the signature blob, or throws when the agent answers FAILURE. */
  async sign(keyBlob: Buffer, data: Buffer, flags = 0): Promise<Buffer> {
    const a = await this.request(Buffer.concat([Buffer.from([MSG.SIGN_REQUEST]), str(keyBlob), str(data), u32(flags)]));
    if (a[0] !== MSG.SIGN_RESPONSE) throw new Error(`agent answered type ${a[0]}`);
    const len = a.readUInt32BE(1);
    return Buffer.from(a.subarray(5, 5 + len));
  }

  close(): void {
    this.socket.destroy();
  }
}
