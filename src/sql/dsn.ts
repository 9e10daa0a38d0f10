/**
 * Parsing and validation of a `database` credential's DSN:
 * `postgres://<user>:<password>@<host>[:<port>]/<database>[?sslmode=…]` (also `postgresql://`).
 *
 * Errors never echo the DSN or any part of it: a DSN carries a password, and a "your input was …"
 * message would put it in an API response, a log line and the agent's context. Messages name the
 * part that is wrong instead.
 *
 * The input is a Buffer (the actor's decrypted secret). WHATWG URL parsing needs a string, so one
 * is built inside `parseDsn` and dropped when it returns (JavaScript strings cannot be zeroed; this
 * is the "library insists on a string" case of DESIGN.md invariant 4).
 */
import { CustosError } from '../errors.ts';

export const DEFAULT_PG_PORT = 5432;

/** Query parameters accepted in a DSN. Anything else (options=-c …, host=…, sslcert=/path) is refused. */
export const ALLOWED_DSN_PARAMS = ['sslmode', 'application_name', 'connect_timeout'] as const;
export const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
export type SslMode = (typeof SSL_MODES)[number];

/** The non-secret half of a DSN: what `read` shows and what audit entries may name. */
export interface DsnTarget {
  host: string;
  port: number;
  database: string;
  user: string;
}

export interface ParsedDsn extends DsnTarget {
  /** UTF-8 bytes of the password; the caller owns and zeroes it. */
  password: Buffer;
  sslmode: SslMode | undefined;
  applicationName: string | undefined;
}

function invalid(why: string): never {
  throw new CustosError('CUSTOS_ERR_VALIDATION', `The database connection string is not valid: ${why}`);
}

function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    invalid(`the ${what} has a malformed percent-encoding.`);
  }
}

/** Parses and validates a DSN. Throws CUSTOS_ERR_VALIDATION (without echoing the input) when malformed. */
export function parseDsn(dsn: Buffer | string): ParsedDsn {
  const text = typeof dsn === 'string' ? dsn : dsn.toString('utf8');
  if (text.length === 0) invalid('it is empty.');
  if (text.length > 4096) invalid('it is longer than 4096 characters.');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\s]/.test(text)) invalid('it contains whitespace or control characters.');
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(text)?.[1]?.toLowerCase();
  if (scheme !== 'postgres' && scheme !== 'postgresql') {
    invalid('it must start with postgres:// or postgresql://.');
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    invalid('it is not a URL of the form postgres://user:password@host:port/database.');
  }
  if (url.hash) invalid('it must not contain a # fragment.');
  const user = decode(url.username, 'user name');
  const password = decode(url.password, 'password');
  if (!user) invalid('the user name is missing (postgres://user:password@host:port/database).');
  if (!password) invalid('the password is missing (postgres://user:password@host:port/database).');
  let host = url.hostname;
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (!host) invalid('the host is missing.');
  if (host.includes(',')) invalid('multiple hosts are not supported.');
  let port = DEFAULT_PG_PORT;
  if (url.port !== '') {
    port = Number(url.port);
    if (!Number.isInteger(port) || port < 1 || port > 65535) invalid('the port must be a number between 1 and 65535.');
  }
  const path = url.pathname;
  if (!path || path === '/') invalid('the database name is missing (…/database).');
  const database = decode(path.slice(1), 'database name');
  if (database.includes('/')) invalid('the database name must be a single path segment.');
  if (database.length > 63) invalid('the database name is longer than 63 characters.');

  let sslmode: SslMode | undefined;
  let applicationName: string | undefined;
  for (const [key, value] of url.searchParams) {
    if (!(ALLOWED_DSN_PARAMS as readonly string[]).includes(key)) {
      invalid(`the parameter "${key.slice(0, 40).replace(/[^A-Za-z0-9_.-]/g, '?')}" is not supported ` +
        `(allowed: ${ALLOWED_DSN_PARAMS.join(', ')}).`);
    }
    if (key === 'sslmode') {
      if (!(SSL_MODES as readonly string[]).includes(value)) invalid(`sslmode must be one of ${SSL_MODES.join(', ')}.`);
      sslmode = value as SslMode;
    } else if (key === 'application_name') {
      if (!/^[A-Za-z0-9 _.-]{0,63}$/.test(value)) invalid('application_name may hold letters, digits, space, _ . - (63 at most).');
      applicationName = value;
    } else if (key === 'connect_timeout') {
      // accepted for compatibility with libpq DSNs; the broker's own connect timeout applies
      if (!/^\d{1,6}$/.test(value)) invalid('connect_timeout must be a number of seconds.');
    }
  }
  return { host, port, database, user, password: Buffer.from(password, 'utf8'), sslmode, applicationName };
}

/** Validates a DSN and returns only its non-secret parts (the password Buffer is zeroed here). */
export function dsnTarget(dsn: Buffer | string): DsnTarget {
  const parsed = parseDsn(dsn);
  parsed.password.fill(0);
  return { host: parsed.host, port: parsed.port, database: parsed.database, user: parsed.user };
}
