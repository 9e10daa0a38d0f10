/**
 * The root pino logger. Two lines of defence keep secrets out of logs:
 *  1. allow-listing serializers: errors are logged as {type, code, message (only if CustosError)},
 *     requests as {method, path, id}, never whole objects that might carry a secret;
 *  2. redact paths for the places a careless call might still put one (headers, tokens, secrets).
 * The first is the real guarantee; the second is a safety net.
 */
import { pino, type Logger, type DestinationStream } from 'pino';
import { CustosError } from './errors.ts';

export type { Logger } from 'pino';

export const REDACT_PATHS = [
  'authorization', '*.authorization', 'headers.authorization', '*.headers.authorization',
  'cookie', '*.cookie', 'headers.cookie', '*.headers.cookie', 'headers["set-cookie"]',
  'headers["x-csrf-token"]', '*.headers["x-csrf-token"]',
  'password', '*.password', 'secret', '*.secret', 'token', '*.token', 'value', '*.value',
  'pin', '*.pin', 'dsn', '*.dsn', 'refreshToken', '*.refreshToken', 'privateKey', '*.privateKey',
];

/** Logs an error without its stack or arbitrary fields: code and message only when ours. */
export function serializeError(err: unknown): Record<string, unknown> {
  if (err instanceof CustosError) {
    return { type: 'CustosError', code: err.code, message: err.expose ? err.message : undefined };
  }
  if (err instanceof Error) {
    // Library errors can quote their input (a URL with userinfo, a DSN, a header). Keep the type
    // and the errno-style code only; the message goes to debug-level logs never.
    const code = (err as { code?: unknown }).code;
    return { type: err.name, code: typeof code === 'string' ? code : undefined };
  }
  return { type: typeof err };
}

export interface LogOptions {
  level?: string;
  /** A destination to capture output (tests scan it for marker secrets). */
  destination?: DestinationStream;
  name?: string;
}

export function createLogger(options: LogOptions = {}): Logger {
  return pino(
    {
      name: options.name ?? 'custos',
      level: options.level ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      serializers: { err: serializeError, error: serializeError },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination,
  );
}

/** A logger that drops everything; for library code used outside the service (e.g. the CLI). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
