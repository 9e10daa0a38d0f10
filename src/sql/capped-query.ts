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
}

export class CappedQuery extends pg.Query {
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

  constructor(text: string, values: unknown[], private readonly maxRows: number, private readonly maxBytes: number) {
    // rows: the first Execute fetches at most one batch; `queryMode: 'extended'` forces
    // Parse/Bind/Execute even without parameters (never the simple protocol, which runs
    // every statement in a multi-statement string).
    super({ text, values, rows: Math.min(FETCH_BATCH, maxRows + 1), queryMode: 'extended', rowMode: 'array' } as never);
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

  handleRowDescription(msg: { fields: FieldDesc[] }): void {
    this.fields = msg.fields;
    this.parsers = msg.fields.map((f) => parserFor(f.dataTypeID));
  }

  handleDataRow(msg: { fields: (string | null)[]; length?: number }): void {
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

  private settle(fn: () => void): void {
    if (this.settled) return;
    this.settled = true;
    fn();
  }
}
