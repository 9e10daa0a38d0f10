/**
 * The first line of query_db's read-only defence: decide from the SQL text alone, before any
 * connection is made, whether a statement is a single read-only query.
 *
 * This is NOT the real boundary. A parser is a model of PostgreSQL's grammar, and any difference
 * between the model and the server is a potential bypass; so everything admitted here still runs
 * inside `BEGIN READ ONLY`, one statement per extended-protocol Parse, as a low-privilege role, with
 * a statement timeout, and the session is reset afterwards (executor.ts). The guard's job is to
 * refuse early with a clear message and to stop the things a read-only transaction does NOT stop
 * (advisory locks, backend signalling, settings changes, dblink, large-object and file functions).
 *
 * Admitted: exactly one SELECT (including UNION/INTERSECT/EXCEPT and WITH … SELECT whose CTEs are
 * all SELECTs), a bare VALUES list, and EXPLAIN (without ANALYZE) of one of those. Everything else,
 * including SQL the parser cannot read, is refused with CUSTOS_ERR_SQL_REFUSED naming the statement
 * type. Checks are done twice where it matters: on node-sql-parser's AST (walked generically, so a
 * function call is found wherever the AST puts it) and on our own PostgreSQL-aware token stream
 * (lexer.ts), so that a parser quirk cannot hide a denied function or clause.
 */
import nodeSqlParser from 'node-sql-parser';
import { CustosError } from '../errors.ts';
import { lex, type Token } from './lexer.ts';

const { Parser } = nodeSqlParser;
const parser = new Parser();
const PARSE_OPTIONS = { database: 'postgresql' } as const;

/** Longest SQL text accepted: far above any hand-written query, small enough to parse quickly. */
export const MAX_SQL_LENGTH = 100_000;

export interface ReadOnlyVerdict {
  /** 'SELECT' | 'VALUES' | 'EXPLAIN' */
  statementType: string;
}

/**
 * Functions refused anywhere in the statement, because a read-only transaction does not stop them
 * or because they run SQL text the guard cannot see. Matched case-insensitively on the bare name
 * (any schema qualification is ignored: `pg_catalog.set_config` is `set_config`).
 */
const DENIED_FUNCTIONS = new Set([
  // session state and settings (set_config can flip transaction_read_only before the first snapshot)
  'set_config',
  // sequences: writes that bypass MVCC (a read-only transaction refuses them too)
  'nextval', 'setval',
  // backend signalling and server control
  'pg_terminate_backend', 'pg_cancel_backend', 'pg_signal_backend', 'pg_reload_conf', 'pg_rotate_logfile',
  'pg_switch_wal', 'pg_create_restore_point', 'pg_promote', 'pg_log_backend_memory_contexts',
  'pg_import_system_collations', 'pg_start_backup', 'pg_stop_backup', 'pg_notify',
  'pg_logical_emit_message', 'pg_truncate_visibility_map', 'pg_stat_statements_reset',
  // transaction ids: assigning one is a write to the server's state
  'txid_current', 'pg_current_xact_id',
  // server files
  'pg_read_file', 'pg_read_binary_file', 'pg_stat_file', 'pg_logdir_ls',
  // large objects (client-side variants without the lo_ prefix)
  'loread', 'lowrite',
  // functions that execute a SQL string the guard never sees
  'query_to_xml', 'query_to_xmlschema', 'query_to_xml_and_xmlschema', 'cursor_to_xml', 'cursor_to_xmlschema',
]);

const DENIED_PREFIXES: readonly RegExp[] = [
  /^pg_(try_)?advisory/, // session advisory locks survive ROLLBACK (DISCARD ALL clears them; refuse anyway)
  /^dblink/, // opens connections elsewhere, outside this transaction
  /^lo_/, // lo_import/lo_export touch server files; the rest write large objects
  /^pg_ls_/, /^pg_read_/, /^pg_file_/, // server file access (core and adminpack)
  /^pg_replication_/, /replication_slot$/, /^pg_drop_/, /^pg_stat_reset/, /^pg_wal_replay_/, /^pg_backup_/,
];

