import test from 'ava';
import http from 'node:http';
import zlib from 'node:zlib';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { LookupFunction } from 'node:net';
import { sendOutbound, createBrokerAgent, closeBrokerAgents, type SendOptions } from '../../src/broker/client.ts';
import { buildUpstreamUrl } from '../../src/broker/url.ts';
import { CustosError } from '../../src/errors.ts';
import type { OutboundRequest } from '../../src/kinds/credential-kind.ts';

interface Upstream {
  port: number;
  hits: number;
  connections: number;
  last: { method: string; url: string; headers: http.IncomingHttpHeaders; body: Buffer } | undefined;
  close(): Promise<void>;
}

async function upstream(handler: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void, host = '127.0.0.1'): Promise<Upstream> {
  const state: Upstream = { port: 0, hits: 0, connections: 0, last: undefined, close: async () => {} };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      state.hits++;
      const body = Buffer.concat(chunks);
      state.last = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
      handler(req, res, body);
    });
  });
  server.on('connection', () => state.connections++);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  state.port = (server.address() as AddressInfo).port;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}

const OPTS: SendOptions = { allowPrivate: true, timeoutMs: 3000, connectTimeoutMs: 1000, maxResponseBytes: 1 << 20, maxRequestBytes: 1 << 20 };

function get(url: URL, headers: Record<string, string> = {}, method = 'GET', body?: Buffer): OutboundRequest {
  return { method, url, headers, body };
}

/** A resolver that answers fixed addresses for every name (what a hostile DNS would do). */
function fixedLookup(...addresses: string[]): LookupFunction & { calls: number } {
  const fn = ((_host: string, options: { all?: boolean }, cb: (...a: unknown[]) => void) => {
    fn.calls++;
    const list = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    if (options.all) cb(null, list);
    else cb(null, list[0]!.address, list[0]!.family);
  }) as unknown as LookupFunction & { calls: number };
  fn.calls = 0;
  return fn;
}

async function refusedWith(t: import('ava').ExecutionContext, p: Promise<unknown>, code: string): Promise<CustosError> {
  const err = await t.throwsAsync(p, { instanceOf: CustosError });
  t.is(err!.code, code as CustosError['code']);
  return err!;
}

test.after.always(async () => {
  await closeBrokerAgents();
});

test('sends method, path, query, headers and body to a loopback upstream named by the base URL', async (t) => {
  const up = await upstream((_req, res, body) => res.end(`got ${body.length}`));
  t.teardown(up.close);
  const url = buildUpstreamUrl(`http://127.0.0.1:${up.port}/v1`, '/items?x=1&y=%20');
  const resp = await sendOutbound(get(url, { 'content-type': 'text/plain', 'x-k': 'v' }, 'POST', Buffer.from('hello')), OPTS);
  t.is(resp.status, 200);
  t.is(resp.body.toString(), 'got 5');
  t.false(resp.truncated);
  t.true(resp.latencyMs >= 0);
  t.is(up.last!.method, 'POST');
  t.is(up.last!.url, '/v1/items?x=1&y=%20');
  t.is(up.last!.headers['x-k'], 'v');
  t.is(up.last!.headers['accept-encoding'], 'identity');
  t.is(up.last!.headers.host, `127.0.0.1:${up.port}`);
});

test('keeps one keep-alive connection across sequential calls (shared agent, no per-call connect)', async (t) => {
  const up = await upstream((_req, res) => res.end('ok'));
  t.teardown(up.close);
  const url = buildUpstreamUrl(`http://127.0.0.1:${up.port}`, '/');
  for (let i = 0; i < 20; i++) await sendOutbound(get(url), OPTS);
  t.is(up.hits, 20);
  // undici's pool may open a second socket while the first response is being finished; after that
  // both are reused. A per-call agent or connection would show 20 here.
  t.true(up.connections <= 2, `connections: ${up.connections}`);
});

test('does not follow a redirect to another host: the 3xx and its Location go back as is', async (t) => {
  const target = await upstream((_req, res) => res.end('you followed'));
  t.teardown(target.close);
  const up = await upstream((_req, res) => {
    res.writeHead(302, { location: `http://localhost:${target.port}/steal` });
    res.end();
  });
  t.teardown(up.close);
  const resp = await sendOutbound(get(buildUpstreamUrl(`http://127.0.0.1:${up.port}`, '/go'), { authorization: 'Bearer k' }), OPTS);
  t.is(resp.status, 302);
  t.is(resp.headers.location, `http://localhost:${target.port}/steal`);
  t.is(target.hits, 0);
  t.is(up.hits, 1);
});

