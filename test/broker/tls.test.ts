/**
 * HTTPS through the guarded connector: the address is checked on the resolved IP while SNI and
 * certificate verification still use the URL's host name.
 */
import test from 'ava';
import https from 'node:https';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo, LookupFunction } from 'node:net';
import { sendOutbound, createBrokerAgent, closeBrokerAgents } from '../../src/broker/client.ts';
import { buildUpstreamUrl } from '../../src/broker/url.ts';
import { CustosError } from '../../src/errors.ts';

function selfSigned(dir: string, cn: string): { key: Buffer; cert: Buffer } {
  const key = join(dir, `${cn}.key`);
  const cert = join(dir, `${cn}.crt`);
  // openssl is a test dependency here (Debian's openssl package); without it this test fails.
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', `/CN=${cn}`, '-addext', `subjectAltName=DNS:${cn}`], { stdio: 'ignore' });
  return { key: readFileSync(key), cert: readFileSync(cert) };
}

test.after.always(async () => {
  await closeBrokerAgents();
});

const toLoopback = ((_h: string, o: { all?: boolean }, cb: (...a: unknown[]) => void) => {
  if (o.all) cb(null, [{ address: '127.0.0.1', family: 4 }]);
  else cb(null, '127.0.0.1', 4);
}) as unknown as LookupFunction;

test('HTTPS: SNI and certificate checks use the host name; a certificate for another name fails', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'custos-broker-tls-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const good = selfSigned(dir, 'api.example.test');
  const server = https.createServer({ key: good.key, cert: good.cert }, (req, res) => {
    res.end(`sni=${(req.socket as import('node:tls').TLSSocket).servername}`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const port = (server.address() as AddressInfo).port;
  // Test policy: nothing is blocked, so the loopback server stands in for a public one.
  const agent = createBrokerAgent({ allowPrivate: false, connectTimeoutMs: 1000, lookup: toLoopback, isBlocked: () => false, ca: good.cert });
  t.teardown(() => agent.close());
  const opts = { allowPrivate: false, timeoutMs: 3000, connectTimeoutMs: 1000, maxResponseBytes: 65536, dispatcher: agent };

  const resp = await sendOutbound({ method: 'GET', url: buildUpstreamUrl(`https://api.example.test:${port}`, '/'), headers: {}, body: undefined }, opts);
  t.is(resp.body.toString(), 'sni=api.example.test');

  // Same server, different name: the certificate does not match, the call fails safely.
  const err = await t.throwsAsync(
    sendOutbound({ method: 'GET', url: buildUpstreamUrl(`https://other.example.test:${port}`, '/'), headers: {}, body: undefined }, opts),
    { instanceOf: CustosError },
  );
  t.is(err!.code, 'CUSTOS_ERR_UPSTREAM');
  t.false(err!.message.includes('other.example.test'));
});

test('HTTPS with the real policy: a name resolving to loopback is refused before TLS', async (t) => {
  const err = await t.throwsAsync(
    sendOutbound(
      { method: 'GET', url: buildUpstreamUrl('https://api.example.test:1', '/'), headers: {}, body: undefined },
      { allowPrivate: true, timeoutMs: 3000, connectTimeoutMs: 1000, maxResponseBytes: 65536, lookup: toLoopback },
    ),
    { instanceOf: CustosError },
  );
  t.is(err!.code, 'CUSTOS_ERR_DESTINATION_REFUSED');
});
