/**
 * Our own framing and dispatch of the ssh-agent protocol (draft-miller-ssh-agent), agent side.
 *
 * Why not ssh2's AgentProtocol: on a message it does not know (OpenSSH 8.9+ sends
 * SSH_AGENTC_EXTENSION "session-bind@openssh.com" before every login) it answers FAILURE without
 * consuming the payload, so the rest of the stream is misread and `ssh` logins fail. Here every
 * frame is cut by its 4-byte length prefix first, so an unknown, refused or malformed message can
 * only ever cost its own frame.
 *
 * Invariants (each pinned by a test):
 *  - a frame longer than MAX_FRAME_BYTES is answered with FAILURE and the connection is closed,
 *    without buffering its body (so a hostile length cannot make us allocate);
 *  - requests on one connection are answered strictly in order, one answer per request;
 *  - nothing a peer sends can throw out of this module: malformed payloads get FAILURE.
 *  - only identities and signatures are served: add/remove/lock/smartcard requests are refused, so
 *    no key ever crosses this socket in either direction.
 */
import type { Duplex } from 'node:stream';
import type { Identity, SignerClient } from './signer-client.ts';

export const MSG = {
  FAILURE: 5,
  SUCCESS: 6,
  REQUEST_IDENTITIES: 11,
  IDENTITIES_ANSWER: 12,
  SIGN_REQUEST: 13,
  SIGN_RESPONSE: 14,
  ADD_IDENTITY: 17,
  REMOVE_IDENTITY: 18,
  REMOVE_ALL_IDENTITIES: 19,
  ADD_SMARTCARD_KEY: 20,
  REMOVE_SMARTCARD_KEY: 21,
  LOCK: 22,
  UNLOCK: 23,
  ADD_ID_CONSTRAINED: 25,
  ADD_SMARTCARD_KEY_CONSTRAINED: 26,
  EXTENSION: 27,
  EXTENSION_FAILURE: 28,
} as const;

/** Largest frame we accept (OpenSSH's own agent uses 256 KiB too). */
export const MAX_FRAME_BYTES = 256 * 1024;

/** Key-management requests this agent refuses by design: the keys live in the service. */
const REFUSED: Record<number, string> = {
  [MSG.ADD_IDENTITY]: 'add identity',
  [MSG.ADD_ID_CONSTRAINED]: 'add identity',
  [MSG.REMOVE_IDENTITY]: 'remove identity',
  [MSG.REMOVE_ALL_IDENTITIES]: 'remove all identities',
  [MSG.ADD_SMARTCARD_KEY]: 'add smartcard key',
  [MSG.ADD_SMARTCARD_KEY_CONSTRAINED]: 'add smartcard key',
  [MSG.REMOVE_SMARTCARD_KEY]: 'remove smartcard key',
  [MSG.LOCK]: 'lock',
  [MSG.UNLOCK]: 'unlock',
};

export type AgentRequest =
  | { type: 'identities' }
  | { type: 'sign'; keyBlob: Buffer; data: Buffer; flags: number }
  | { type: 'extension'; name: string }
  | { type: 'refused'; msgType: number; what: string }
  | { type: 'unknown'; msgType: number }
  | { type: 'malformed'; msgType: number; reason: string };

class Truncated extends Error {}

class Reader {
  private pos = 0;
  constructor(private readonly buf: Buffer) {}
  get done(): boolean {
    return this.pos === this.buf.length;
  }
  uint32(): number {
    if (this.buf.length - this.pos < 4) throw new Truncated();
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }
  string(): Buffer {
    const len = this.uint32();
    if (len > this.buf.length - this.pos) throw new Truncated();
    const v = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return v;
  }
}

