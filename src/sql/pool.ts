/**
 * A small pg connection pool for ONE database credential. The workspace actor creates one per
 * `database` credential on first use, and closes it when the actor passivates or the credential's
 * secret changes (so a rotated password is never used with stale connections, and a removed
 * credential leaves no open sessions).
 *
 * Secret handling, honestly: the DSN arrives as a Buffer and is parsed here; no DSN string is kept.
 * The password is held as a private Buffer copy and handed to pg through a password *function*, so
 * the pool's options never contain it; but pg, needing a string for the authentication exchange,
 * builds one per connection and keeps it on that connection's Client object for the connection's
 * life (strings cannot be zeroed). `close()` zeroes our Buffer and ends every connection.
 */
import pg from 'pg';
import { CustosError } from '../errors.ts';
import { parseDsn, type DsnTarget, type SslMode } from './dsn.ts';
import { executeUnguarded, type ClientSource, type QueryLimits, type QueryResult, type RedactingSource } from './executor.ts';
import { assertReadOnlySql } from './guard.ts';
import { maskRows, type MaskRules } from './mask.ts';

export interface DatabasePoolOptions {
  /** Connections kept at most (config queryDb.poolSize). */
  poolSize: number;
  connectTimeoutMs: number;
  /** Idle connections are closed after this long (default 30 s). */
  idleTimeoutMs?: number;
}

export interface MaskedQueryResult extends QueryResult {
  masked: { columns: string[]; values: number };
}

function sslOption(mode: SslMode | undefined): pg.ClientConfig['ssl'] {
  switch (mode) {
    case 'require':
      return { rejectUnauthorized: false }; // libpq "require": encrypted, server not verified
    case 'verify-ca':
      return { rejectUnauthorized: true, checkServerIdentity: () => undefined };
    case 'verify-full':
      return { rejectUnauthorized: true };
    default:
      // disable, and allow/prefer too: pg cannot fall back from TLS to plain text as libpq does,
      // so these mean "no TLS" (documented in docs/query-db.md).
      return false;
  }
}

export class DatabasePool implements RedactingSource {
  /** Non-secret description of the target (what `read` shows). */
  readonly target: DsnTarget;
  readonly #password: Buffer;
  readonly #pool: pg.Pool;
  readonly #resets = new Set<Promise<void>>();
  #closed = false;

  constructor(dsn: Buffer | string, options: DatabasePoolOptions) {
    if (!Number.isInteger(options.poolSize) || options.poolSize < 1) {
      throw new CustosError('CUSTOS_ERR_CONFIG', 'queryDb.poolSize must be a positive integer.');
    }
    const parsed = parseDsn(dsn); // throws CUSTOS_ERR_VALIDATION without echoing the DSN
    this.target = { host: parsed.host, port: parsed.port, database: parsed.database, user: parsed.user };
    this.#password = parsed.password;
    const password = this.#password;
    this.#pool = new pg.Pool({
      host: parsed.host,
      port: parsed.port,
      database: parsed.database,
      user: parsed.user,
      // Built at the last moment, per connection (see the file comment).
      password: () => password.toString('utf8'),
      ssl: sslOption(parsed.sslmode),
      application_name: parsed.applicationName ?? 'custos-query-db',
      max: options.poolSize,
      connectionTimeoutMillis: options.connectTimeoutMs,
      idleTimeoutMillis: options.idleTimeoutMs ?? 30_000,
      allowExitOnIdle: true,
    });
    // An idle connection the server drops emits 'error' on the pool; unhandled, it would crash the
    // process. The next checkout simply gets a fresh connection.
    this.#pool.on('error', () => undefined);
  }

  connect(): Promise<pg.PoolClient> {
    if (this.#closed) return Promise.reject(new CustosError('CUSTOS_ERR_UNAVAILABLE', 'The database connection pool is closed.'));
    return this.#pool.connect();
  }

  /** Removes the password (raw and percent-encoded) from a text. */
  redact(text: string): string {
    if (this.#closed || this.#password.length === 0) return text;
    let out = text;
    const pw = this.#password.toString('utf8'); // transient; dropped when this returns
    for (const form of new Set([pw, encodeURIComponent(pw)])) {
      if (form.length >= 3) out = out.split(form).join('[redacted]');
    }
    return out;
  }

  /**
   * The whole query_db database path: guard, run read-only with limits, mask every value.
   * This is what the actor calls.
   */
  async query(sql: string, params: unknown[], limits: QueryLimits, rules?: MaskRules): Promise<MaskedQueryResult> {
    const verdict = assertReadOnlySql(sql);
    const result = await executeUnguarded(this, sql, params, limits, verdict.statementType);
    const masked = maskRows(result.columns, result.rows, rules);
    return { ...result, rows: masked.rows, masked: { columns: masked.maskedColumns, values: masked.maskedValues } };
  }

  trackReset(reset: Promise<void>): void {
    this.#resets.add(reset);
    void reset.finally(() => this.#resets.delete(reset));
  }

  /** Resolves once every connection used so far has been reset and returned (or destroyed). */
  async settled(): Promise<void> {
    while (this.#resets.size > 0) await Promise.allSettled([...this.#resets]);
  }

  /** Pool counters (tests and metrics): connections open, idle, and callers waiting. */
  get stats(): { total: number; idle: number; waiting: number } {
    return { total: this.#pool.totalCount, idle: this.#pool.idleCount, waiting: this.#pool.waitingCount };
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Ends every connection and zeroes the password. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      await this.settled();
      await this.#pool.end();
    } finally {
      this.#password.fill(0);
    }
  }
}

export type { ClientSource };
