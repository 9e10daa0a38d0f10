import test from 'ava';
import { buildUpstreamUrl, parseBaseUrl, MAX_PATH_LENGTH } from '../../src/broker/url.ts';
import { CustosError } from '../../src/errors.ts';

const BASE = 'https://api.example.com/v1';

function refused(t: import('ava').ExecutionContext, base: string, path: string): CustosError {
  const err = t.throws(() => buildUpstreamUrl(base, path), { instanceOf: CustosError });
  t.is(err!.code, 'CUSTOS_ERR_URL_REFUSED');
  return err!;
}

// Each hostile path with the attack it stands for. All must be refused against BASE.
const HOSTILE: ReadonlyArray<readonly [string, string]> = [
  ['absolute https URL', 'https://evil.example/x'],
  ['absolute http URL', 'http://evil.example/x'],
  ['javascript: scheme', 'javascript:alert(1)'],
  ['file: scheme', 'file:///etc/passwd'],
  ['host:port without slash (scheme-like)', 'evil.example:443/x'],
  ['protocol-relative //host', '//evil.example/x'],
  ['protocol-relative with backslashes', '\\\\evil.example/x'],
  ['slash-backslash (parser treats \\ as /)', '/\\evil.example/x'],
  ['backslash dot segment', '/x\\..\\..\\admin'],
  ['userinfo-style @ at start', '@evil.example/x'],
  ['@ inside path', '/x@evil.example'],
  ['@ after colon (user:pass@host)', '/user:pass@evil.example/'],
  ['raw .. segment', '/../admin'],
  ['raw .. segment in the middle', '/a/b/../../../admin'],
  ['trailing ..', '/a/..'],
  ['raw . segment', '/./x'],
  ['%2e%2e', '/%2e%2e/admin'],
  ['%2E%2E uppercase', '/%2E%2E/admin'],
  ['.%2e mixed', '/.%2e/admin'],
  ['%2E. mixed', '/%2E./admin'],
  ['%2e single dot', '/%2e/x'],
  ['Tomcat ..;/', '/..;/admin'],
  ['Tomcat ..;param/', '/..;jsessionid=1/admin'],
  ['triple dots', '/.../x'],
  ['dots with trailing space (Windows trims)', '/.. /x'],
  ['dots with encoded space', '/..%20/x'],
  ['encoded slash %2f', '/a%2f..%2fadmin'],
  ['encoded slash %2F', '/..%2Fadmin'],
  ['encoded backslash %5c', '/..%5cadmin'],
  ['double-encoded dot %252e', '/%252e%252e/admin'],
  ['double-encoded slash %252f', '/a%252fb'],
  ['double-encoded percent %2525', '/a%25252e'],
  ['malformed percent escape', '/a%zz'],
  ['truncated percent escape', '/a%2'],
  ['CRLF injection', '/x\r\nHost: evil.example'],
  ['LF alone', '/x\nX: y'],
  ['CR alone', '/x\ry'],
  ['TAB (parser strips it)', '/x\t/y'],
  ['NUL', '/x\u0000y'],
  ['DEL', '/x\u007fy'],
  ['encoded NUL', '/x%00y'],
  ['encoded CRLF in path', '/x%0d%0aSet-Cookie:a'],
  ['fragment', '/x#frag'],
  ['CRLF in query', '/x?a=1\r\nHost: evil'],
  ['backslash in query', '/x?a=\\\\evil'],
];

for (const [name, path] of HOSTILE) {
  test(`refuses hostile path: ${name}`, (t) => {
    refused(t, BASE, path);
  });
}

test('at least 25 hostile path cases are covered', (t) => {
  t.true(HOSTILE.length >= 25);
});

test('refusal messages do not echo a huge or hostile input', (t) => {
  const marker = `MARKER-${'z'.repeat(40)}`;
  for (const path of [`/../${marker}`, `/x\r\n${marker}`, `https://${marker}/`, `/${marker}@evil`, `/%2e%2e/${marker}`]) {
    const err = refused(t, BASE, path);
    t.false(err.message.includes(marker), path);
  }
  const huge = `/${'a'.repeat(MAX_PATH_LENGTH + 10)}`;
  const err = refused(t, BASE, huge);
  t.true(err.message.length < 200);
  t.regex(err.message, /too long/);
});

test('joins a path under the base path and keeps the query string', (t) => {
  const url = buildUpstreamUrl(BASE, '/users/42?fields=a,b&q=hello%20world');
  t.is(url.href, 'https://api.example.com/v1/users/42?fields=a,b&q=hello%20world');
});

test('the base path admits itself and children, on a segment boundary', (t) => {
  t.is(buildUpstreamUrl(BASE, '/').pathname, '/v1/');
  t.is(buildUpstreamUrl(BASE, '/x').pathname, '/v1/x');
  t.is(buildUpstreamUrl('https://api.example.com/v1/', '/x').pathname, '/v1/x');
  // "/v1" + "x" must not become "/v1x": a path without '/' is given one, not glued on.
  t.is(buildUpstreamUrl(BASE, 'x').pathname, '/v1/x');
});

test('a path without a leading slash gets one (documented)', (t) => {
  t.is(buildUpstreamUrl(BASE, 'users/1').href, 'https://api.example.com/v1/users/1');
  t.is(buildUpstreamUrl(BASE, '?page=2').href, 'https://api.example.com/v1/?page=2');
  t.is(buildUpstreamUrl(BASE, '').href, 'https://api.example.com/v1/');
});