export function isDeniedFunction(name: string): boolean {
  const n = name.toLowerCase();
  return DENIED_FUNCTIONS.has(n) || DENIED_PREFIXES.some((re) => re.test(n));
}

/** Statement types node-sql-parser produces that are never read-only. */
const STATEMENT_TYPES = new Set([
  'insert', 'update', 'delete', 'replace', 'merge', 'create', 'alter', 'drop', 'truncate', 'rename',
  'grant', 'revoke', 'call', 'set', 'lock', 'unlock', 'use', 'exec', 'execute', 'transaction',
  'load_data', 'declare', 'do', 'copy', 'show', 'desc', 'comment', 'analyze', 'attach', 'deallocate',
  'prepare', 'listen', 'notify', 'discard', 'reset', 'vacuum', 'refresh', 'reindex', 'cluster',
]);

const EXPLAIN_OPTIONS = new Set([
  'verbose', 'costs', 'settings', 'buffers', 'wal', 'timing', 'summary', 'format', 'generic_plan', 'memory',
]);
const EXPLAIN_OPTION_VALUES = new Set(['true', 'false', 'on', 'off', '1', '0', 'text', 'xml', 'json', 'yaml']);

/** "a SELECT", "an UPDATE": messages are read by people and models. */
function article(word: string): string {
  return /^[AEIOU]/i.test(word) ? `an ${word}` : `a ${word}`;
}

function refuse(message: string): never {
  throw new CustosError('CUSTOS_ERR_SQL_REFUSED', `query_db runs read-only queries only: ${message}`);
}

function describeFirstWord(tokens: readonly Token[]): string {
  const t = tokens[0];
  if (!t) return 'empty';
  if (t.type === 'word') return t.value.toUpperCase();
  if (t.value === '(') return 'SELECT';
  return 'unrecognised';
}

/** Splits the token stream on `;`, dropping empty statements (a trailing `;` is fine). */
function splitStatements(tokens: readonly Token[]): Token[][] {
  const out: Token[][] = [];
  let cur: Token[] = [];
  for (const t of tokens) {
    if (t.type === 'punct' && t.value === ';') {
      if (cur.length) out.push(cur);
      cur = [];
    } else cur.push(t);
  }
  if (cur.length) out.push(cur);
  return out;
}

/**
 * Refuses anything but one read-only query. Returns the statement type on success; throws
 * CustosError('CUSTOS_ERR_SQL_REFUSED') otherwise. Never makes a connection.
 */
export function assertReadOnlySql(sql: string): ReadOnlyVerdict {
  if (typeof sql !== 'string') refuse('the statement must be text.');
  // The verdict is a pure function of the text: agents repeat statements (with different params),
  // and the PEG parser is the guard's main cost. Only admitted verdicts are cached.
  const cached = verdictCache.get(sql);
  if (cached) {
    verdictCache.delete(sql);
    verdictCache.set(sql, cached); // LRU: most recent last
    return { ...cached };
  }
  const verdict = checkStatement(sql);
  if (sql.length <= CACHEABLE_SQL_LENGTH) {
    verdictCache.set(sql, verdict);
    if (verdictCache.size > VERDICT_CACHE_SIZE) verdictCache.delete(verdictCache.keys().next().value!);
  }
  return { ...verdict };
}

const VERDICT_CACHE_SIZE = 256;
const CACHEABLE_SQL_LENGTH = 4096;
const verdictCache = new Map<string, ReadOnlyVerdict>();