/** Parses one message payload (type byte + body). Never throws. */
export function parseRequest(payload: Buffer): AgentRequest {
  if (payload.length === 0) return { type: 'malformed', msgType: -1, reason: 'empty message' };
  const msgType = payload[0]!;
  const r = new Reader(payload.subarray(1));
  try {
    switch (msgType) {
      case MSG.REQUEST_IDENTITIES:
        return { type: 'identities' };
      case MSG.SIGN_REQUEST: {
        const keyBlob = r.string();
        const data = r.string();
        const flags = r.uint32();
        if (!r.done) return { type: 'malformed', msgType, reason: 'trailing bytes in sign request' };
        return { type: 'sign', keyBlob, data, flags };
      }
      case MSG.EXTENSION: {
        // string extension-name, then extension-specific contents (the rest of the frame, which
        // framing has already consumed whatever it holds).
        const name = r.string().toString('latin1');
        return { type: 'extension', name: name.replace(/[^\x20-\x7e]/g, '?').slice(0, 64) };
      }
      default: {
        const what = REFUSED[msgType];
        if (what) return { type: 'refused', msgType, what };
        return { type: 'unknown', msgType };
      }
    }
  } catch {
    return { type: 'malformed', msgType, reason: 'truncated field' };
  }
}

function u32(n: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(n >>> 0, 0);
  return b;
}

function str(b: Buffer): Buffer {
  return Buffer.concat([u32(b.length), b]);
}

/** Wraps a payload (type byte + body) in its length prefix. */
export function frame(payload: Buffer): Buffer {
  return Buffer.concat([u32(payload.length), payload]);
}

export const FAILURE_FRAME: Buffer = frame(Buffer.from([MSG.FAILURE]));

export function encodeIdentitiesAnswer(ids: readonly Identity[]): Buffer {
  const parts: Buffer[] = [Buffer.from([MSG.IDENTITIES_ANSWER]), u32(ids.length)];
  for (const id of ids) parts.push(str(id.keyBlob), str(Buffer.from(id.comment, 'utf8')));
  return frame(Buffer.concat(parts));
}

export function encodeSignResponse(signatureBlob: Buffer): Buffer {
  return frame(Buffer.concat([Buffer.from([MSG.SIGN_RESPONSE]), str(signatureBlob)]));
}

/** True when `blob` is `string algorithm ‖ string signature` and nothing else. */
export function isSignatureBlob(blob: Buffer): boolean {
  try {
    const r = new Reader(blob);
    const alg = r.string();
    const sig = r.string();
    return alg.length > 0 && sig.length > 0 && r.done;
  } catch {
    return false;
  }
}

/**
 * Incremental framer. `push` returns complete payloads; once a length prefix exceeds the cap it
 * reports `oversized` and swallows everything after (the connection is about to be closed).
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private poisoned = false;

  constructor(private readonly maxFrame = MAX_FRAME_BYTES) {}

  push(chunk: Buffer): { frames: Buffer[]; oversized: boolean } {
    const frames: Buffer[] = [];
    if (this.poisoned) return { frames, oversized: true };
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    while (this.buffered >= 4) {
      let head = this.chunks[0]!;
      if (head.length < 4) {
        head = Buffer.concat(this.chunks);
        this.chunks = [head];
      }
      const len = head.readUInt32BE(0);
      if (len > this.maxFrame) {
        this.poisoned = true;
        this.chunks = [];
        this.buffered = 0;
        return { frames, oversized: true };
      }
      if (this.buffered < 4 + len) break;
      const all = this.chunks.length === 1 ? head : Buffer.concat(this.chunks);
      frames.push(Buffer.from(all.subarray(4, 4 + len)));
      const rest = all.subarray(4 + len);
      this.chunks = rest.length > 0 ? [rest] : [];
      this.buffered = rest.length;
    }
    return { frames, oversized: false };
  }
}

/** What happened on a request, for the agent's log. Never carries data to be signed or keys. */
export type AgentEvent =
  | { kind: 'served'; request: 'identities' | 'sign' }
  | { kind: 'refused'; what: string }
  | { kind: 'unsupported'; what: string }
  | { kind: 'malformed'; reason: string }
  | { kind: 'oversized' }
  | { kind: 'service-error'; request: 'identities' | 'sign'; error: unknown }
  | { kind: 'bad-service-answer'; request: 'sign' };

export interface ConnectionOptions {
  client: SignerClient;
  onEvent?: (event: AgentEvent) => void;
  maxFrame?: number;
}

