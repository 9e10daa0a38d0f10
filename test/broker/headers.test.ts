import test from 'ava';
import {
  sanitizeAgentHeaders,
  MAX_AGENT_HEADERS,
  MAX_HEADER_VALUE_LENGTH,
  MAX_AGENT_HEADER_BYTES,
} from '../../src/broker/headers.ts';
import { CustosError } from '../../src/errors.ts';

function refusedHeader(t: import('ava').ExecutionContext, headers: Record<string, string>, cred: string[] = []): CustosError {
  const err = t.throws(() => sanitizeAgentHeaders(headers, cred), { instanceOf: CustosError });
  t.is(err!.code, 'CUSTOS_ERR_HEADER_REFUSED');
  return err!;
}

test('lower-cases names and keeps ordinary headers', (t) => {
  const out = sanitizeAgentHeaders({ Accept: 'application/json', 'X-GitHub-Api-Version': '2022-11-28', 'If-None-Match': '"abc"' }, []);
  t.deepEqual({ ...out }, { accept: 'application/json', 'x-github-api-version': '2022-11-28', 'if-none-match': '"abc"' });
});

test('undefined headers give an empty set', (t) => {
  t.deepEqual({ ...sanitizeAgentHeaders(undefined, []) }, {});
});

const CREDENTIAL_BEARING = ['Authorization', 'authorization', 'AUTHORIZATION', 'Proxy-Authorization', 'Cookie', 'cookie2', 'Host', 'X-Amz-Date', 'x-amz-security-token', 'X-Amz-Content-Sha256'];
for (const name of CREDENTIAL_BEARING) {
  test(`refuses credential-bearing or routing header ${name}`, (t) => {
    const err = refusedHeader(t, { [name]: 'Bearer attacker' });
    t.false(err.message.includes('attacker'));
  });
}

test("refuses the credential's own header name, in any case", (t) => {
  refusedHeader(t, { 'X-Api-Key': 'x' }, ['x-api-key']);
  refusedHeader(t, { 'x-api-key': 'x' }, ['X-API-KEY']);
  t.is(sanitizeAgentHeaders({ 'x-api-key': 'x' }, ['x-other'])['x-api-key'], 'x');
});

const FRAMING = ['Connection', 'Transfer-Encoding', 'Content-Length', 'TE', 'Trailer', 'Upgrade', 'Keep-Alive', 'Proxy-Connection', 'Proxy-Anything', 'Expect', 'Accept-Encoding'];
for (const name of FRAMING) {
  test(`refuses hop-by-hop or framing header ${name}`, (t) => {
    refusedHeader(t, { [name]: '1' });
  });
}

const OVERRIDES = ['X-HTTP-Method-Override', 'X-HTTP-Method', 'X-Method-Override', 'X-Original-URL', 'X-Rewrite-URL', 'Forwarded', 'X-Forwarded-For', 'X-Forwarded-Host'];
for (const name of OVERRIDES) {
  test(`refuses method/path override header ${name} (would bypass method or path scope)`, (t) => {
    refusedHeader(t, { [name]: 'POST' });
  });
}

test('refuses CR, LF, NUL and other control characters in values without echoing the value', (t) => {
  for (const v of ['a\r\nHost: evil', 'a\nb', 'a\rb', 'a\u0000b', 'a\u0001b', 'a\u007fb']) {
    const err = refusedHeader(t, { 'x-note': v });
    t.false(err.message.includes('evil'));
  }
  // HTAB and Latin-1 obs-text are legal field-value characters.
  t.is(sanitizeAgentHeaders({ 'x-note': 'a\tb é' }, [])['x-note'], 'a\tb é');
});

test('refuses characters beyond Latin-1 in values', (t) => {
  refusedHeader(t, { 'x-note': 'snow ☃' });
});

test('refuses invalid header names', (t) => {
  for (const name of ['bad name', 'x:y', 'x\r\ny', '', 'é', '(x)', 'a'.repeat(200)]) refusedHeader(t, { [name]: 'v' });
});

test('refuses duplicate names that differ only in case', (t) => {
  refusedHeader(t, { Accept: 'a', accept: 'b' });
});

test('caps the number of headers, each value, and the total size', (t) => {
  const many: Record<string, string> = {};
  for (let i = 0; i <= MAX_AGENT_HEADERS; i++) many[`x-h${i}`] = 'v';
  refusedHeader(t, many);
  refusedHeader(t, { 'x-big': 'a'.repeat(MAX_HEADER_VALUE_LENGTH + 1) });
  const total: Record<string, string> = {};
  for (let i = 0; i < 3; i++) total[`x-t${i}`] = 'a'.repeat(Math.ceil(MAX_AGENT_HEADER_BYTES / 3));
  refusedHeader(t, total);
});

test('refuses non-string values and non-object header sets', (t) => {
  refusedHeader(t, { 'x-n': 5 as unknown as string });
  const err = t.throws(() => sanitizeAgentHeaders(['a'] as unknown as Record<string, string>, []), { instanceOf: CustosError });
  t.is(err!.code, 'CUSTOS_ERR_HEADER_REFUSED');
});

test('a header named __proto__ stays an ordinary key', (t) => {
  const input = JSON.parse('{"__proto__": "x"}') as Record<string, string>;
  const out = sanitizeAgentHeaders(input, []);
  t.is(Object.getPrototypeOf(out), null);
  t.is(out['__proto__'], 'x');
});
