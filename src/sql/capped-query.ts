/**
 * One statement through PostgreSQL's extended protocol, fetching rows in batches from the unnamed
 * portal and stopping at a row and byte cap.
 *
 * Why a pg `Query` subclass rather than `SELECT * FROM (<sql>) LIMIT n+1`: wrapping changes the
 * statement (EXPLAIN and VALUES-with-ORDER-BY cannot be wrapped, and the guard would be checking a
 * different text from the one that runs), and a plain `client.query` would pull the whole result
 * into memory before any cap applied (`generate_series(1, 1e9)`). With `Execute(portal, rows=n)`
 * the server itself produces at most n rows per round trip; once the cap is reached we Sync and the
 * portal dies with the transaction (ROLLBACK), so the server stops computing too. This is what
 * pg-cursor does; the ~80 lines here avoid a dependency and keep the protocol details in one place.
 *
 * Protocol invariant: exactly one Sync per extended query, or the next query on the connection
 * would be matched with a stray ReadyForQuery. pg's `prepare()` sends Parse/Bind/Describe/Execute/
 * Flush (no Sync, because `rows` is set); we Sync on CommandComplete, EmptyQuery, an ErrorResponse,
 * or when we stop early at PortalSuspended. A Bind-time error raised in JavaScript is synced by
 * pg itself, so we do not sync for errors that did not come from the server.
 *
 * Multiple statements are impossible: a Parse message holds one statement and the server rejects
 * "cannot insert multiple commands into a prepared statement" (42601).
 *
 * The transaction setup travels in the same write as the statement (one round trip per call, like
 * a direct query): `BEGIN READ ONLY`, then one `SELECT set_config(…, true)` that sets the LOCAL
 * timeouts, then the agent's statement, all before the Sync. Each is its own Parse, so the
 * setup cannot be merged with or altered by the agent's text; if the setup fails, the statement is
 * skipped by the server (everything up to Sync is discarded after an error). The set_config
 * SELECT also takes the transaction's first snapshot, after which PostgreSQL refuses to switch it
 * to read-write ("must be set before any query"), even through a bare `SET transaction_read_only`.
 */
import pg from 'pg';
import { parserFor, typeName, type ValueParser } from './pg-types.ts';

/**
 * Rows asked for per Execute. Rows past a cap are dropped as they arrive (never accumulated), so
 * the batch size bounds wasted transfer, not memory; 1024 lets the default 1,000-row cap (plus
 * the one extra row that detects truncation) come back in a single round trip.
 */
export const FETCH_BATCH = 1024;

export interface CappedResult {
  columns: { name: string; type: string }[];
  rows: unknown[][];
  truncated: boolean;
  truncatedBy: 'rows' | 'bytes' | undefined;
  /** Size of the kept rows as received: DataRow message bytes (values plus a few bytes of framing per field). */
  bytes: number;
  /** e.g. "SELECT 3"; undefined when we stopped before the end */
  command: string | undefined;
}

interface FieldDesc { name: string; dataTypeID: number }
interface PgConnection {
  sync(): void;
  flush(): void;
  execute(opts: { portal: string; rows: number }): void;
  parse(opts: { text: string; name: string; types: unknown[] }): void;
  bind(opts: { portal: string; statement: string; values: unknown[]; valueMapper?: unknown }): void;
  describe(opts: { type: 'P' | 'S'; name: string }): void;
  stream: { cork?: () => void; uncork?: () => void };
}

/** Server-side limits set inside the transaction (SET LOCAL semantics). 0 disables a timeout. */
export interface TransactionTimeouts {
  statementTimeoutMs: number;
  lockTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
}

/** Setup statements executed before the agent's statement; their results are not rows. */
const SETUP_STEPS = 2;

const prepareValue = (pg as unknown as { utils: { prepareValue: (v: unknown) => unknown } }).utils.prepareValue;

/** A pg "submittable": pg's Client calls `submit` when the connection is free, then the handlers. */
export class CappedQuery {
  readonly done: Promise<CappedResult>;
  private resolveDone!: (r: CappedResult) => void;
  private rejectDone!: (e: unknown) => void;
  private fields: FieldDesc[] = [];
  private parsers: ValueParser[] = [];
  private kept: unknown[][] = [];
  private received = 0;
  private bytes = 0;
  private stopped = false;
  private truncatedBy: 'rows' | 'bytes' | undefined;
  private command: string | undefined;
  private settled = false;
  /** CommandCompletes seen: the first SETUP_STEPS belong to BEGIN and the timeouts. */
  private completed = 0;

  constructor(
    private readonly statement: string,
    private readonly params: unknown[],
    private readonly maxRows: number,
    private readonly maxBytes: number,
    private readonly timeouts: TransactionTimeouts,
  ) {
    for (const v of Object.values(timeouts)) {
      if (!Number.isSafeInteger(v) || v < 0) throw new Error('invalid transaction timeout');
    }
    this.done = new Promise<CappedResult>((resolve, reject) => {
      this.resolveDone = resolve;
      this.rejectDone = reject;
    });
    // The promise may be abandoned when the broker's timer fires first; never let that crash the process.
    this.done.catch(() => undefined);
  }

