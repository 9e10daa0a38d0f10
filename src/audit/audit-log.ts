/**
 * The append-only audit log. Two ways in, one chain logic:
 *  - appendInTx(em, …): inside the caller's transaction, for state changes, so the change and its
 *    record commit together (a change is never left unaudited);
 *  - append(…): for uses and denials (no state change). Appends are group-committed: everything that
 *    arrives while one batch is being written goes into the next transaction. The promise settles
 *    only after the record is durable, and callers return their result only after that (fail closed).
 * The chain head row is locked (FOR UPDATE on PostgreSQL; SQLite serialises transactions), so several
 * nodes can append to one chain without forking it.
 */
import { randomUUID } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import { CustosError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { Database, SqliteHandle } from '../storage/data-source.ts';
import type { AuditEventRow } from '../storage/entities.ts';
import { GENESIS_HASH, hashEntry, type AuditActor, type AuditEntry, type AuditRecord, type AuditTarget, type Outcome } from './chain.ts';

export interface AuditInput {
  chain: string;
  actor: AuditActor;
  action: string;
  target: AuditTarget;
  outcome: Outcome;
  details?: Record<string, unknown>;
}

export const workspaceChain = (workspaceId: string): string => `ws:${workspaceId}`;
export const orgChain = (orgId: string): string => `org:${orgId}`;

interface Pending {
  input: AuditInput;
  resolve: (r: AuditRecord) => void;
  reject: (e: unknown) => void;
}

const MAX_BATCH = 1000;

const COLS = ['chain_id', 'seq', 'id', 'at', 'actor', 'action', 'target', 'outcome', 'details', 'prev_hash', 'hash'] as const;

/** Chains the inputs onto the given heads (which it advances) and hashes each entry. */
function buildRecords(inputs: AuditInput[], heads: Map<string, { seq: number; hash: string }>): AuditRecord[] {
  const records: AuditRecord[] = [];
  const now = new Date().toISOString();
  for (const input of inputs) {
    const head = heads.get(input.chain)!;
    const entry: AuditEntry = {
      chain: input.chain, seq: head.seq + 1, id: randomUUID(), at: now, actor: input.actor,
      action: input.action, target: input.target, outcome: input.outcome, details: input.details ?? {},
    };
    const hash = hashEntry(head.hash, entry);
    records.push({ ...entry, prevHash: head.hash, hash });
    heads.set(input.chain, { seq: entry.seq, hash });
  }
  return records;
}

function toRow(r: AuditRecord): AuditEventRow {
  return {
    chain_id: r.chain, seq: r.seq, id: r.id, at: r.at, actor: JSON.stringify(r.actor), action: r.action,
    target: JSON.stringify(r.target), outcome: r.outcome, details: JSON.stringify(r.details), prev_hash: r.prevHash, hash: r.hash,
  };
}

export function rowToRecord(row: AuditEventRow): AuditRecord {
  return {
    chain: row.chain_id, seq: Number(row.seq), id: row.id, at: row.at, actor: JSON.parse(row.actor) as AuditActor,
    action: row.action, target: JSON.parse(row.target) as AuditTarget, outcome: row.outcome as Outcome,
    details: JSON.parse(row.details) as Record<string, unknown>, prevHash: row.prev_hash, hash: row.hash,
  };
}

export class AuditLog {
  readonly #db: Database;
  readonly #log: Logger;
  #queue: Pending[] = [];
  #flushing: Promise<void> | null = null;

  constructor(db: Database, log: Logger) {
    this.#db = db;
    this.#log = log;
  }

  /** Group-committed append; resolves once durable. Rejects with CUSTOS_ERR_AUDIT_UNAVAILABLE. */
  append(input: AuditInput): Promise<AuditRecord> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ input, resolve, reject });
      if (!this.#flushing) this.#flushing = this.#drain();
    });
  }

  /** Appends within an open transaction (state changes). */
  async appendInTx(em: EntityManager, input: AuditInput): Promise<AuditRecord> {
    const [rec] = await this.#write(em, [input]);
    return rec!;
  }

  /** Waits for queued appends (shutdown, tests). */
  async flush(): Promise<void> {
    while (this.#flushing) await this.#flushing;
  }

  async #drain(): Promise<void> {
    // Let the current tick's appends join the batch.
    await new Promise<void>((r) => setImmediate(r));
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0, MAX_BATCH);
        try {
          const inputs = batch.map((b) => b.input);
          const records = this.#db.sqlite
            ? await this.#db.serialize(() => this.#writeSqlite(inputs))
            : await this.#db.tx((em) => this.#write(em, inputs));
          batch.forEach((b, i) => b.resolve(records[i]!));
        } catch (err) {
          this.#log.error({ err }, 'audit append failed; the operations waiting on it are refused');
          const refused = new CustosError('CUSTOS_ERR_AUDIT_UNAVAILABLE', 'The audit log is unavailable; the operation was refused.', { cause: err });
          batch.forEach((b) => b.reject(refused));
        }
      }
    } finally {
      this.#flushing = null;
    }
  }

  async #lockHead(em: EntityManager, chain: string): Promise<{ seq: number; hash: string }> {
    const p = this.#db.p;
    const sel = `SELECT last_seq, last_hash FROM audit_chains WHERE id = ${p(1)}${this.#db.dialect === 'postgres' ? ' FOR UPDATE' : ''}`;
    let rows = (await em.query(sel, [chain])) as Array<{ last_seq: number | string; last_hash: string }>;
    if (rows.length === 0) {
      const ins = this.#db.dialect === 'postgres'
        ? `INSERT INTO audit_chains (id, last_seq, last_hash) VALUES ($1, 0, $2) ON CONFLICT (id) DO NOTHING`
        : `INSERT OR IGNORE INTO audit_chains (id, last_seq, last_hash) VALUES (?, 0, ?)`;
      await em.query(ins, [chain, GENESIS_HASH]);
      rows = (await em.query(sel, [chain])) as typeof rows;
    }
    const row = rows[0]!;
    return { seq: Number(row.last_seq), hash: row.last_hash };
  }

  async #write(em: EntityManager, inputs: AuditInput[]): Promise<AuditRecord[]> {
    const heads = new Map<string, { seq: number; hash: string }>();
    // Lock heads in a stable order so two writers never deadlock on each other's chains.
    for (const chain of [...new Set(inputs.map((i) => i.chain))].sort()) heads.set(chain, await this.#lockHead(em, chain));
    const records = buildRecords(inputs, heads);
    const rows = records.map(toRow);
    const p = this.#db.p;
    // Raw multi-row INSERT: on the hot path (every use is audited) TypeORM's query builder costs
    // more than the insert itself.
    for (let i = 0; i < rows.length; i += 80) {
      const chunk = rows.slice(i, i + 80);
      const params: unknown[] = [];
      const tuples = chunk.map((row) => `(${COLS.map((c) => {
        params.push(row[c]);
        return p(params.length);
      }).join(', ')})`);
      await em.query(`INSERT INTO audit_events (${COLS.join(', ')}) VALUES ${tuples.join(', ')}`, params);
    }
    for (const [chain, head] of heads) {
      await em.query(`UPDATE audit_chains SET last_seq = ${p(1)}, last_hash = ${p(2)} WHERE id = ${p(3)}`, [head.seq, head.hash, chain]);
    }
    return records;
  }

  #sqliteStatements?: { head: ReturnType<SqliteHandle['prepare']>; newHead: ReturnType<SqliteHandle['prepare']>; insert: ReturnType<SqliteHandle['prepare']>; setHead: ReturnType<SqliteHandle['prepare']> };

  /**
   * SQLite: the whole batch as one synchronous better-sqlite3 transaction with prepared statements
   * (called under the database's transaction mutex, so it never interleaves with a TypeORM one).
   * Same chain logic as #write, a fraction of the cost on the path every use takes.
   */
  #writeSqlite(inputs: AuditInput[]): AuditRecord[] {
    const h = this.#db.sqlite!;
    const st = (this.#sqliteStatements ??= {
      head: h.prepare('SELECT last_seq, last_hash FROM audit_chains WHERE id = ?'),
      newHead: h.prepare('INSERT OR IGNORE INTO audit_chains (id, last_seq, last_hash) VALUES (?, 0, ?)'),
      insert: h.prepare(`INSERT INTO audit_events (${COLS.join(', ')}) VALUES (${COLS.map(() => '?').join(', ')})`),
      setHead: h.prepare('UPDATE audit_chains SET last_seq = ?, last_hash = ? WHERE id = ?'),
    });
    return h.transaction(() => {
      const heads = new Map<string, { seq: number; hash: string }>();
      for (const chain of new Set(inputs.map((i) => i.chain))) {
        let row = st.head.get(chain) as { last_seq: number; last_hash: string } | undefined;
        if (!row) {
          st.newHead.run(chain, GENESIS_HASH); // a chain's first entry (one write fewer on every other batch)
          row = st.head.get(chain) as { last_seq: number; last_hash: string };
        }
        heads.set(chain, { seq: Number(row.last_seq), hash: row.last_hash });
      }
      const records = buildRecords(inputs, heads);
      for (const r of records) {
        const row = toRow(r);
        st.insert.run(...COLS.map((c) => row[c]));
      }
      for (const [chain, head] of heads) st.setHead.run(head.seq, head.hash, chain);
      return records;
    })();
  }

  /** Lists a chain's entries, newest first, for the API. */
  async list(chain: string, opts: { limit: number; beforeSeq?: number }): Promise<AuditRecord[]> {
    const p = this.#db.p;
    const params: unknown[] = [chain];
    let where = `chain_id = ${p(1)}`;
    if (opts.beforeSeq !== undefined) {
      params.push(opts.beforeSeq);
      where += ` AND seq < ${p(2)}`;
    }
    const rows = (await this.#db.dataSource.query(
      `SELECT * FROM audit_events WHERE ${where} ORDER BY seq DESC LIMIT ${Math.max(1, Math.min(opts.limit, 1000))}`, params,
    )) as AuditEventRow[];
    return rows.map(rowToRecord);
  }

  /** Streams every entry of the given chains (all chains when none) in chain order, as JSON Lines. */
  async *exportJsonLines(chains?: string[]): AsyncGenerator<string> {
    const p = this.#db.p;
    const list = chains ?? ((await this.#db.dataSource.query('SELECT id FROM audit_chains ORDER BY id')) as Array<{ id: string }>).map((r) => r.id);
    for (const chain of list) {
      // Read the head first and export up to it, so appends racing the export cannot make the
      // trailer disagree with the entries before it.
      const head = (await this.#db.dataSource.query(`SELECT last_seq, last_hash FROM audit_chains WHERE id = ${p(1)}`, [chain])) as Array<{
        last_seq: number | string; last_hash: string;
      }>;
      if (!head[0]) continue;
      const lastSeq = Number(head[0].last_seq);
      let after = 0;
      while (after < lastSeq) {
        const rows = (await this.#db.dataSource.query(
          `SELECT * FROM audit_events WHERE chain_id = ${p(1)} AND seq > ${p(2)} AND seq <= ${p(3)} ORDER BY seq ASC LIMIT 1000`,
          [chain, after, lastSeq],
        )) as AuditEventRow[];
        if (rows.length === 0) break;
        for (const row of rows) yield `${JSON.stringify(rowToRecord(row))}\n`;
        after = Number(rows[rows.length - 1]!.seq);
      }
      yield `${JSON.stringify({ type: 'chain_head', chain, lastSeq, lastHash: head[0].last_hash })}\n`;
    }
  }
}