test('a root base URL admits any safe path', (t) => {
  t.is(buildUpstreamUrl('https://api.example.com', '/a/b').href, 'https://api.example.com/a/b');
  t.is(buildUpstreamUrl('http://127.0.0.1:8080/', '/a').href, 'http://127.0.0.1:8080/a');
});

test('the origin is the base origin (scheme, host and port)', (t) => {
  const url = buildUpstreamUrl('https://api.example.com:8443/v1', '/x');
  t.is(url.origin, 'https://api.example.com:8443');
});

test('ordinary characters and safe encodings pass', (t) => {
  t.is(buildUpstreamUrl(BASE, '/repos/o/r/contents/a%20b.md').pathname, '/v1/repos/o/r/contents/a%20b.md');
  t.is(buildUpstreamUrl(BASE, '/projects/p:batchGet').pathname, '/v1/projects/p:batchGet');
  t.is(buildUpstreamUrl(BASE, '/file.tar.gz').pathname, '/v1/file.tar.gz');
  t.is(buildUpstreamUrl(BASE, '/.well-known/x').pathname, '/v1/.well-known/x');
  t.is(buildUpstreamUrl(BASE, '/a..b').pathname, '/v1/a..b');
  t.is(buildUpstreamUrl(BASE, '/x?redirect=https://other.example/&u=a@b').search, '?redirect=https://other.example/&u=a@b');
  t.is(buildUpstreamUrl(BASE, '/caf%C3%A9').pathname, '/v1/caf%C3%A9');
  t.is(buildUpstreamUrl(BASE, '/a%40b').pathname, '/v1/a%40b');
});

test('non-ASCII in the path is percent-encoded by the URL parser, not refused', (t) => {
  t.is(buildUpstreamUrl(BASE, '/café').pathname, '/v1/caf%C3%A9');
});

/** Percent-decodes like a lenient server: stray '%' stays, invalid UTF-8 is left encoded. */
function decode(s: string): string {
  return s.replace(/(?:%[0-9a-fA-F]{2})+/g, (m) => {
    try {
      return decodeURIComponent(m);
    } catch {
      return m;
    }
  });
}

test('fuzz: any path built from hostile pieces is refused or stays under the base, undecodable to ..', (t) => {
  const pieces = ['/', '.', '..', '%2e', '%2E', '%2f', '%5C', '%25', '%', ';', '@', ':', '?', '#', 'a', 'v1', '\\', '//', ' ', '%20', 'é', '\t', 'x=', '&', '%00', 'http:', '~'];
  let seed = 12345;
  const next = (): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed;
  };
  let accepted = 0;
  for (let i = 0; i < 5000; i++) {
    let path = '';
    const n = 1 + (next() % 8);
    for (let j = 0; j < n; j++) path += pieces[next() % pieces.length];
    let url: URL;
    try {
      url = buildUpstreamUrl(BASE, path);
    } catch (err) {
      if (!(err instanceof CustosError) || err.code !== 'CUSTOS_ERR_URL_REFUSED') t.fail(`unexpected error for ${JSON.stringify(path)}`);
      continue;
    }
    accepted++;
    t.is(url.origin, 'https://api.example.com', path);
    t.true(url.pathname === '/v1' || url.pathname.startsWith('/v1/'), path);
    // What an upstream that percent-decodes (even twice) would see must not contain a dot segment.
    for (const seg of url.pathname.split('/')) {
      const once = decode(seg);
      const twice = decode(once);
      t.false(/^[. ]*\.[. ]*$/.test(once.split(';')[0]!) || /^[. ]*\.[. ]*$/.test(twice.split(';')[0]!), path);
      t.false(once.includes('/') || once.includes('\\'), path);
    }
  }
  t.true(accepted > 100, `accepted ${accepted}`);
});

const BAD_BASES: ReadonlyArray<readonly [string, string]> = [
  ['ftp scheme', 'ftp://files.example.com/'],
  ['javascript scheme', 'javascript:alert(1)'],
  ['file scheme', 'file:///etc/passwd'],
  ['userinfo', 'https://user:pass@api.example.com/'],
  ['empty userinfo', 'https://@api.example.com/'],
  ['fragment', 'https://api.example.com/v1#x'],
  ['query', 'https://api.example.com/v1?key=1'],
  ['relative', '/v1/x'],
  ['whitespace', 'https://api.exa mple.com/'],
  ['newline (parser strips it)', 'https://api.exa\nmple.com/'],
  ['backslash', 'https://api.example.com\\@evil.example/'],
  ['empty', ''],
];

for (const [name, base] of BAD_BASES) {
  test(`refuses base URL: ${name}`, (t) => {
    const err = t.throws(() => parseBaseUrl(base), { instanceOf: CustosError });
    t.is(err!.code, 'CUSTOS_ERR_URL_REFUSED');
    t.throws(() => buildUpstreamUrl(base, '/x'), { instanceOf: CustosError });
  });
}

test('accepts http and https base URLs, IP literals and ports', (t) => {
  t.is(parseBaseUrl('https://api.example.com/v1/').prefix, '/v1');
  t.is(parseBaseUrl('http://127.0.0.1:9000').origin, 'http://127.0.0.1:9000');
  t.is(parseBaseUrl('http://[::1]:9000/x').origin, 'http://[::1]:9000');
});

test('refusals carry the URL_REFUSED code and a 400 status', (t) => {
  const err = refused(t, BASE, '/../x');
  t.is(err.status, 400);
  t.true(err.expose);
});
