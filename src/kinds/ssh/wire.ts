/**
 * The SSH wire encoding (RFC 4251 §5) for the ssh kind: uint32 and length-prefixed strings. Every
 * read is bounds-checked and throws a plain `WireError` (never quoting the bytes) so a truncated or
 * hostile key file can only ever produce "malformed", not a crash or a read past the buffer.
 */

export class WireError extends Error {
  constructor(what: string) {
    super(`malformed SSH data: ${what}`);
    this.name = 'WireError';
  }
}

export class WireReader {
  private pos = 0;
  constructor(private readonly buf: Buffer) {}

  get remaining(): number {
    return this.buf.length - this.pos;
  }

  uint32(): number {
    if (this.remaining < 4) throw new WireError('truncated uint32');
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  /** A string field as a view into the buffer (no copy: zeroing the parent zeroes it too). */
  string(): Buffer {
    const len = this.uint32();
    if (len > this.remaining) throw new WireError('truncated string');
    const v = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return v;
  }

  bytes(len: number): Buffer {
    if (len > this.remaining) throw new WireError('truncated field');
    const v = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return v;
  }

  rest(): Buffer {
    const v = this.buf.subarray(this.pos);
    this.pos = this.buf.length;
    return v;
  }
}

export function sshString(value: Buffer | string): Buffer {
  const body = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  const out = Buffer.allocUnsafe(4 + body.length);
  out.writeUInt32BE(body.length, 0);
  body.copy(out, 4);
  return out;
}

export function sshUint32(value: number): Buffer {
  const out = Buffer.allocUnsafe(4);
  out.writeUInt32BE(value >>> 0, 0);
  return out;
}
