/**
 * The whole outbound pipeline against an upstream that echoes the credential back in every way it
 * can: agent headers are sanitised, a stand-in kind injects a marker secret into Authorization and
 * x-api-key, the broker sends, and the response is scrubbed, header-filtered and rendered the way
 * call_api will. The marker must not survive in any form; the upstream must really have received it.
 */
import test from 'ava';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { buildUpstreamUrl } from '../../src/broker/url.ts';
import { checkMethod } from '../../src/broker/methods.ts';
import { sanitizeAgentHeaders } from '../../src/broker/headers.ts';
import { sendOutbound, closeBrokerAgents } from '../../src/broker/client.ts';
import { scrubResponse, safeResponseHeaders, renderBody, REDACTED } from '../../src/broker/scrub.ts';
import type { OutboundRequest } from '../../src/kinds/credential-kind.ts';
import { findLeak } from './leak.ts';

const CONFIG = { timeoutMs: 3000, connectTimeoutMs: 1000, maxRequestBytes: 1 << 20, maxResponseBytes: 1 << 20, agentBodyPreviewBytes: 1 << 16 };

interface Echo {
  port: number;
  received: http.IncomingHttpHeaders[];
  close(): Promise<void>;
}

/** An upstream that reflects the request's credential headers raw, base64'd, URL-encoded, in hex… */
async function echoUpstream(): Promise<Echo> {
  const received: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push(req.headers);
      const auth = String(req.headers.authorization ?? '');
      const key = String(req.headers['x-api-key'] ?? '');
      const token = auth.replace(/^Bearer /, '');
      const body = Buffer.concat(chunks).toString('utf8');
      if (req.url?.startsWith('/v1/reflect-body')) {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(body);
        return;
      }
      res.writeHead(req.url?.startsWith('/v1/redirect') ? 302 : 200, {
        'content-type': 'application/json',
        'set-cookie': `session=${token}; HttpOnly`,
        location: `https://elsewhere.example/cb?token=${encodeURIComponent(token)}`,
        link: `<https://api.example.com/next?key=${key}>; rel="next"`,
        'www-authenticate': `Bearer realm="x", error="invalid_token", token="${token}"`,
        'x-request-id': Buffer.from(key).toString('base64'),
        [`x-ratelimit-${key.toLowerCase()}`]: '1',
        'x-echo-authorization': auth,
      });
      res.end(
        JSON.stringify({
          headers: req.headers,
          raw: `${auth} ${key}`,
          base64: Buffer.from(token).toString('base64'),
          base64url: Buffer.from(key).toString('base64url'),
          basic: Buffer.from(`user:${key}`).toString('base64'),
          urlencoded: encodeURIComponent(`${token}&${key}`),
          hex: Buffer.from(token).toString('hex'),
          body,
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What call_api will do, in order; returns everything that reaches the agent. */
async function callApi(base: string, path: string, agentHeaders: Record<string, string> | undefined, body: string | undefined, secret: Buffer, maxResponseBytes = CONFIG.maxResponseBytes) {
  const method = checkMethod(body === undefined ? 'GET' : 'POST', ['GET', 'POST']);
  const headers = sanitizeAgentHeaders(agentHeaders, ['x-api-key']);
  const req: OutboundRequest = { method, url: buildUpstreamUrl(base, path), headers: { ...headers }, body: body === undefined ? undefined : Buffer.from(body) };
  // Stand-in for a kind's inject(): strings built at the last moment, as the kinds do.
  req.headers.authorization = `Bearer ${secret.toString('utf8')}`;
  req.headers['x-api-key'] = secret.toString('utf8');
  const upstream = await sendOutbound(req, { ...CONFIG, maxResponseBytes, allowPrivate: true });
  const scrubbed = scrubResponse(upstream, [secret]);
  const rendered = renderBody(scrubbed.body, scrubbed.headers['content-type'], CONFIG.agentBodyPreviewBytes, scrubbed.truncated);
  return { status: scrubbed.status, headers: safeResponseHeaders(scrubbed.headers), ...rendered };
}

test.after.always(async () => {
  await closeBrokerAgents();
});

test('an upstream echoing Authorization and x-api-key in every encoding leaks nothing to the agent', async (t) => {
  const up = await echoUpstream();
  t.teardown(up.close);
  const secret = Buffer.from(`MARKER-${randomBytes(16).toString('hex')}`);
  const result = await callApi(`http://127.0.0.1:${up.port}/v1`, '/whoami', { accept: 'application/json' }, undefined, secret);
  // The upstream really received the credential (the test is not vacuous)…
  t.is(up.received[0]!.authorization, `Bearer ${secret.toString()}`);
  t.is(up.received[0]!['x-api-key'], secret.toString());
  // …and the agent sees a JSON body with every echo redacted.
  t.is(result.encoding, 'json');
  const out = JSON.stringify(result);
  t.is(findLeak(out, secret), undefined);
  t.false(out.includes(secret.toString()));
  const body = result.body as Record<string, unknown>;
  t.is(body.raw, `Bearer ${REDACTED} ${REDACTED}`);
  t.is(body.base64, REDACTED);
  t.is(body.hex, REDACTED);
  t.is((body.headers as Record<string, string>).authorization, `Bearer ${REDACTED}`);
  t.is(result.headers['set-cookie'], undefined);
  t.is(result.headers['x-echo-authorization'], undefined);
  t.regex(result.headers['www-authenticate'] ?? '', /\[redacted\]/);
  t.regex(result.headers.location ?? '', /\[redacted\]/);
  t.is(Object.keys(result.headers).filter((k) => k.startsWith('x-ratelimit-')).length, 0);
});

test('a 3xx from the echo upstream goes back unfollowed and scrubbed', async (t) => {
  const up = await echoUpstream();
  t.teardown(up.close);
  const secret = Buffer.from(`MARKER-${randomBytes(16).toString('hex')}`);
  const result = await callApi(`http://127.0.0.1:${up.port}/v1`, '/redirect', undefined, undefined, secret);
  t.is(result.status, 302);
  t.is(up.received.length, 1);
  t.is(result.headers.location, `https://elsewhere.example/cb?token=${REDACTED}`);
  t.is(findLeak(JSON.stringify(result), secret), undefined);
});

test('the agent cannot override the injected Authorization or the credential header', async (t) => {
  const up = await echoUpstream();
  t.teardown(up.close);
  const secret = Buffer.from(`MARKER-${randomBytes(16).toString('hex')}`);
  const attempts: Record<string, string>[] = [{ Authorization: 'Bearer mine' }, { 'X-Api-Key': 'mine' }, { Host: 'evil.example' }, { 'x-amz-security-token': 'x' }];
  for (const h of attempts) {
    const err = await t.throwsAsync(callApi(`http://127.0.0.1:${up.port}/v1`, '/x', h, undefined, secret));
    t.is((err as { code?: string }).code, 'CUSTOS_ERR_HEADER_REFUSED');
  }
  t.is(up.received.length, 0);
});

/** An upstream that answers `pad` followed by the x-api-key it received and a tail. */
async function appendingUpstream(pad: string): Promise<{ port: number; close(): void }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`${pad}${String(req.headers['x-api-key'])}-tail`);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

test('truncation at maxResponseBytes cannot be aimed into the middle of the secret', async (t) => {
  const secret = Buffer.from(`MARKER-${randomBytes(16).toString('hex')}`);
  // An echo upstream lets the agent choose how much comes before the secret, hence where a
  // maxResponseBytes cut falls: every prefix length of the secret is tried.
  const pad = 'P'.repeat(100);
  const up = await appendingUpstream(pad);
  t.teardown(up.close);
  for (let keep = 1; keep < secret.length; keep++) {
    const result = await callApi(`http://127.0.0.1:${up.port}/v1`, '/', undefined, undefined, secret, pad.length + keep);
    t.true(result.truncated);
    const text = result.body as string;
    t.true(text.startsWith(pad));
    // Whatever is left after the padding is not the start of the secret (beyond one byte's chance).
    const rest = text.slice(pad.length).replace('…[truncated by custos]', '');
    t.true(rest.length <= 1 || !secret.toString().startsWith(rest), `keep=${keep}: ${rest}`);
    t.is(findLeak(text, secret), undefined, `keep=${keep}`);
  }
});

test('the preview cut happens after scrubbing, so it cannot split a secret either', async (t) => {
  const secret = Buffer.from(`MARKER-${randomBytes(16).toString('hex')}`);
  for (const before of [1, 3, 5, 9]) {
    // the scrubbed body is pad + '[redacted]' + '-tail': the preview cut lands inside the marker
    const pad = 'Q'.repeat(CONFIG.agentBodyPreviewBytes - before);
    const up = await appendingUpstream(pad);
    const result = await callApi(`http://127.0.0.1:${up.port}/v1`, '/', undefined, undefined, secret);
    up.close();
    t.true(result.truncated);
    t.is(result.encoding, 'text');
    const rest = (result.body as string).slice(pad.length);
    t.true(REDACTED.startsWith(rest.replace('…[truncated by custos]', '')), rest);
    t.is(findLeak(JSON.stringify(result), secret), undefined);
  }
});
