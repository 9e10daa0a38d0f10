import test from 'ava';
import { randomBytes } from 'node:crypto';
import { MaskStream, maskPatterns, MIN_MASK_LENGTH } from '../../src/ci/mask-stream.ts';

/** Feeds `chunks` through a fresh MaskStream for `secrets` and returns everything it output. */
async function mask(secrets: string[], chunks: Buffer[]): Promise<Buffer> {
  const stream = new MaskStream(maskPatterns(secrets));
  const out: Buffer[] = [];
  stream.on('data', (c: Buffer) => out.push(Buffer.from(c)));
  const done = new Promise<void>((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('error', reject);
  });
  for (const c of chunks) stream.write(c);
  stream.end();
  await done;
  return Buffer.concat(out);
}

const maskStr = async (secrets: string[], ...chunks: string[]): Promise<string> =>
  (await mask(secrets, chunks.map((c) => Buffer.from(c)))).toString('utf8');

/** Reference result: the whole input in one piece, occurrences (overlaps merged) replaced by ***. */
function reference(secrets: string[], input: string): string {
  const marks = new Array<boolean>(input.length).fill(false);
  for (const s of secrets) {
    for (let i = input.indexOf(s); i !== -1; i = input.indexOf(s, i + 1)) for (let k = i; k < i + s.length; k++) marks[k] = true;
  }
  let out = '';
  for (let i = 0; i < input.length; i++) {
    if (!marks[i]) out += input[i];
    else if (i === 0 || !marks[i - 1]) out += '***';
  }
  return out;
}

test('every occurrence of a secret is replaced by ***', async (t) => {
  t.is(await maskStr(['hunter22'], 'pw=hunter22; again hunter22\n'), 'pw=***; again ***\n');
});

test('a secret split across two chunks is masked at every split offset', async (t) => {
  const secret = 'sk_live_0123456789abcdef';
  const text = `before ${secret} after`;
  for (let cut = 0; cut <= text.length; cut++) {
    t.is(await maskStr([secret], text.slice(0, cut), text.slice(cut)), 'before *** after', `cut at ${cut}`);
  }
});

test('a secret split across three chunks is masked at every pair of offsets', async (t) => {
  const secret = 'abcdefgh';
  const text = `x${secret}y${secret}z`;
  for (let i = 0; i <= text.length; i++) {
    for (let j = i; j <= text.length; j++) {
      t.is(await maskStr([secret], text.slice(0, i), text.slice(i, j), text.slice(j)), 'x***y***z', `cuts ${i},${j}`);
    }
  }
});

test('a secret written one byte at a time is masked', async (t) => {
  const secret = 'MARKER-one-byte-at-a-time';
  const text = `[${secret}]\n`;
  const out = await mask([secret], [...Buffer.from(text)].map((b) => Buffer.from([b])));
  t.is(out.toString(), '[***]\n');
});

test('overlapping and touching secrets are merged into one mask with no fragment left', async (t) => {
  const secrets = ['abcdef', 'defghi', 'ghijkl'];
  t.is(await maskStr(secrets, 'x abcdefghijkl y'), 'x *** y');
  t.is(await maskStr(['aaaa'], 'aaaaaaa!'), '***!');
  t.is(await maskStr(['1234', '5678'], '<12345678>'), '<***>');
  // a longer secret that starts with a shorter one wins (no tail of the long one left)
  t.is(await maskStr(['secr', 'secret-long-value'], 'v=secret-long-value;'), 'v=***;');
});

test('overlapping secrets split at every offset give the same result as unsplit input', async (t) => {
  const secrets = ['abcdef', 'defghi', 'cdefgh', 'zzzz'];
  const text = 'zzabcdefghi--cdefghij--zzzzz--abcdefabcdef';
  const expected = reference(secrets, text);
  t.is(await maskStr(secrets, text), expected);
  for (let i = 0; i <= text.length; i++) {
    for (let j = i; j <= text.length; j += 3) {
      t.is(await maskStr(secrets, text.slice(0, i), text.slice(i, j), text.slice(j)), expected, `cuts ${i},${j}`);
    }
  }
});

