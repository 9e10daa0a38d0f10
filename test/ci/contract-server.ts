/**
 * A local stand-in for the service side of POST /api/v1/ci/secrets, implementing the contract the
 * lead's route serves (issue 6): Bearer custos_ci_… → 200 {workspace, credentials} | 401 | 403 |
 * 404 with {"error": {code, message}}. It records every request so tests can check what the client
 * sent. The end-to-end test against the real service is the lead's (test/e2e).
 */
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { CiCredential } from '../../src/ci/contract.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** A well-formed CI token (shape only: the stand-in does not check a checksum). */
export function ciToken(): string {
  let s = '';
  for (const b of randomBytes(38)) s += BASE62[b % 62];
  return `custos_ci_${s}`;
}

/** A marker secret: if it shows up where it must not, the test says so. */
export function marker(label = 'MARKER'): string {
  return `${label}-${randomBytes(9).toString('hex')}`;
}

export interface Grant {
  /** 200 with these credentials, or an error status. */
  status: 200 | 401 | 403 | 404 | 500;
  credentials?: CiCredential[];
  workspace?: { id: string; name: string };
}

export interface RecordedRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  body: unknown;
}

export interface ContractServer {
  url: string;
  requests: RecordedRequest[];
  /** What the server answers for `token`; unknown tokens get 401. */
  grant(token: string, grant: Grant): void;
  close(): Promise<void>;
}

const ERRORS: Record<number, { code: string; message: string }> = {
  401: { code: 'CUSTOS_ERR_TOKEN_INVALID', message: 'The CI token is invalid, revoked or expired.' },
  403: { code: 'CUSTOS_ERR_FORBIDDEN', message: 'The CI token\'s creator no longer holds reveal on this workspace.' },
  404: { code: 'CUSTOS_ERR_NOT_FOUND', message: 'Workspace or credential not found.' },
  500: { code: 'CUSTOS_ERR_INTERNAL', message: 'Internal error.' },
};

export async function startContractServer(): Promise<ContractServer> {
  const grants = new Map<string, Grant>();
  const requests: RecordedRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        body = undefined;
      }
      requests.push({ method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization, body });
      const send = (status: number, json: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(json));
      };
      if (req.method !== 'POST' || req.url !== '/api/v1/ci/secrets') return send(404, { error: ERRORS[404] });
      const token = /^Bearer (custos_ci_[0-9A-Za-z]+)$/.exec(req.headers.authorization ?? '')?.[1];
      const grant = token ? grants.get(token) : undefined;
      if (!grant) return send(401, { error: ERRORS[401] });
      if (grant.status !== 200) return send(grant.status, { error: ERRORS[grant.status] });
      const request = (body ?? {}) as { workspace?: string; only?: string[] };
      const workspace = grant.workspace ?? { id: 'ws_1', name: 'ci' };
      if (request.workspace !== undefined && request.workspace !== workspace.id && request.workspace !== workspace.name) {
        return send(404, { error: ERRORS[404] });
      }
      let credentials = grant.credentials ?? [];
      if (request.only) {
        const unknown = request.only.filter((n) => !credentials.some((c) => c.name === n));
        if (unknown.length > 0) return send(404, { error: { code: 'CUSTOS_ERR_NOT_FOUND', message: `Credential "${unknown[0]}" not found.` } });
        credentials = credentials.filter((c) => request.only!.includes(c.name));
      }
      send(200, { workspace, credentials });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    grant: (token, grant) => void grants.set(token, grant),
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

/** Shorthand for a credential in the contract's shape. */
export function cred(name: string, authScheme: string, secret: Record<string, string>, extra: Partial<CiCredential> = {}): CiCredential {
  return { id: `cred_${name.replace(/\W/g, '_')}`, name, authScheme, envName: null, config: {}, secret, ...extra };
}