/** Answers one parsed request. Never rejects: service errors become FAILURE plus an event. */
export async function answerRequest(
  req: AgentRequest, client: SignerClient, onEvent: (e: AgentEvent) => void,
): Promise<Buffer> {
  switch (req.type) {
    case 'identities':
      try {
        const ids = await client.listIdentities();
        onEvent({ kind: 'served', request: 'identities' });
        return encodeIdentitiesAnswer(ids);
      } catch (error) {
        onEvent({ kind: 'service-error', request: 'identities', error });
        return FAILURE_FRAME;
      }
    case 'sign':
      try {
        const sig = await client.sign(req.keyBlob, req.data, req.flags);
        if (!isSignatureBlob(sig)) {
          onEvent({ kind: 'bad-service-answer', request: 'sign' });
          return FAILURE_FRAME;
        }
        onEvent({ kind: 'served', request: 'sign' });
        return encodeSignResponse(sig);
      } catch (error) {
        onEvent({ kind: 'service-error', request: 'sign', error });
        return FAILURE_FRAME;
      }
    case 'extension':
      // The draft: an agent that does not support an extension MUST reply SSH_AGENT_FAILURE
      // (EXTENSION_FAILURE is for a supported extension that failed). OpenSSH's ssh treats a
      // failed session-bind@openssh.com as "agent does not support it" and carries on.
      onEvent({ kind: 'unsupported', what: `extension ${req.name}` });
      return FAILURE_FRAME;
    case 'refused':
      onEvent({ kind: 'refused', what: req.what });
      return FAILURE_FRAME;
    case 'unknown':
      onEvent({ kind: 'unsupported', what: `message type ${req.msgType}` });
      return FAILURE_FRAME;
    case 'malformed':
      onEvent({ kind: 'malformed', reason: req.reason });
      return FAILURE_FRAME;
  }
}

/** How many parsed-but-unanswered requests one connection may queue before we stop reading. */
const HIGH_WATER = 32;
const LOW_WATER = 8;

/**
 * Serves the protocol on one connected stream (a Unix socket in production, any Duplex in tests).
 * Frames are answered strictly in order; reading pauses while too many are pending.
 */
export function serveConnection(stream: Duplex, options: ConnectionOptions): void {
  const onEvent = options.onEvent ?? (() => {});
  const decoder = new FrameDecoder(options.maxFrame ?? MAX_FRAME_BYTES);
  const queue: Array<Buffer | 'oversized'> = [];
  let running = false;
  let closed = false;
  let stopReading = false;
  let ended = false;

  const maybeFinish = (): void => {
    if (ended && !running && queue.length === 0 && !stream.destroyed) stream.end();
  };

  const write = (buf: Buffer): void => {
    if (!closed && !stream.destroyed && stream.writable) stream.write(buf);
  };

  const pump = async (): Promise<void> => {
    if (running) return;
    running = true;
    try {
      while (queue.length > 0 && !closed) {
        const item = queue.shift()!;
        if (item === 'oversized') {
          onEvent({ kind: 'oversized' });
          write(FAILURE_FRAME);
          stream.end();
          closed = true;
          queue.length = 0;
          break;
        }
        let reply: Buffer;
        try {
          reply = await answerRequest(parseRequest(item), options.client, onEvent);
        } catch {
          reply = FAILURE_FRAME; // defensive: answerRequest does not reject
        }
        write(reply);
        if (!stopReading && stream.isPaused() && queue.length < LOW_WATER) stream.resume();
      }
    } finally {
      running = false;
      maybeFinish();
    }
  };

  stream.on('data', (chunk: Buffer) => {
    if (stopReading) return;
    const { frames, oversized } = decoder.push(chunk);
    queue.push(...frames);
    if (oversized) {
      stopReading = true;
      queue.push('oversized');
      stream.pause();
    } else if (queue.length >= HIGH_WATER) {
      stream.pause();
    }
    void pump();
  });
  stream.on('error', () => {
    closed = true; // e.g. EPIPE/ECONNRESET when the client hangs up mid-answer
  });
  stream.on('close', () => {
    closed = true;
    queue.length = 0;
  });
  stream.on('end', () => {
    // The client half-closed: finish the answers already queued, then close our side.
    ended = true;
    maybeFinish();
  });
}
