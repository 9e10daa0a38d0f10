/**
 * The audit hash chain (DESIGN.md §11). One chain per workspace (`ws:<id>`) and one per organization
 * (`org:<id>`) for account events. Each entry stores `prev_hash` and
 *   hash = SHA-256( prev_hash ‖ canonicalJson(entry without prev_hash and hash) )
 * so editing, deleting or reordering any entry breaks every hash after it. Verification needs
 * nothing but the exported file.
 */
import { createHash } from 'node:crypto';

export const GENESIS_HASH = '0'.repeat(64);

export type Outcome = 'success' | 'denied' | 'failure';

export interface AuditActor {
  type: 'account' | 'agent_token' | 'ssh_token' | 'ci_token' | 'system' | 'anonymous';
  id: string | null;
  /** For tokens: the account that created them. */
  creatorId?: string;
  ip?: string;
  requestId?: string;
}

export interface AuditTarget {
  type: string;
  id?: string;
  name?: string;
}

/** The hashed part of an entry. */
export interface AuditEntry {
  chain: string;
  seq: number;
  id: string;
  at: string;
  actor: AuditActor;
  action: string;
  target: AuditTarget;
  outcome: Outcome;
  details: Record<string, unknown>;
}

export interface AuditRecord extends AuditEntry {
  prevHash: string;
  hash: string;
}

/** JSON with object keys sorted at every depth, no whitespace; undefined members dropped. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) return 'null';
    return JSON.stringify(value) ?? 'null';
  }
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  const keys = Object.keys(value as Record<string, unknown>).filter((k) => (value as Record<string, unknown>)[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
}

export function hashEntry(prevHash: string, entry: AuditEntry): string {
  const body: AuditEntry = {
    chain: entry.chain, seq: entry.seq, id: entry.id, at: entry.at, actor: entry.actor,
    action: entry.action, target: entry.target, outcome: entry.outcome, details: entry.details,
  };
  return createHash('sha256').update(prevHash).update(canonicalJson(body)).digest('hex');
}

export interface ChainBreak {
  line: number;
  chain: string;
  seq: number | null;
  reason: 'edited' | 'deleted' | 'reordered' | 'malformed' | 'head-mismatch';
  message: string;
}

export interface VerifyResult {
  ok: boolean;
  entries: number;
  chains: number;
  firstBreak?: ChainBreak;
}

/** A trailer line an export may carry: the chain head as the database held it at export time. */
export interface ChainHead {
  type: 'chain_head';
  chain: string;
  lastSeq: number;
  lastHash: string;
}

function isRecord(v: unknown): v is AuditRecord {
  const r = v as AuditRecord;
  return typeof r === 'object' && r !== null && typeof r.chain === 'string' && Number.isInteger(r.seq)
    && typeof r.hash === 'string' && typeof r.prevHash === 'string';
}

/**
 * Verifies JSON Lines of audit records (any mix of chains, each chain in order). Names the first
 * broken entry: an edited entry fails its own hash; a deleted one leaves a sequence gap and a
 * prev_hash that does not match; a reordered one goes backwards in sequence.
 */
export function verifyJsonLines(text: string): VerifyResult {
  const state = new Map<string, { seq: number; hash: string }>();
  let entries = 0;
  const lines = text.split('\n');
  // Which (chain, seq) pairs occur anywhere: a gap whose missing entry appears later is a reorder.
  const present = new Set<string>();
  for (const l of lines) {
    try {
      const r = JSON.parse(l) as Partial<AuditRecord>;
      if (typeof r.chain === 'string' && Number.isInteger(r.seq)) present.add(`${r.chain}\u0000${r.seq}`);
    } catch {
      /* reported in the main pass */
    }
  }
  const fail = (b: ChainBreak): VerifyResult => ({ ok: false, entries, chains: state.size, firstBreak: b });
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (!line) continue;
    const lineNo = i + 1;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      return fail({ line: lineNo, chain: '?', seq: null, reason: 'malformed', message: `line ${lineNo} is not JSON` });
    }
    if ((parsed as ChainHead)?.type === 'chain_head') {
      const head = parsed as ChainHead;
      const cur = state.get(head.chain) ?? { seq: 0, hash: GENESIS_HASH };
      if (cur.seq !== head.lastSeq || cur.hash !== head.lastHash) {
        return fail({ line: lineNo, chain: head.chain, seq: head.lastSeq, reason: 'head-mismatch',
          message: `chain ${head.chain} ends at seq ${cur.seq} but its recorded head is seq ${head.lastSeq}: entries at the end were removed or altered` });
      }
      continue;
    }
    if (!isRecord(parsed)) {
      return fail({ line: lineNo, chain: '?', seq: null, reason: 'malformed', message: `line ${lineNo} is not an audit record` });
    }
    const rec = parsed;
    const cur = state.get(rec.chain) ?? { seq: 0, hash: GENESIS_HASH };
    if (rec.seq <= cur.seq) {
      return fail({ line: lineNo, chain: rec.chain, seq: rec.seq, reason: 'reordered',
        message: `entry seq ${rec.seq} of chain ${rec.chain} comes after seq ${cur.seq}: entries were reordered or duplicated` });
    }
    if (rec.seq !== cur.seq + 1 && present.has(`${rec.chain}\u0000${cur.seq + 1}`)) {
      return fail({ line: lineNo, chain: rec.chain, seq: rec.seq, reason: 'reordered',
        message: `entry seq ${rec.seq} of chain ${rec.chain} comes before seq ${cur.seq + 1}: entries were reordered` });
    }
    if (rec.seq !== cur.seq + 1 || rec.prevHash !== cur.hash) {
      return fail({ line: lineNo, chain: rec.chain, seq: rec.seq, reason: 'deleted',
        message: `entry seq ${rec.seq} of chain ${rec.chain} does not follow seq ${cur.seq}: an entry before it was deleted or altered` });
    }
    if (hashEntry(rec.prevHash, rec) !== rec.hash) {
      return fail({ line: lineNo, chain: rec.chain, seq: rec.seq, reason: 'edited',
        message: `entry seq ${rec.seq} of chain ${rec.chain} does not match its hash: it was edited` });
    }
    state.set(rec.chain, { seq: rec.seq, hash: rec.hash });
    entries++;
  }
  return { ok: true, entries, chains: state.size };
}
