/**
 * Masks secret values in a byte stream (a child's stdout or stderr), the way CI systems mask
 * registered secrets: every occurrence of a secret, or of its base64 / base64url / URL-encoded form,
 * becomes `***`. Overlapping or touching occurrences are merged into one `***`, so two overlapping
 * secrets never leave a fragment of either visible.
 *
 * Correct across chunk boundaries: a child that writes a secret one byte at a time is still masked.
 * The invariant: after each chunk, every byte before `boundary` has been seen with enough look-ahead
 * to know whether a secret starts there, so it can be written. `boundary` is the start of the
 * longest suffix that is a proper prefix of some pattern (at most the longest secret's length - 1):
 * only bytes that may still become a secret are held back, until more data or the end of the
 * stream; everything else is written at once, so prompts and "ready" lines are not delayed.
 * Bytes between `boundary` and `emitted` were written as part of a `***`; an occurrence that starts
 * there and completes later just extends that mask (nothing printed twice, nothing leaked).
 *
 * Byte-oriented (Buffer.indexOf), so binary output passes through untouched except for masked runs.
 */
import { Transform, type TransformCallback } from 'node:stream';

/** Values shorter than this are not masked: masking "abc" everywhere would shred the log. */
export const MIN_MASK_LENGTH = 4;
export const MASK = Buffer.from('***');

/**
 * The byte patterns to mask for `values`: each value, its standard base64 (padded and unpadded),
 * base64url and encodeURIComponent forms, and each line of a multi-line value (so a PEM key printed
 * line by line is masked, as GitHub Actions does). Forms shorter than MIN_MASK_LENGTH are dropped.
 * The returned Buffers hold secrets: the MaskStream that receives them zeroes them when it ends.
 */
export function maskPatterns(values: Iterable<string>): Buffer[] {
  const forms = new Set<string>();
  const add = (s: string): void => {
    if (s.length >= MIN_MASK_LENGTH) forms.add(s);
  };
  for (const v of values) {
    if (Buffer.byteLength(v) < MIN_MASK_LENGTH) continue;
    add(v);
    const bytes = Buffer.from(v, 'utf8');
    const b64 = bytes.toString('base64');
    add(b64);
    add(b64.replace(/=+$/, ''));
    add(bytes.toString('base64url'));
    bytes.fill(0);
    add(encodeURIComponent(v));
    if (/[\r\n]/.test(v)) for (const line of v.split(/\r?\n|\r/)) add(line.trim());
  }
  return [...forms].map((s) => Buffer.from(s, 'utf8'));
}

export class MaskStream extends Transform {
  readonly #patterns: Buffer[];
  /** Retained raw bytes (the held-back tail), starting at stream offset #rawStart. */
  #raw: Buffer = Buffer.alloc(0);
  #rawStart = 0;
  /** Stream offset up to which output has been produced. */
  #emitted = 0;
  /** Stream offset where the last `***` ended (to merge a mask that continues in the next chunk). */
  #lastMaskEnd = -1;

  /** Takes ownership of `patterns` (zeroed when the stream ends or is destroyed). */
  constructor(patterns: Buffer[]) {
    super();
    this.#patterns = patterns.filter((p) => p.length > 0);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#process(chunk, false);
    cb();
  }

  override _flush(cb: TransformCallback): void {
    this.#process(undefined, true);
    this.#wipe();
    cb();
  }

  override _destroy(err: Error | null, cb: (error?: Error | null) => void): void {
    this.#wipe();
    cb(err);
  }

  #wipe(): void {
    for (const p of this.#patterns) p.fill(0);
    this.#raw.fill(0);
    this.#raw = Buffer.alloc(0);
  }

  /**
   * Length of the longest suffix of `raw` that is a proper prefix of some pattern: only those bytes
   * can still turn into a secret, so only they are held back. Output that cannot start a secret
   * ("ready\n", a prompt) goes out at once instead of waiting for the next write.
   */
  #heldTail(raw: Buffer): number {
    let best = 0;
    for (const p of this.#patterns) {
      const maxK = Math.min(p.length - 1, raw.length);
      if (maxK <= best) continue;
      // Candidates start where p's first byte occurs; the earliest match is the longest for p.
      for (let i = raw.indexOf(p[0]!, raw.length - maxK); i !== -1 && raw.length - i > best; i = raw.indexOf(p[0]!, i + 1)) {
        if (raw.compare(p, 0, raw.length - i, i, raw.length) === 0) {
          best = raw.length - i;
          break;
        }
      }
    }
    return best;
  }

  #process(chunk: Buffer | undefined, final: boolean): void {
    if (this.#patterns.length === 0) {
      if (chunk && chunk.length) this.push(chunk);
      return;
    }
    const owned = chunk !== undefined && this.#raw.length > 0; // we allocate the concat: zero it after
    const raw = chunk === undefined ? this.#raw : owned ? Buffer.concat([this.#raw, chunk]) : chunk;
    const rawStart = this.#rawStart;
    const end = rawStart + raw.length;
    const boundary = final ? end : end - this.#heldTail(raw);
    const limit = Math.max(boundary, this.#emitted) - rawStart; // local index

    // Every complete occurrence of every pattern in what we hold (overlaps included).
    const occ: Array<[number, number]> = [];
    for (const p of this.#patterns) {
      for (let i = raw.indexOf(p); i !== -1; i = raw.indexOf(p, i + 1)) occ.push([i, i + p.length]);
    }
    occ.sort((x, y) => x[0] - y[0] || y[1] - x[1]);
    // Union of overlapping/touching occurrences. One starting at or after `limit` that does not
    // touch the current union waits for the next chunk: a longer secret may start there too.
    const intervals: Array<[number, number]> = [];
    for (const [a, b] of occ) {
      const last = intervals[intervals.length - 1];
      if (last && a <= last[1]) {
        if (b > last[1]) last[1] = b;
        continue;
      }
      if (a >= limit) break;
      intervals.push([a, b]);
    }

    const out: Buffer[] = [];
    let cursor = this.#emitted - rawStart;
    for (const [a, b] of intervals) {
      if (b <= cursor) continue; // already inside a printed mask
      if (a < cursor || (a === cursor && rawStart + cursor === this.#lastMaskEnd)) {
        cursor = b; // continues the `***` already printed
      } else {
        if (a > cursor) out.push(raw.subarray(cursor, a));
        out.push(MASK);
        cursor = b;
      }
      this.#lastMaskEnd = rawStart + cursor;
    }
    const safe = boundary - rawStart;
    if (safe > cursor) {
      out.push(raw.subarray(cursor, safe));
      cursor = safe;
    }
    this.#emitted = rawStart + cursor;
    // Push a slice of the caller's chunk as is; anything cut from a buffer we zero below is copied.
    const mustCopy = owned || chunk === undefined;
    if (out.length === 1 && !mustCopy && out[0] !== MASK) this.push(out[0]);
    else if (out.length > 0) this.push(Buffer.concat(out));

    const previous = this.#raw;
    this.#raw = final ? Buffer.alloc(0) : Buffer.from(raw.subarray(safe));
    this.#rawStart = boundary;
    previous.fill(0);
    if (owned) raw.fill(0);
  }
}