test('does not follow redirects to http://, to the same origin, or with 301/303/307/308', async (t) => {
  let n = 0;
  const codes = [301, 303, 307, 308];
  const up = await upstream((req, res) => {
    if (req.url === '/final') {
      res.end('followed');
      return;
    }
    const code = codes[n++ % codes.length]!;
    res.writeHead(code, { location: code === 301 ? 'http://evil.example/' : '/final' });
    res.end();
  });
  t.teardown(up.close);
  for (const code of codes) {
    const resp = await sendOutbound(get(buildUpstreamUrl(`http://127.0.0.1:${up.port}`, '/start'), {}, 'POST', Buffer.from('x')), OPTS);
    t.is(resp.status, code);
  }
  t.is(up.hits, 4); // never requested /final
});

test('refuses a loopback base URL when the operator switch allowPrivate is off', async (t) => {
  const up = await upstream((_req, res) => res.end('ok'));
  t.teardown(up.close);
  await refusedWith(t, sendOutbound(get(buildUpstreamUrl(`http://127.0.0.1:${up.port}`, '/')), { ...OPTS, allowPrivate: false }), 'CUSTOS_ERR_DESTINATION_REFUSED');
  t.is(up.hits, 0);
});

test('refuses a public host name that resolves to 127.0.0.1, even with allowPrivate on', async (t) => {
  const up = await upstream((_req, res) => res.end('ok'));
  t.teardown(up.close);
  const lookup = fixedLookup('127.0.0.1');
  const url = buildUpstreamUrl(`http://api.example.test:${up.port}`, '/');
  await refusedWith(t, sendOutbound(get(url), { ...OPTS, lookup }), 'CUSTOS_ERR_DESTINATION_REFUSED');
  await refusedWith(t, sendOutbound(get(url), { ...OPTS, allowPrivate: false, lookup }), 'CUSTOS_ERR_DESTINATION_REFUSED');
  t.true(lookup.calls >= 1); // refused on the resolved address, at connect time
  t.is(up.hits, 0);
});

test('refuses a host name that resolves to the metadata address 169.254.169.254 (and its IPv6 forms)', async (t) => {
  for (const addr of ['169.254.169.254', '::ffff:169.254.169.254', 'fd00:ec2::254', '64:ff9b::a9fe:a9fe']) {
    const lookup = fixedLookup(addr);
    await refusedWith(t, sendOutbound(get(buildUpstreamUrl('http://metadata.example.test', '/latest/meta-data/')), { ...OPTS, lookup }), 'CUSTOS_ERR_DESTINATION_REFUSED');
    t.is(lookup.calls, 1, addr);
  }
});

test('refuses metadata, private and mapped-loopback IP literals unless allowPrivate (the base names them)', async (t) => {
  for (const base of ['http://169.254.169.254', 'http://10.0.0.1', 'http://[::ffff:127.0.0.1]:1', 'http://0.0.0.0:1', 'http://[::1]:1']) {
    await refusedWith(t, sendOutbound(get(buildUpstreamUrl(base, '/')), { ...OPTS, allowPrivate: false }), 'CUSTOS_ERR_DESTINATION_REFUSED');
  }
});

test('localhost base URL with allowPrivate reaches only loopback addresses', async (t) => {
  const up = await upstream((_req, res) => res.end('local'));
  t.teardown(up.close);
  const resp = await sendOutbound(get(buildUpstreamUrl(`http://localhost:${up.port}`, '/')), { ...OPTS, lookup: fixedLookup('127.0.0.1') });
  t.is(resp.body.toString(), 'local');
  await refusedWith(
    t,
    sendOutbound(get(buildUpstreamUrl(`http://localhost:${up.port}`, '/')), { ...OPTS, lookup: fixedLookup('169.254.169.254') }),
    'CUSTOS_ERR_DESTINATION_REFUSED',
  );
});

test('the address filter drops blocked answers and connects to an allowed one (policy, not lookup, refuses)', async (t) => {
  const up = await upstream((_req, res) => res.end('reached'));
  t.teardown(up.close);
  // Test policy: only link-local is blocked, so 127.0.0.1 stands in for a public address.
  const agent = createBrokerAgent({
    allowPrivate: false,
    connectTimeoutMs: 1000,
    lookup: fixedLookup('169.254.169.254', '127.0.0.1'),
    isBlocked: (a) => a.startsWith('169.254.') || a.startsWith('::ffff:169.254.'),
  });
  t.teardown(() => agent.close());
  const resp = await sendOutbound(get(buildUpstreamUrl(`http://api.example.test:${up.port}`, '/')), { ...OPTS, allowPrivate: false, dispatcher: agent });
  t.is(resp.body.toString(), 'reached');
});