  /** Rows still to ask for: one beyond the cap, so that "exactly maxRows" is not reported as truncated. */
  private nextBatch(): number {
    return Math.min(FETCH_BATCH, this.maxRows + 1 - this.received);
  }

  /**
   * Writes the whole pipeline in one go (corked): setup, the statement, its first Execute — always
   * Parse/Bind/Execute, never the simple protocol (which runs every statement of a
   * multi-statement string), even without parameters.
   */
  submit(connection: PgConnection): Error | null {
    connection.stream.cork?.();
    try {
      connection.parse({ text: 'BEGIN READ ONLY', name: '', types: [] });
      connection.bind({ portal: '', statement: '', values: [] });
      connection.execute({ portal: '', rows: 0 });
      connection.parse({
        text: "SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true), " +
          "set_config('idle_in_transaction_session_timeout', $3, true)",
        name: '',
        types: [],
      });
      connection.bind({
        portal: '',
        statement: '',
        values: [String(this.timeouts.statementTimeoutMs), String(this.timeouts.lockTimeoutMs), String(this.timeouts.idleInTransactionTimeoutMs)],
      });
      connection.execute({ portal: '', rows: 0 });
      connection.parse({ text: this.statement, name: '', types: [] });
      connection.bind({ portal: '', statement: '', values: this.params, valueMapper: prepareValue });
      connection.describe({ type: 'P', name: '' });
      connection.execute({ portal: '', rows: this.nextBatch() });
      connection.flush();
    } catch (err) {
      // A parameter pg could not serialise (the executor validates params, so this is a backstop).
      // As pg's own prepare() does: Sync so the server answers with exactly one ReadyForQuery
      // (which still reaches this query), and fail the query. The executor then destroys the
      // connection, since part of the pipeline may have run.
      connection.sync();
      this.handleError(err instanceof Error ? err : new Error('could not send the query'), connection);
    } finally {
      connection.stream.uncork?.();
    }
    return null;
  }

  handleRowDescription(msg: { fields: FieldDesc[] }): void {
    this.fields = msg.fields;
    this.parsers = msg.fields.map((f) => parserFor(f.dataTypeID));
  }

  handleDataRow(msg: { fields: (string | null)[]; length?: number }): void {
    if (this.completed < SETUP_STEPS) return; // the set_config row
    this.received++;
    if (this.stopped) return;
    if (this.kept.length >= this.maxRows) {
      this.stop('rows');
      return;
    }
    const raw = msg.fields;
    // the DataRow message's wire length (bytes) when pg-protocol gives it; else count UTF-8 bytes
    let size = typeof msg.length === 'number' ? msg.length : 0;
    if (size === 0) for (const f of raw) if (f !== null) size += Buffer.byteLength(f, 'utf8');
    if (this.bytes + size > this.maxBytes) {
      this.stop('bytes');
      return;
    }
    this.bytes += size;
    const row = new Array<unknown>(raw.length);
    for (let i = 0; i < raw.length; i++) {
      const f = raw[i];
      row[i] = f === null || f === undefined ? null : (this.parsers[i] ?? String)(f);
    }
    this.kept.push(row);
  }

  private stop(by: 'rows' | 'bytes'): void {
    this.stopped = true;
    this.truncatedBy = by;
  }

  handlePortalSuspended(connection: PgConnection): void {
    if (this.stopped || this.nextBatch() <= 0) {
      if (!this.stopped) this.stop('rows');
      connection.sync();
      return;
    }
    connection.execute({ portal: '', rows: this.nextBatch() });
    connection.flush();
  }

  handleCommandComplete(msg: { command?: string; rowCount?: number | null }, connection: PgConnection): void {
    if (this.completed++ < SETUP_STEPS) return;
    this.command = msg.command === undefined ? undefined : `${msg.command}${msg.rowCount == null ? '' : ` ${msg.rowCount}`}`;
    connection.sync();
  }

  handleEmptyQuery(connection: PgConnection): void {
    connection.sync();
  }

  handleError(err: unknown, connection: PgConnection): void {
    // Only a server ErrorResponse leaves the server waiting for our Sync (see the invariant above).
    if (err instanceof pg.DatabaseError) {
      try {
        connection.sync();
      } catch {
        /* the socket is gone; the caller destroys the client */
      }
    }
    this.settle(() => this.rejectDone(err));
  }

  handleReadyForQuery(): void {
    this.settle(() =>
      this.resolveDone({
        columns: this.fields.map((f) => ({ name: f.name, type: typeName(f.dataTypeID) })),
        rows: this.kept,
        truncated: this.truncatedBy !== undefined,
        truncatedBy: this.truncatedBy,
        bytes: this.bytes,
        command: this.command,
      }),
    );
  }

  /** COPY … FROM STDIN: refuse to feed it (the guard refuses COPY; this is the backstop). */
  handleCopyInResponse(connection: { sendCopyFail(msg: string): void }): void {
    connection.sendCopyFail('query_db does not send COPY data');
  }

  /** COPY … TO STDOUT data is dropped: it is not rows, and the guard refuses COPY anyway. */
  handleCopyData(): void {}

  private settle(fn: () => void): void {
    if (this.settled) return;
    this.settled = true;
    fn();
  }
}