function checkStatement(sql: string): ReadOnlyVerdict {
  if (sql.length > MAX_SQL_LENGTH) refuse(`the statement is longer than ${MAX_SQL_LENGTH} characters.`);
  if (sql.includes('\u0000')) refuse('the statement contains a NUL character.');

  const tokens = lex(sql);
  const statements = splitStatements(tokens);
  if (statements.length === 0) refuse('the statement is empty.');
  if (statements.length > 1) {
    const kinds = statements.map(describeFirstWord).join(', ');
    refuse(`send exactly one statement per call; refused ${statements.length} statements (${kinds}).`);
  }
  const stmt = statements[0]!;
  const first = stmt[0]!;
  const kind = describeFirstWord(stmt);
  // Name the statement type first: "refused a MERGE statement" is clearer than a clause-level reason.
  if (!['SELECT', 'WITH', 'VALUES', 'EXPLAIN'].includes(kind)) refuse(`refused ${article(kind)} statement.`);
  lexicalChecks(stmt);

  if (first.type === 'word' && first.value === 'explain') {
    const inner = stripExplain(stmt);
    const innerSql = sql.slice(inner.start);
    checkQuery(innerSql, lex(innerSql));
    return { statementType: 'EXPLAIN' };
  }
  return checkQuery(sql, stmt);
}

/** Token-level checks on the whole statement, independent of the parser's AST. */
function lexicalChecks(stmt: readonly Token[]): void {
  for (let i = 0; i < stmt.length; i++) {
    const t = stmt[i]!;
    const next = stmt[i + 1];
    if (t.type !== 'word' && t.type !== 'qident') continue;
    if (next && next.type === 'punct' && next.value === '(' && isDeniedFunction(t.value)) {
      refuse(`the function ${t.value}() is not allowed (it changes server or session state, or runs SQL the guard cannot check).`);
    }
    if (t.type !== 'word') continue;
    // INTO only appears in SELECT INTO (creates a table), INSERT INTO and MERGE INTO.
    if (t.value === 'into') refuse('refused a statement with INTO (SELECT … INTO creates a table).');
    if (t.value === 'for' && next && next.type === 'word' && ['update', 'share', 'no', 'key'].includes(next.value)) {
      refuse('refused a row-locking clause (FOR UPDATE / FOR SHARE takes locks).');
    }
  }
}

/** Consumes `EXPLAIN [(options)] [VERBOSE]`, refusing ANALYZE; returns the first token of the explained statement. */
function stripExplain(stmt: readonly Token[]): Token {
  let i = 1;
  const at = (k: number): Token | undefined => stmt[k];
  if (at(i)?.type === 'punct' && at(i)?.value === '(') {
    i++;
    for (;;) {
      const opt = at(i);
      if (!opt) refuse('refused an EXPLAIN with an unterminated option list.');
      if (opt.type === 'punct' && opt.value === ')') { i++; break; }
      if (opt.type === 'punct' && opt.value === ',') { i++; continue; }
      if (opt.type === 'word' && (opt.value === 'analyze' || opt.value === 'analyse')) {
        refuse('refused an EXPLAIN ANALYZE statement (ANALYZE executes the statement).');
      }
      if (opt.type === 'word' && EXPLAIN_OPTIONS.has(opt.value)) { i++; continue; }
      if ((opt.type === 'word' || opt.type === 'number') && EXPLAIN_OPTION_VALUES.has(opt.value)) { i++; continue; }
      refuse('refused an EXPLAIN with an option the guard does not recognise.');
    }
  }
  for (;;) {
    const w = at(i);
    if (w?.type === 'word' && (w.value === 'analyze' || w.value === 'analyse')) {
      refuse('refused an EXPLAIN ANALYZE statement (ANALYZE executes the statement).');
    }
    if (w?.type === 'word' && w.value === 'verbose') { i++; continue; }
    break;
  }
  const inner = at(i);
  if (!inner) refuse('refused an EXPLAIN without a statement.');
  if (inner.type === 'word' && inner.value === 'explain') refuse('refused a nested EXPLAIN.');
  return inner;
}