test('DNS rebinding: each new connection is checked on its own resolved address', async (t) => {
  // Upstream on 127.0.0.2 closes every connection, so every call resolves and connects afresh.
  const up = await upstream((_req, res) => {
    res.setHeader('connection', 'close');
    res.end('first');
  }, '127.0.0.2');
  t.teardown(up.close);
  const answers = ['127.0.0.2', '127.0.0.1'];
  let i = 0;
  const lookup = ((_h: string, o: { all?: boolean }, cb: (...a: unknown[]) => void) => {
    const address = answers[Math.min(i++, answers.length - 1)]!;
    if (o.all) cb(null, [{ address, family: 4 }]);
    else cb(null, address, 4);
  }) as unknown as LookupFunction;
  // Test policy: 127.0.0.1 plays the internal address, 127.0.0.2 the public one.
  const agent = createBrokerAgent({ allowPrivate: false, connectTimeoutMs: 1000, lookup, isBlocked: (a) => a === '127.0.0.1' });
  t.teardown(() => agent.close());
  const url = buildUpstreamUrl(`http://rebind.example.test:${up.port}`, '/');
  const first = await sendOutbound(get(url), { ...OPTS, allowPrivate: false, dispatcher: agent });
  t.is(first.body.toString(), 'first');
  await refusedWith(t, sendOutbound(get(url), { ...OPTS, allowPrivate: false, dispatcher: agent }), 'CUSTOS_ERR_DESTINATION_REFUSED');
  t.is(up.hits, 1);
});

test('an upstream that never answers times out with UPSTREAM_TIMEOUT', async (t) => {
  const up = await upstream(() => {
    /* never respond */
  });
  t.teardown(up.close);
  const err = await refusedWith(t, sendOutbound(get(buildUpstreamUrl(`http://127.0.0.1:${up.port}`, '/slow')), { ...OPTS, timeoutMs: 300 }), 'CUSTOS_ERR_UPSTREAM_TIMEOUT');
  t.is(err.status, 504);
});

test('a body that trickles past the overall deadline times out', async (t) => {
  const up = await upstream((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    const iv = setInterval(() => res.write('x'), 50);
    res.on('close', () => clearInterval(iv));
  });
  t.teardown(up.close);
  await refusedWith(t, sendOutbound(get(buildUpstreamUrl(`http://127.0.0.1:${up.port}`, '/')), { ...OPTS, timeoutMs: 400 }), 'CUSTOS_ERR_UPSTREAM_TIMEOUT');
});