test('randomised chunking of random text with planted secrets matches the reference', async (t) => {
  const secrets = ['MARKER-Q9x', 'Q9xZ-tail', 'pass1234word'];
  for (let round = 0; round < 200; round++) {
    let text = '';
    for (let k = 0; k < 12; k++) {
      text += randomBytes(4).toString('base64').slice(0, 1 + (round + k) % 5);
      text += k % 3 === 0 ? secrets[(round + k) % secrets.length]! : '';
    }
    const chunks: string[] = [];
    for (let i = 0; i < text.length;) {
      const n = 1 + Math.floor(Math.random() * 7);
      chunks.push(text.slice(i, i + n));
      i += n;
    }
    t.is(await maskStr(secrets, ...chunks), reference(secrets, text), text);
  }
});

test('binary output passes through byte for byte except the masked secret', async (t) => {
  const secret = 'MARKER-binary-secret';
  const a = randomBytes(70_000);
  const b = randomBytes(33_333);
  const input = Buffer.concat([a, Buffer.from(secret), b]);
  // cut into uneven chunks, one boundary inside the secret
  const chunks = [input.subarray(0, 65_536), input.subarray(65_536, a.length + 5), input.subarray(a.length + 5)];
  const out = await mask([secret], chunks);
  t.true(out.equals(Buffer.concat([a, Buffer.from('***'), b])));
  t.is(out.indexOf(Buffer.from(secret)), -1);
});

test('base64, base64url, URL-encoded forms and each line of a multi-line secret are masked', async (t) => {
  const secret = 'p@ss w/rd+?~~~';
  const b64 = Buffer.from(secret).toString('base64');
  const b64url = Buffer.from(secret).toString('base64url');
  const url = encodeURIComponent(secret);
  t.not(b64, b64url);
  t.is(await maskStr([secret], `${b64}|${b64url}|${url}|${secret}`), '***|***|***|***');
  const pem = '-----BEGIN KEY-----\nAAAAB3NzaC1lZDI1NTE5\nMARKERlinetwo0000\n-----END KEY-----\n';
  t.is(await maskStr([pem], 'line: AAAAB3NzaC1lZDI1NTE5 and MARKERlinetwo0000\n'), 'line: *** and ***\n');
});

test(`secrets shorter than ${MIN_MASK_LENGTH} characters are not masked; output without secrets is unchanged`, async (t) => {
  t.is(await maskStr(['abc'], 'abc abcd'), 'abc abcd');
  t.is(await maskStr([], 'plain output\n'), 'plain output\n');
  t.is(await maskStr(['zzzz'], ''), '');
});

test('held-back tail is flushed at the end of the stream', async (t) => {
  // Ends with a prefix of the secret: must come out unmasked, not be lost.
  t.is(await maskStr(['MARKER-secret'], 'last line ends MARKER-sec'), 'last line ends MARKER-sec');
});

test('pattern buffers are zeroed when the stream ends', async (t) => {
  const patterns = maskPatterns(['MARKER-zero-me']);
  const stream = new MaskStream(patterns);
  stream.resume();
  const ended = new Promise((resolve) => stream.on('end', resolve));
  stream.end(Buffer.from('x'));
  await ended;
  t.true(patterns.every((p) => p.every((b) => b === 0)));
});

test('output that cannot begin a secret is written at once; a possible secret prefix is held until the next chunk', async (t) => {
  const stream = new MaskStream(maskPatterns(['MARKER-held-secret']));
  const out: string[] = [];
  stream.on('data', (c: Buffer) => out.push(c.toString()));
  const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
  stream.write('ready\n');
  await tick();
  t.deepEqual(out, ['ready\n'], 'not held back');
  stream.write('value: MARK');
  await tick();
  t.deepEqual(out, ['ready\n', 'value: '], 'the possible prefix MARK is held');
  stream.write('ER-held-secret!');
  await tick();
  t.deepEqual(out, ['ready\n', 'value: ', '***!']);
  stream.end();
});
