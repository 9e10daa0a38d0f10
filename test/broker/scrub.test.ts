import test from 'ava';
import { randomBytes } from 'node:crypto';
import {
  scrubResponse,
  safeResponseHeaders,
  renderBody,
  REDACTED,
  TRUNCATION_MARKER,
  MIN_SECRET_BYTES,
} from '../../src/broker/scrub.ts';
import type { UpstreamResponse } from '../../src/broker/types.ts';
import { findLeak } from './leak.ts';

function resp(body: string | Buffer, headers: Record<string, string> = {}, truncated = false): UpstreamResponse {
  return { status: 200, headers, body: Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8'), truncated, latencyMs: 1 };
}

const marker = (): string => `MARKER-${randomBytes(12).toString('hex')}`;

test('replaces the raw secret in the body and in header values', (t) => {
  const m = marker();
  const out = scrubResponse(resp(`a ${m} b ${m}`, { 'x-echo': `Bearer ${m}` }), [Buffer.from(m)]);
  t.is(out.body.toString(), `a ${REDACTED} b ${REDACTED}`);
  t.is(out.headers['x-echo'], `Bearer ${REDACTED}`);
});

test('replaces base64, base64url, unpadded base64 and hex forms', (t) => {
  const secret = Buffer.from(`${marker()}?>~`); // '?>~' produce '+' and '/' in base64
  const s = secret;
  const forms = [s.toString('base64'), s.toString('base64').replace(/=+$/, ''), s.toString('base64url'), s.toString('hex'), s.toString('hex').toUpperCase()];
  for (const f of forms) {
    const out = scrubResponse(resp(`{"v":"${f}"}`), [secret]).body.toString();
    t.is(out, `{"v":"${REDACTED}"}`, f);
  }
});

test('finds a secret inside a longer base64 string at any byte offset (Basic user:secret)', (t) => {
  const m = marker();
  for (const prefix of ['', 'u:', 'us:', 'user:', 'ab']) {
    const b64 = Buffer.from(`${prefix}${m}-tail`).toString('base64');
    const out = scrubResponse(resp(`Basic ${b64}`), [Buffer.from(m)]).body.toString();
    t.true(out.includes(REDACTED), prefix);
    t.is(findLeak(out, Buffer.from(m)), undefined, prefix);
  }
});

test('replaces URL-encoded forms (upper and lower hex, + for space, RFC 3986 strict)', (t) => {
  const secret = `p@ss/w+rd=é x!'(${randomBytes(6).toString('hex')})*`;
  const enc = encodeURIComponent(secret);
  const forms = [
    enc,
    enc.replace(/%[0-9A-F]{2}/g, (x) => x.toLowerCase()),
    enc.replace(/%20/g, '+'),
    enc.replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`),
  ];
  for (const f of forms) {
    t.is(scrubResponse(resp(`q=${f}&x=1`), [Buffer.from(secret)]).body.toString(), `q=${REDACTED}&x=1`, f);
  }
});

test('replaces JSON-escaped forms (quotes, backslashes, \\/ and \\u escapes)', (t) => {
  const secret = `a"b\\c/d-é-${randomBytes(6).toString('hex')}`;
  const json = JSON.stringify(secret).slice(1, -1);
  const forms = [json, json.replace(/\//g, '\\/'), json.replace(/é/g, '\\u00e9')];
  for (const f of forms) {
    t.is(scrubResponse(resp(`{"echo":"${f}"}`), [Buffer.from(secret)]).body.toString(), `{"echo":"${REDACTED}"}`, f);
  }
});

test('scrubs every secret given (credential and derived token)', (t) => {
  const a = marker();
  const b = `derived-${randomBytes(16).toString('hex')}`;
  const out = scrubResponse(resp(`${a}|${b}`), [Buffer.from(a), Buffer.from(b)]).body.toString();
  t.is(out, `${REDACTED}|${REDACTED}`);
});

test(`secrets shorter than ${MIN_SECRET_BYTES} bytes are ignored (documented)`, (t) => {
  const out = scrubResponse(resp('abc abcd'), [Buffer.from('abc')]);
  t.is(out.body.toString(), 'abc abcd');
  t.is(scrubResponse(resp('abcd'), [Buffer.from('abcd')]).body.toString(), REDACTED);
});

test('a clean body is returned without copying', (t) => {
  const r = resp('nothing to see here');
  t.is(scrubResponse(r, [Buffer.from(marker())]).body, r.body);
});

test('a header whose name carries the secret (in any case) is dropped', (t) => {
  const m = marker(); // upper-case "MARKER-…"; header names arrive lower-cased
  const out = scrubResponse(resp('', { [`x-ratelimit-${m.toLowerCase()}`]: '1', 'x-ok': 'fine' }), [Buffer.from(m)]);
  t.deepEqual(out.headers, { 'x-ok': 'fine' });
});

test('a truncated body loses a trailing partial secret; an untruncated one keeps its text', (t) => {
  const m = marker();
  const cut = `${'A'.repeat(50)}${m.slice(0, 20)}`;
  const out = scrubResponse(resp(cut, {}, true), [Buffer.from(m)]).body.toString();
  t.is(out, 'A'.repeat(50));
  const b64cut = `${'A'.repeat(50)}${Buffer.from(m).toString('base64').slice(0, 16)}`;
  t.is(findLeak(scrubResponse(resp(b64cut, {}, true), [Buffer.from(m)]).body.toString(), Buffer.from(m)), undefined);
  t.is(scrubResponse(resp(`${'A'.repeat(50)}${m.slice(0, 3)}`, {}, false), [Buffer.from(m)]).body.toString(), `${'A'.repeat(50)}${m.slice(0, 3)}`);
});

test('binary (non-UTF-8) secrets are found raw and base64-encoded', (t) => {
  const secret = randomBytes(24);
  const body = Buffer.concat([Buffer.from('x'), secret, Buffer.from(`y${secret.toString('base64')}z`)]);
  const out = scrubResponse(resp(body), [secret]).body;
  t.is(out.indexOf(secret), -1);
  t.is(findLeak(out.toString('latin1'), secret), undefined);
});

test('safeResponseHeaders keeps the allow-list and drops set-cookie, content-length and unknown headers', (t) => {
  const out = safeResponseHeaders({
    'content-type': 'application/json',
    'content-length': '12',
    'content-encoding': 'gzip',
    'set-cookie': 'session=abc',
    'x-ratelimit-remaining': '10',
    'ratelimit-reset': '5',
    'retry-after': '3',
    location: '/next',
    etag: '"x"',
    link: '<https://api.example.com/?page=2>; rel="next"',
    'www-authenticate': 'Bearer error="invalid_token"',
    'proxy-authenticate': 'Basic',
    'x-internal-secret-thing': 'x',
    server: 'nginx',
    'x-request-id': 'r1',
  });
  t.deepEqual(Object.keys(out).sort(), ['content-type', 'etag', 'link', 'location', 'ratelimit-reset', 'retry-after', 'www-authenticate', 'x-ratelimit-remaining', 'x-request-id']);
});

test('renderBody parses JSON that fits', (t) => {
  t.deepEqual(renderBody(Buffer.from('{"a":[1,2]}'), 'application/json; charset=utf-8', 100), { body: { a: [1, 2] }, truncated: false, encoding: 'json' });
  t.deepEqual(renderBody(Buffer.from('{"a":1}'), 'application/problem+json', 100).body, { a: 1 });
});

test('renderBody shows JSON over the preview size as text with the truncation marker', (t) => {
  const r = renderBody(Buffer.from(JSON.stringify({ a: 'x'.repeat(100) })), 'application/json', 20);
  t.is(r.encoding, 'text');
  t.true(r.truncated);
  t.is(r.body, `{"a":"xxxxxxxxxxxxxx${TRUNCATION_MARKER}`);
});

test('renderBody shows invalid JSON as text', (t) => {
  t.deepEqual(renderBody(Buffer.from('{oops'), 'application/json', 100), { body: '{oops', truncated: false, encoding: 'text' });
});

test('renderBody cuts text on a UTF-8 character boundary', (t) => {
  const r = renderBody(Buffer.from('ééé'), 'text/plain', 3); // é is 2 bytes: 3 bytes holds one
  t.is(r.body, `é${TRUNCATION_MARKER}`);
  t.true(r.truncated);
});

test('renderBody marks a body the broker already cut at maxResponseBytes', (t) => {
  const r = renderBody(Buffer.from('partial'), 'text/plain', 100, true);
  t.deepEqual(r, { body: `partial${TRUNCATION_MARKER}`, truncated: true, encoding: 'text' });
  t.is(renderBody(Buffer.from('{"a":1'), 'application/json', 100, true).encoding, 'text');
});

test('renderBody honours a Latin-1 charset', (t) => {
  t.is(renderBody(Buffer.from([0x63, 0x61, 0x66, 0xe9]), 'text/plain; charset=iso-8859-1', 100).body, 'café');
});

test('renderBody gives binary content as base64, capped', (t) => {
  const bin = Buffer.from([0, 1, 2, 3, 255, 254]);
  t.deepEqual(renderBody(bin, 'application/octet-stream', 100), { body: bin.toString('base64'), truncated: false, encoding: 'base64' });
  t.deepEqual(renderBody(bin, 'image/png', 4), { body: bin.subarray(0, 4).toString('base64'), truncated: true, encoding: 'base64' });
});

test('renderBody sniffs untyped bodies: UTF-8 text as text, binary as base64', (t) => {
  t.is(renderBody(Buffer.from('plain words'), undefined, 100).encoding, 'text');
  t.is(renderBody(Buffer.from([0xff, 0x00, 0x10]), undefined, 100).encoding, 'base64');
});

test('the independent leak detector used by these tests does find unscrubbed forms', (t) => {
  const m = Buffer.from(marker());
  t.not(findLeak(`x${m.toString('latin1')}y`, m), undefined);
  t.not(findLeak(`Basic ${Buffer.concat([Buffer.from('user:'), m]).toString('base64')}`, m), undefined);
  t.not(findLeak(encodeURIComponent(m.toString()), m), undefined);
  t.not(findLeak(`"${m.toString('hex')}"`, m), undefined);
  t.is(findLeak('nothing here at all', m), undefined);
});
