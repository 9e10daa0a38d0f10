/**
 * A real OAuth2 authorization server on 127.0.0.1 (oauth2-mock-server), made strict enough for
 * refresh tests through its beforeResponse hook: it checks the client's credentials, accepts only
 * the current refresh token, rotates it on every use (if asked), counts token requests and lets a
 * test choose the access token and its lifetime or force an error.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { OAuth2Server } from 'oauth2-mock-server';

export interface AuthServerOptions {
  clientId: string;
  clientSecret: string;
  refreshToken: string;
  rotate?: boolean;
  expiresIn?: number;
  accessToken?: (n: number) => string;
}

export interface TokenRequestSeen {
  body: Record<string, string>;
  authorization: string | undefined;
}

export interface AuthServer {
  tokenUrl: string;
  tokenRequests: number;
  seen: TokenRequestSeen[];
  /** The refresh token the server will accept next. */
  validRefreshToken: string;
  /** Force the next answers: status and body. */
  forceError: { status: number; body: Record<string, unknown> } | undefined;
  stop(): Promise<void>;
}

function clientFrom(req: IncomingMessage, body: Record<string, string>): { id?: string; secret?: string } {
  const header = req.headers.authorization;
  if (header?.startsWith('Basic ')) {
    const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
    const i = decoded.indexOf(':');
    const dec = (s: string) => decodeURIComponent(s.replace(/\+/g, ' '));
    return { id: dec(decoded.slice(0, i)), secret: dec(decoded.slice(i + 1)) };
  }
  return { id: body.client_id, secret: body.client_secret };
}

export async function startAuthServer(options: AuthServerOptions): Promise<AuthServer> {
  const server = new OAuth2Server();
  await server.issuer.keys.generate('RS256');
  await server.start(0, '127.0.0.1');
  const state: AuthServer = {
    tokenUrl: `http://127.0.0.1:${server.address().port}/token`,
    tokenRequests: 0,
    seen: [],
    validRefreshToken: options.refreshToken,
    forceError: undefined,
    stop: () => server.stop(),
  };
  server.service.on('beforeResponse', (response: { body: Record<string, unknown>; statusCode: number }, req: IncomingMessage & { body: Record<string, string> }) => {
    state.tokenRequests += 1;
    const body = req.body;
    state.seen.push({ body: { ...body }, authorization: req.headers.authorization });
    const client = clientFrom(req, body);
    const fail = (status: number, error: string) => {
      response.statusCode = status;
      response.body = { error };
    };
    if (state.forceError) {
      response.statusCode = state.forceError.status;
      response.body = state.forceError.body;
    } else if (body.grant_type !== 'refresh_token') {
      fail(400, 'unsupported_grant_type');
    } else if (client.id !== options.clientId || client.secret !== options.clientSecret) {
      fail(401, 'invalid_client');
    } else if (body.refresh_token !== state.validRefreshToken) {
      fail(400, 'invalid_grant');
    } else {
      response.body.access_token = options.accessToken ? options.accessToken(state.tokenRequests) : `at-${state.tokenRequests}-${randomBytes(6).toString('hex')}`;
      response.body.expires_in = options.expiresIn ?? 3600;
      if (options.rotate ?? true) {
        state.validRefreshToken = `rt-${randomBytes(12).toString('hex')}`;
        response.body.refresh_token = state.validRefreshToken;
      } else {
        delete response.body.refresh_token;
      }
    }
  });
  return state;
}
