/**
 * query_db's database layer: the real read-only boundary behind the parser (guard.ts).
 *
 * For each call, on a connection from the credential's pool:
 *   1. `BEGIN READ ONLY` and transaction-local statement_timeout / lock_timeout /
 *      idle_in_transaction_session_timeout: the server refuses writes (including writable CTEs,
 *      nextval/setval, SELECT INTO, EXPLAIN ANALYZE of a write, set_config of
 *      transaction_read_only after the first snapshot) and stops long statements itself;
 *   2. the statement alone, through the extended protocol (one statement per Parse), with row and
 *      byte caps applied while rows stream in; 1 and 2 go out in one write (capped-query.ts);
 *   3. a broker-side timer slightly longer than the statement timeout: if the server has not
 *      answered by then (network stall, a timeout the server did not honour) we send a protocol
 *      CancelRequest and destroy the connection;
 *   4. `ROLLBACK` plus the parts of DISCARD ALL (SESSION_RESET_SQL), so nothing the statement did
 *      to the session survives it (session advisory locks, settings, temp tables, prepared
 *      statements, LISTEN, sequences' currval); if the reset fails, or anything about the
 *      connection is in doubt, the connection is destroyed instead of returned to the pool.
 *
 * Errors come back as CustosErrors with safe text: the SQLSTATE plus the server's message with any
 * URL, the password, quoted data values (for data errors) and PII (masked) removed. Connection
 * failures get fixed messages that never include the DSN.
 */
import net from 'node:net';
import pg from 'pg';
import { CustosError } from '../errors.ts';
import { assertReadOnlySql } from './guard.ts';
import { CappedQuery } from './capped-query.ts';
import { maskText } from './mask.ts';

export interface QueryLimits {
  maxRows: number;
  maxBytes: number;
  statementTimeoutMs: number;
  connectTimeoutMs: number;
}

export interface QueryColumn {
  name: string;
  /** PostgreSQL type name (e.g. int4, text, jsonb), or `oid:<n>` for types we do not name. */
  type: string;
}

export interface QueryResult {
  columns: QueryColumn[];
  rows: unknown[][];
  rowCount: number;
  truncated: boolean;
  truncatedBy?: 'rows' | 'bytes';
  statementType: string;
  durationMs: number;
}

/** Anything that hands out pg pool clients (a pg.Pool, or our DatabasePool). */
export interface ClientSource {
  connect(): Promise<pg.PoolClient>;
}

/** What the executor needs from a connection owner beyond clients: secret redaction. */
export interface RedactingSource extends ClientSource {
  /** Removes the credential's password (and anything else secret) from a text. */
  redact(text: string): string;
  /** Told about each background session reset, so the owner can wait for them (close, tests). */
  trackReset?(reset: Promise<void>): void;
}

/** Milliseconds the broker waits beyond the server's statement_timeout before cancelling itself. */
export const BROKER_TIMEOUT_GRACE_MS = 1000;
/** Most parameters accepted for one statement. */
export const MAX_PARAMS = 1000;

function validateLimits(limits: QueryLimits): void {
  for (const key of ['maxRows', 'maxBytes', 'statementTimeoutMs', 'connectTimeoutMs'] as const) {
    const v = limits[key];
    if (!Number.isSafeInteger(v) || v <= 0) {
      throw new CustosError('CUSTOS_ERR_VALIDATION', `query limit ${key} must be a positive integer.`);
    }
  }
}

/** Parameters are positional JSON scalars; anything else is refused before a connection is made. */
function validateParams(params: unknown): unknown[] {
  if (params === undefined || params === null) return [];
  if (!Array.isArray(params)) throw new CustosError('CUSTOS_ERR_VALIDATION', 'params must be an array.');
  if (params.length > MAX_PARAMS) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', `at most ${MAX_PARAMS} params are accepted.`);
  }
  return params.map((p, i) => {
    if (p === null || typeof p === 'string' || typeof p === 'boolean') return p;
    if (typeof p === 'number' && Number.isFinite(p)) return p;
    throw new CustosError('CUSTOS_ERR_VALIDATION', `params[${i}] must be a string, a finite number, a boolean or null.`);
  });
}

