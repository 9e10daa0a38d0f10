import test from 'ava';
import { checkMethod, BROKER_METHODS } from '../../src/broker/methods.ts';
import { CustosError } from '../../src/errors.ts';

const ALL = [...BROKER_METHODS];

test('each allow-listed uppercase method passes when in scope', (t) => {
  for (const m of BROKER_METHODS) t.is(checkMethod(m, ALL), m);
});

test('a read-only scope (GET) refuses POST with METHOD_NOT_ALLOWED', (t) => {
  t.is(checkMethod('GET', ['GET']), 'GET');
  const err = t.throws(() => checkMethod('POST', ['GET']), { instanceOf: CustosError });
  t.is(err!.code, 'CUSTOS_ERR_METHOD_NOT_ALLOWED');
  t.regex(err!.message, /GET/);
});

test('lowercase and mixed-case methods are malformed (VALIDATION), not silently upper-cased', (t) => {
  for (const m of ['get', 'Post', 'dElEtE']) {
    const err = t.throws(() => checkMethod(m, ALL), { instanceOf: CustosError });
    t.is(err!.code, 'CUSTOS_ERR_VALIDATION', m);
  }
});

test('CR/LF, spaces, empty and overlong methods are malformed', (t) => {
  for (const m of ['GET\r\n', 'GET\r\nHost: evil', 'GET /x HTTP/1.1', ' GET', 'GET ', '', 'G\u0000T', 'A'.repeat(100)]) {
    const err = t.throws(() => checkMethod(m, ALL), { instanceOf: CustosError });
    t.is(err!.code, 'CUSTOS_ERR_VALIDATION', JSON.stringify(m));
    t.false(err!.message.includes('evil'));
  }
});

test('TRACE, CONNECT and unknown tokens are never allowed, even if a scope lists them', (t) => {
  for (const m of ['TRACE', 'CONNECT', 'PROPFIND', 'FOO']) {
    const err = t.throws(() => checkMethod(m, [...ALL, m]), { instanceOf: CustosError });
    t.is(err!.code, 'CUSTOS_ERR_METHOD_NOT_ALLOWED', m);
  }
});

test('an empty scope allows nothing', (t) => {
  const err = t.throws(() => checkMethod('GET', []), { instanceOf: CustosError });
  t.is(err!.code, 'CUSTOS_ERR_METHOD_NOT_ALLOWED');
});

test('non-string input is malformed', (t) => {
  const err = t.throws(() => checkMethod(42 as unknown as string, ALL), { instanceOf: CustosError });
  t.is(err!.code, 'CUSTOS_ERR_VALIDATION');
});
