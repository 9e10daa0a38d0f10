/** A real HTTP upstream on 127.0.0.1 that records what it received and answers as the test says. */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

export type Handler = (req: Received, res: ServerResponse) => void;

/** Default handler: echo the request back as JSON (an upstream that reflects credentials). */
export const echo: Handler = (req, res) => {
  res.setHeader('content-type', 'application/json');
  res.setHeader('x-echo-auth', String(req.headers.authorization ?? ''));
  res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: req.body.toString('utf8') }));
};

export async function startUpstream(handler: Handler = echo): Promise<{ url: string; port: number; received: Received[]; setHandler(h: Handler): void; close(): Promise<void> }> {
  const received: Received[] = [];
  let current = handler;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: Received = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
      received.push(r);
      current(r, res);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`, port, received,
    setHandler: (h) => {
      current = h;
    },
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}