/** Parses one SELECT / WITH … SELECT / VALUES and checks its AST. */
function checkQuery(sql: string, stmt: readonly Token[]): ReadOnlyVerdict {
  const first = stmt[0];
  if (!first) refuse('refused an EXPLAIN without a statement.');
  const kind = describeFirstWord(stmt);
  const isValues = first.type === 'word' && first.value === 'values';
  if (!isValues && !['SELECT', 'WITH'].includes(kind)) refuse(`refused ${article(kind)} statement.`);

  // node-sql-parser cannot read a bare VALUES list; the same text as a derived table it can. The
  // wrapped text contains the original verbatim, so nothing in it escapes the check (a `)` trick
  // that closes the wrapper early just makes it fail to parse or become two statements: refused).
  const body = sql.replace(/[\s;]+$/, '');
  const parseText = isValues ? `SELECT * FROM (\n${body}\n) AS custos_values` : sql;
  let ast: unknown;
  try {
    ast = parser.astify(parseText, PARSE_OPTIONS);
  } catch (err) {
    const loc = (err as { location?: { start?: { line?: number; column?: number } } }).location?.start;
    const where = loc && !isValues ? ` near line ${loc.line}, column ${loc.column}` : '';
    refuse(`could not verify this ${kind} statement as read-only: the SQL parser could not read it${where}. ` +
      'Writable CTEs, row-locking clauses and other non-SELECT syntax are refused.');
  }
  const list = Array.isArray(ast) ? ast : [ast];
  if (list.length !== 1) refuse(`send exactly one statement per call; refused ${list.length} statements.`);
  const root = list[0] as Record<string, unknown>;
  if (root.type !== 'select') refuse(`refused ${article(String(root.type ?? 'unrecognised').toUpperCase())} statement.`);
  walk(root);
  return { statementType: isValues ? 'VALUES' : 'SELECT' };
}

/**
 * Walks every node of the AST generically (it is plain JSON), so the checks do not depend on where
 * node-sql-parser puts a subquery, CTE, lateral function or window clause.
 */
function walk(node: unknown, depth = 0): void {
  if (depth > 500) refuse('the statement is nested too deeply to check.');
  if (Array.isArray(node)) {
    for (const item of node) walk(item, depth + 1);
    return;
  }
  if (node === null || typeof node !== 'object') return;
  const obj = node as Record<string, unknown>;
  const type = typeof obj.type === 'string' ? obj.type.toLowerCase() : undefined;
  if (type && STATEMENT_TYPES.has(type) && type !== 'select') {
    refuse(`refused ${article(type.toUpperCase())} statement inside the query.`);
  }
  if (type === 'select') {
    const into = obj.into as { position?: unknown; expr?: unknown } | null | undefined;
    if (into && (into.position != null || into.expr != null)) {
      refuse('refused a statement with INTO (SELECT … INTO creates a table).');
    }
    for (const key of ['locking_read', 'for_update', 'lock', 'locking']) {
      if (obj[key]) refuse('refused a row-locking clause (FOR UPDATE / FOR SHARE takes locks).');
    }
  }
  if (type === 'function' || type === 'aggr_func' || type === 'window_func') {
    const name = functionName(obj.name);
    if (name && isDeniedFunction(name)) {
      refuse(`the function ${name}() is not allowed (it changes server or session state, or runs SQL the guard cannot check).`);
    }
  }
  for (const key of Object.keys(obj)) walk(obj[key], depth + 1);
}

/** The bare (last) name of a function node: `{name: [{value}]}`, a string, or `{name: string}`. */
function functionName(name: unknown): string | undefined {
  if (typeof name === 'string') return name;
  if (name && typeof name === 'object') {
    const parts = (name as { name?: unknown }).name;
    if (Array.isArray(parts) && parts.length) {
      const last = parts[parts.length - 1] as { value?: unknown };
      return typeof last?.value === 'string' ? last.value : undefined;
    }
    if (typeof parts === 'string') return parts;
  }
  return undefined;
}
