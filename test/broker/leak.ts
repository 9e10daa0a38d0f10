/**
 * Independent leak detector for tests: looks for any 8-byte window of a secret in the output, raw or
 * after decoding every base64/base64url/hex/percent/JSON-looking run at every alignment. It does not
 * reuse the scrubber's needle list, so a gap there shows up here.
 */
const WINDOW = 8;

function windows(secret: Buffer): string[] {
  const s = secret.toString('latin1');
  const out: string[] = [];
  for (let i = 0; i + WINDOW <= s.length; i++) out.push(s.slice(i, i + WINDOW));
  return out;
}

function decodings(text: string): string[] {
  const out = [text];
  try {
    out.push(decodeURIComponent(text.replace(/\+/g, ' ')));
  } catch {
    /* not percent-encoded */
  }
  try {
    out.push(JSON.parse(`"${text.replace(/"/g, '\\"')}"`) as string);
  } catch {
    /* not a JSON string body */
  }
  for (const run of text.match(/[A-Za-z0-9+/_-]{8,}/g) ?? []) {
    for (let shift = 0; shift < 4; shift++) {
      const part = run.slice(shift);
      out.push(Buffer.from(part.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('latin1'));
    }
  }
  for (const run of text.match(/[0-9a-fA-F]{16,}/g) ?? []) {
    out.push(Buffer.from(run, 'hex').toString('latin1'), Buffer.from(run.slice(1), 'hex').toString('latin1'));
  }
  return out;
}

/** Returns a description of the first leak of `secret` found in `output`, or undefined. */
export function findLeak(output: string, secret: Buffer): string | undefined {
  const ws = windows(secret);
  for (const decoded of decodings(output)) {
    for (const w of ws) if (decoded.includes(w)) return `window ${JSON.stringify(w)} found`;
  }
  return undefined;
}