/**
 * Guard, then run, one read-only statement. Throws CUSTOS_ERR_SQL_REFUSED (guard or database
 * refusal), CUSTOS_ERR_QUERY_TIMEOUT, CUSTOS_ERR_DATABASE or CUSTOS_ERR_VALIDATION. Rows are NOT
 * masked here: callers use DatabasePool.query (guard + run + mask) or call maskRows themselves.
 */
export async function runReadOnlyQuery(
  conn: ClientSource | { connectionString: string },
  sql: string,
  params: unknown[],
  limits: QueryLimits,
): Promise<QueryResult> {
  const verdict = assertReadOnlySql(sql);
  return executeUnguarded(conn, sql, params, limits, verdict.statementType);
}

/**
 * The database layer without the parser in front. Internal: exported so the refusal tests can show
 * that the database alone refuses writes (defence in depth). Never call it with agent SQL.
 */
export async function executeUnguarded(
  conn: ClientSource | { connectionString: string },
  sql: string,
  params: unknown[],
  limits: QueryLimits,
  statementType = 'UNCHECKED',
  testOptions: { serverTimeout?: boolean } = {},
): Promise<QueryResult> {
  validateLimits(limits);
  const values = validateParams(params);
  if ('connectionString' in conn) {
    // One-off use (CLI helpers, tests): a single-connection pool that is closed afterwards.
    const { DatabasePool } = await import('./pool.ts');
    const pool = new DatabasePool(conn.connectionString, { poolSize: 1, connectTimeoutMs: limits.connectTimeoutMs });
    try {
      return await executeUnguarded(pool, sql, values, limits, statementType, testOptions);
    } finally {
      await pool.close();
    }
  }
  const redact = 'redact' in conn && typeof conn.redact === 'function' ? (t: string) => (conn as RedactingSource).redact(t) : (t: string) => t;
  const started = performance.now();

  let client: pg.PoolClient;
  try {
    client = await acquire(conn, limits.connectTimeoutMs);
  } catch (err) {
    throw connectError(err);
  }

  // A socket error on a checked-out client is emitted as 'error'; without a listener it would crash
  // the process. The failure still reaches us through the pending query.
  const onClientError = (): void => undefined;
  client.on('error', onClientError);
  let released = false;
  const release = (destroy: boolean): void => {
    if (released) return;
    released = true;
    client.removeListener('error', onClientError);
    client.release(destroy ? new Error('query_db: connection discarded') : undefined);
  };

  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const brokerDeadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      // Cancel on the server (the backend keeps running otherwise until it next writes to us),
      // then drop the connection: its state is unknown, it never goes back to the pool.
      sendCancelRequest(client);
      release(true);
      reject(timeoutError(limits.statementTimeoutMs));
    }, limits.statementTimeoutMs + BROKER_TIMEOUT_GRACE_MS);
  });
  brokerDeadline.catch(() => undefined);

  const work = (async (): Promise<QueryResult> => {
    const serverTimeout = testOptions.serverTimeout === false ? 0 : limits.statementTimeoutMs;
    const query = new CappedQuery(sql, values, limits.maxRows, limits.maxBytes, {
      statementTimeoutMs: serverTimeout,
      lockTimeoutMs: serverTimeout,
      idleInTransactionTimeoutMs: limits.statementTimeoutMs + 2 * BROKER_TIMEOUT_GRACE_MS,
    });
    client.query(query as unknown as pg.Submittable);
    let result;
    try {
      result = await query.done;
    } catch (err) {
      if (!timedOut) await resetOrDestroy(client, release, err instanceof pg.DatabaseError);
      throw err;
    }
    // The result is complete and the transaction read-only: there is nothing left to wait for, so
    // the reset (SESSION_RESET_SQL) runs after we answer. The connection only goes back to the
    // pool once the reset has succeeded (or is destroyed), so no later call can see its state.
    const reset = resetOrDestroy(client, release, true);
    (conn as Partial<RedactingSource>).trackReset?.(reset);
    return {
      columns: result.columns,
      rows: result.rows,
      rowCount: result.rows.length,
      truncated: result.truncated,
      ...(result.truncatedBy ? { truncatedBy: result.truncatedBy } : {}),
      statementType,
      durationMs: Math.round((performance.now() - started) * 10) / 10,
    };
  })();
  work.catch(() => undefined);

  try {
    return await Promise.race([work, brokerDeadline]);
  } catch (err) {
    if (timedOut) throw timeoutError(limits.statementTimeoutMs);
    release(true);
    throw queryError(err, redact, limits.statementTimeoutMs);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Everything DISCARD ALL does, as statements that may share one simple-protocol message with the
 * ROLLBACK (DISCARD ALL itself refuses to run in the implicit transaction a multi-statement
 * message opens): one round trip instead of two. ROLLBACK already undoes settings changed in the
 * transaction (SET, set_config, SET ROLE); the rest clears what survives a rollback.
 */
export const SESSION_RESET_SQL = [
  'ROLLBACK',
  'SELECT pg_advisory_unlock_all()', // session-level advisory locks survive ROLLBACK
  'DEALLOCATE ALL', // PREPARE is not transactional
  'CLOSE ALL',
  'UNLISTEN *',
  'RESET ALL',
  'RESET ROLE',
  'SET SESSION AUTHORIZATION DEFAULT',
  'DISCARD SEQUENCES',
  'DISCARD TEMP',
  'DISCARD PLANS',
].join('; ');

/**
 * Resets the session and returns the client to the pool; destroys it instead if the reset fails
 * or the connection is not known to be healthy.
 */
async function resetOrDestroy(client: pg.PoolClient, release: (destroy: boolean) => void, healthy: boolean): Promise<void> {
  if (!healthy) {
    release(true);
    return;
  }
  // A reset that does not come back promptly (stalled network) must not hold the pool slot.
  const stalled = setTimeout(() => release(true), RESET_TIMEOUT_MS);
  try {
    await client.query(SESSION_RESET_SQL);
    release(false);
  } catch {
    release(true);
  } finally {
    clearTimeout(stalled);
  }
}

const RESET_TIMEOUT_MS = 5000;

/** PostgreSQL CancelRequest (protocol §55.2.9): a 16-byte message on a fresh socket, no auth. */
function sendCancelRequest(client: pg.PoolClient): void {
  const c = client as unknown as { processID?: unknown; secretKey?: unknown; host?: unknown; port?: unknown };
  if (typeof c.processID !== 'number') return;
  const key = c.secretKey;
  const keyBytes = typeof key === 'number' ? (() => { const b = Buffer.alloc(4); b.writeInt32BE(key); return b; })()
    : Buffer.isBuffer(key) ? key : undefined;
  if (!keyBytes) return;
  const msg = Buffer.alloc(12 + keyBytes.length);
  msg.writeInt32BE(msg.length, 0);
  msg.writeInt32BE(80877102, 4);
  msg.writeInt32BE(c.processID, 8);
  keyBytes.copy(msg, 12);
  const host = typeof c.host === 'string' ? c.host : '127.0.0.1';
  const port = typeof c.port === 'number' ? c.port : Number(c.port ?? 5432);
  const socket = host.startsWith('/') ? net.connect(`${host}/.s.PGSQL.${port}`) : net.connect(port, host);
  socket.setTimeout(5000, () => socket.destroy());
  socket.on('error', () => socket.destroy());
  socket.on('connect', () => socket.end(msg));
}

/** Gets a client within `ms`; a client that arrives after we gave up goes straight back (destroyed). */
async function acquire(source: ClientSource, ms: number): Promise<pg.PoolClient> {
  let gaveUp = false;
  let timer: NodeJS.Timeout | undefined;
  const pending = source.connect();
  pending.then((c) => { if (gaveUp) c.release(true); }, () => undefined);
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      gaveUp = true;
      reject(Object.assign(new Error('connect timeout'), { code: 'CUSTOS_CONNECT_TIMEOUT' }));
    }, ms);
  });
  try {
    return await Promise.race([pending, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function timeoutError(ms: number): CustosError {
  return new CustosError('CUSTOS_ERR_QUERY_TIMEOUT',
    `The query ran longer than the ${ms} ms limit and was cancelled. Narrow it (WHERE, LIMIT) or ask for a higher limit.`);
}

// ---------------------------------------------------------------------------------------------
// error mapping

/** SQLSTATE classes whose messages can quote data values (22 data exception, 23 integrity, P0 raise, XX internal). */
const DATA_QUOTING_CLASSES = new Set(['22', '23', 'P0', 'XX', '38', '39', '2F', '40']);
const URL_RE = /\b[a-z][a-z0-9+.-]*:\/\/\S+/gi;
const MAX_MESSAGE = 300;

/** The server's message made safe to show an agent. */
export function sanitizeDbMessage(code: string, message: string, redact: (t: string) => string = (t) => t): string {
  let text = redact(String(message)).replace(URL_RE, '[redacted]');
  if (DATA_QUOTING_CLASSES.has(code.slice(0, 2))) {
    // e.g. invalid input syntax for type integer: "the value from a row" → the value is gone
    text = text.replace(/"(?:[^"]|"")*"/g, '"…"').replace(/'(?:[^']|'')*'/g, "'…'");
  }
  text = maskText(text).text;
  if (text.length > MAX_MESSAGE) text = `${text.slice(0, MAX_MESSAGE)}…`;
  return text;
}

function queryError(err: unknown, redact: (t: string) => string, timeoutMs: number): CustosError {
  if (err instanceof CustosError) return err;
  if (err instanceof pg.DatabaseError) {
    const code = typeof err.code === 'string' ? err.code : 'XX000';
    if (code === '57014') return timeoutError(timeoutMs); // statement_timeout / cancel
    if (code === '55P03') {
      return new CustosError('CUSTOS_ERR_QUERY_TIMEOUT', 'The query waited too long for a lock and was cancelled.');
    }
    const position = err.position && /^\d+$/.test(err.position) ? ` (at character ${err.position})` : '';
    const text = `database error ${code}: ${sanitizeDbMessage(code, err.message, redact)}${position}`;
    if (code === '25006') {
      // read_only_sql_transaction: the database itself refused a write the parser let through
      return new CustosError('CUSTOS_ERR_SQL_REFUSED', `query_db runs read-only queries only: the database refused a write (${text}).`);
    }
    if (code.startsWith('08') || code.startsWith('57P') || code.startsWith('28') || code === '3D000' || code === '53300') {
      return connectError(err);
    }
    return new CustosError('CUSTOS_ERR_DATABASE', text, { details: { sqlstate: code } });
  }
  return connectError(err);
}

/** Fixed, DSN-free messages for anything that is not a statement error. */
export function connectError(err: unknown): CustosError {
  if (err instanceof CustosError) return err;
  const e = err as { code?: unknown; message?: unknown } | undefined;
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = typeof e?.message === 'string' ? e.message : '';
  let text: string;
  if (code === 'ECONNREFUSED') text = 'could not connect to the database server (connection refused).';
  else if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') text = 'could not resolve the database host name.';
  else if (code === 'ETIMEDOUT' || code === 'CUSTOS_CONNECT_TIMEOUT' || /timeout/i.test(message)) {
    text = 'connecting to the database timed out.';
  } else if (code === 'ECONNRESET' || code === 'EPIPE' || /terminated|closed|ended/i.test(message)) {
    text = 'the database connection was lost.';
  } else if (code === '28P01' || code === '28000') text = 'the database refused the credential (authentication failed).';
  else if (code === '3D000') text = 'the database named in the credential does not exist.';
  else if (code === '53300') text = 'the database has too many connections; try again shortly.';
  else if (code === '57P03') text = 'the database is starting up or shutting down; try again shortly.';
  else if (code.startsWith('57P')) text = 'the database server ended the session (administrator command or shutdown).';
  else if (/ssl|tls|certificate/i.test(message) || code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL')) {
    text = 'the TLS connection to the database failed (check sslmode and the server certificate).';
  } else text = 'could not connect to the database.';
  return new CustosError('CUSTOS_ERR_DATABASE', `Database unavailable: ${text}`, { cause: err });
}
