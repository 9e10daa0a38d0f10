/**
 * A small PostgreSQL lexer, used by the read-only guard for the checks that must not depend on how
 * node-sql-parser happens to represent (or fail to parse) a statement: the leading keyword, the
 * EXPLAIN prefix, denied function names and locking/INTO clauses.
 *
 * It follows PostgreSQL's own tokenisation for everything that can hide text: `--` and nested
 * `/* *\/` comments, '…' strings ('' escapes; E'…' with backslash escapes), "…" identifiers and
 * $tag$…$tag$ dollar quotes. Anything it cannot close (an unterminated string or comment) is an
 * error, so the guard refuses it rather than guessing where the statement ends.
 */
import { CustosError } from '../errors.ts';

export type TokenType = 'word' | 'qident' | 'string' | 'number' | 'param' | 'punct';

export interface Token {
  type: TokenType;
  /** words and quoted identifiers lower-cased; strings hold their raw text */
  value: string;
  /** offset of the token's first character in the source */
  start: number;
  end: number;
}

const WORD_START = /[A-Za-z_\u0080-\uffff]/;
const WORD_PART = /[A-Za-z0-9_$\u0080-\uffff]/;
const DOLLAR_TAG = /^\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/;

function refuse(why: string): never {
  throw new CustosError('CUSTOS_ERR_SQL_REFUSED', `query_db runs read-only queries only: ${why}`);
}

/** Tokenises `sql`, dropping whitespace and comments. Throws CUSTOS_ERR_SQL_REFUSED on unterminated text. */
export function lex(sql: string): Token[] {
  const tokens: Token[] = [];
  const n = sql.length;
  let i = 0;
  while (i < n) {
    const c = sql[i]!;
    // whitespace
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v') {
      i++;
      continue;
    }
    // -- line comment
    if (c === '-' && sql[i + 1] === '-') {
      const nl = sql.indexOf('\n', i);
      i = nl === -1 ? n : nl + 1;
      continue;
    }
    // /* nested block comment */ (PostgreSQL nests them, unlike the SQL standard)
    if (c === '/' && sql[i + 1] === '*') {
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (sql[i] === '/' && sql[i + 1] === '*') { depth++; i += 2; }
        else if (sql[i] === '*' && sql[i + 1] === '/') { depth--; i += 2; }
        else i++;
      }
      if (depth > 0) refuse('the statement has an unterminated comment.');
      continue;
    }
    const start = i;
    // E'…' / e'…' escape strings, and B'…' X'…' N'…' U&'…' prefixes
    if ((c === 'E' || c === 'e') && sql[i + 1] === "'") {
      i = scanQuoted(sql, i + 1, "'", true);
      tokens.push({ type: 'string', value: sql.slice(start, i), start, end: i });
      continue;
    }
    if ((c === 'U' || c === 'u') && sql[i + 1] === '&' && (sql[i + 2] === "'" || sql[i + 2] === '"')) {
      const q = sql[i + 2]!;
      i = scanQuoted(sql, i + 2, q, false);
      tokens.push({ type: q === "'" ? 'string' : 'qident', value: sql.slice(start, i).toLowerCase(), start, end: i });
      continue;
    }
    if (c === "'") {
      i = scanQuoted(sql, i, "'", false);
      tokens.push({ type: 'string', value: sql.slice(start, i), start, end: i });
      continue;
    }
    if (c === '"') {
      i = scanQuoted(sql, i, '"', false);
      // PostgreSQL keeps quoted identifiers' case; we lower-case them for deny-list matching so that
      // "SET_CONFIG" cannot slip past (over-refusing a genuinely upper-case name is harmless).
      tokens.push({ type: 'qident', value: sql.slice(start + 1, i - 1).replace(/""/g, '"').toLowerCase(), start, end: i });
      continue;
    }
    if (c === '$') {
      const tag = DOLLAR_TAG.exec(sql.slice(i, i + 128));
      if (tag) {
        const close = sql.indexOf(tag[0], i + tag[0].length);
        if (close === -1) refuse('the statement has an unterminated dollar-quoted string.');
        i = close + tag[0].length;
        tokens.push({ type: 'string', value: sql.slice(start, i), start, end: i });
        continue;
      }
      if (/[0-9]/.test(sql[i + 1] ?? '')) {
        i++;
        while (i < n && /[0-9]/.test(sql[i]!)) i++;
        tokens.push({ type: 'param', value: sql.slice(start, i), start, end: i });
        continue;
      }
      tokens.push({ type: 'punct', value: '$', start, end: ++i });
      continue;
    }
    if (WORD_START.test(c)) {
      i++;
      while (i < n && WORD_PART.test(sql[i]!)) i++;
      tokens.push({ type: 'word', value: sql.slice(start, i).toLowerCase(), start, end: i });
      continue;
    }
    if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(sql[i + 1] ?? ''))) {
      i++;
      while (i < n && /[0-9a-zA-Z_.]/.test(sql[i]!)) {
        // "1.e5", "0x1F" and "1_000" are all numbers; stop at ".." (a range-ish typo) to stay simple
        if (sql[i] === '.' && sql[i + 1] === '.') break;
        i++;
      }
      tokens.push({ type: 'number', value: sql.slice(start, i), start, end: i });
      continue;
    }
    tokens.push({ type: 'punct', value: c, start, end: ++i });
  }
  return tokens;
}

/** Scans a quoted run starting at `open` (the quote); returns the offset just past the closing quote. */
function scanQuoted(sql: string, open: number, quote: string, backslashEscapes: boolean): number {
  let i = open + 1;
  const n = sql.length;
  while (i < n) {
    const ch = sql[i]!;
    if (backslashEscapes && ch === '\\') { i += 2; continue; }
    if (ch === quote) {
      if (sql[i + 1] === quote) { i += 2; continue; }
      return i + 1;
    }
    i++;
  }
  refuse(quote === '"' ? 'the statement has an unterminated quoted identifier.' : 'the statement has an unterminated string.');
}