test('reads at most maxResponseBytes, marks truncated and aborts the rest', async (t) => {
  let aborted = false;
  const up = await upstream((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let sent = 0;
    const pump = (): void => {
      while (sent < 64 * 1024 * 1024) {
        sent += chunk.length;
        if (!res.write(chunk)) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    res.on('close', () => {
      if (!res.writableFinished) aborted = true;
    });
    pump();
  });
  t.teardown(up.close);
  const resp = await sendOutbound(get(buildUpstreamUrl(`http://127.0.0.1:${up.port}`, '/big')), { ...OPTS, maxResponseBytes: 100_000 });
  t.is(resp.body.length, 100_000);
  t.true(resp.truncated);
  await new Promise((r) => setTimeout(r, 100));
  t.true(aborted, 'the upstream saw the connection closed before it finished sending');
});

test('a body of exactly maxResponseBytes is not marked truncated', async (t) => {
  const up = await upstream((_req, res) => res.end(Buffer.alloc(1000, 0x62)));
  t.teardown(up.close);
  const resp = await sendOutbound(get(buildUpstreamUrl(`http://127.0.0.1:${up.port}`, '/')), { ...OPTS, maxResponseBytes: 1000 });
  t.is(resp.body.length, 1000);
  t.false(resp.truncated);
});

test('refuses a request body over maxRequestBytes before connecting', async (t) => {
  const up = await upstream((_req, res) => res.end('ok'));
  t.teardown(up.close);
  await refusedWith(
    t,
    sendOutbound(get(buildUpstreamUrl(`http://127.0.0.1:${up.port}`, '/'), {}, 'POST', Buffer.alloc(2049)), { ...OPTS, maxRequestBytes: 2048 }),
    'CUSTOS_ERR_BODY_TOO_LARGE',
  );
  t.is(up.hits, 0);
});

test('a compressed answer (sent despite accept-encoding: identity) is decoded within the cap', async (t) => {
  const plain = Buffer.from('{"hello":"world"}'.repeat(1000));
  const up = await upstream((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
    res.end(zlib.gzipSync(plain));
  });
  t.teardown(up.close);
  const url = buildUpstreamUrl(`http://127.0.0.1:${up.port}`, '/');
  const full = await sendOutbound(get(url), OPTS);
  t.true(full.body.equals(plain));
  t.is(full.headers['content-encoding'], undefined);
  const capped = await sendOutbound(get(url), { ...OPTS, maxResponseBytes: 500 });
  t.is(capped.body.length, 500);
  t.true(capped.truncated);
});

test('an unknown content encoding is refused rather than passed through unscrubbable', async (t) => {
  const up = await upstream((_req, res) => {
    res.writeHead(200, { 'content-encoding': 'x-custom' });
    res.end('opaque');
  });
  t.teardown(up.close);
  await refusedWith(t, sendOutbound(get(buildUpstreamUrl(`http://127.0.0.1:${up.port}`, '/')), OPTS), 'CUSTOS_ERR_UPSTREAM');
});

test('a refused connection is CUSTOS_ERR_UPSTREAM with a message free of URL, query and headers', async (t) => {
  const marker = `MARKER-${randomBytes(8).toString('hex')}`;
  const up = await upstream((_req, res) => res.end());
  const port = up.port;
  await up.close(); // nothing listens there now
  const url = buildUpstreamUrl(`http://127.0.0.1:${port}`, `/x?token=${marker}`);
  const err = await refusedWith(t, sendOutbound(get(url, { authorization: `Bearer ${marker}` }), OPTS), 'CUSTOS_ERR_UPSTREAM');
  t.false(err.message.includes(marker));
  t.false(err.message.includes(String(port)));
  t.false(JSON.stringify(err.toJSON()).includes(marker));
});

test('a credential value with a line break is refused without echoing it', async (t) => {
  const marker = `MARKER-${randomBytes(8).toString('hex')}`;
  const up = await upstream((_req, res) => res.end());
  t.teardown(up.close);
  const err = await refusedWith(t, sendOutbound(get(buildUpstreamUrl(`http://127.0.0.1:${up.port}`, '/'), { authorization: `Bearer ${marker}\r\nx: y` }), OPTS), 'CUSTOS_ERR_VALIDATION');
  t.false(err.message.includes(marker));
  t.is(up.hits, 0);
});

test('methods outside the broker allow-list are refused by the client too', async (t) => {
  await refusedWith(t, sendOutbound(get(new URL('http://127.0.0.1:1/'), {}, 'TRACE'), OPTS), 'CUSTOS_ERR_METHOD_NOT_ALLOWED');
  await refusedWith(t, sendOutbound(get(new URL('http://127.0.0.1:1/'), {}, 'get'), OPTS), 'CUSTOS_ERR_METHOD_NOT_ALLOWED');
});

test('non-http(s) and userinfo URLs are refused by the client', async (t) => {
  await refusedWith(t, sendOutbound(get(new URL('file:///etc/passwd')), OPTS), 'CUSTOS_ERR_URL_REFUSED');
  await refusedWith(t, sendOutbound(get(new URL('http://u:p@127.0.0.1:1/')), OPTS), 'CUSTOS_ERR_URL_REFUSED');
});

test('a Host header that does not match the URL (set by a kind) is refused; a matching one is sent', async (t) => {
  const up = await upstream((req, res) => res.end(req.headers.host));
  t.teardown(up.close);
  const url = buildUpstreamUrl(`http://127.0.0.1:${up.port}`, '/');
  await refusedWith(t, sendOutbound(get(url, { host: 'other-tenant.example' }), OPTS), 'CUSTOS_ERR_HEADER_REFUSED');
  await refusedWith(t, sendOutbound(get(url, { Host: 'other-tenant.example' }), OPTS), 'CUSTOS_ERR_HEADER_REFUSED');
  t.is(up.hits, 0);
  const ok = await sendOutbound(get(url, { host: `127.0.0.1:${up.port}` }), OPTS);
  t.is(ok.body.toString(), `127.0.0.1:${up.port}`);
});
