/**
 * PII masking for query_db: applied to every value of every row (and to database error texts)
 * before anything leaves the actor.
 *
 * Two independent rules, because each alone is easy to defeat:
 *  - name-based: a column (or JSON object key) whose name says what it holds (email, phone, ssn,
 *    password, token, secret, api_key, card_number, iban, ip, dob, …) is replaced whole by
 *    `[masked]`. Renaming defeats it (`SELECT password AS p`), hence
 *  - value-based: values are scanned for emails, phone numbers, Luhn-valid card numbers, US SSNs,
 *    checksummed IBANs, IPv4/IPv6 addresses and secret-looking strings (JWTs, PEM private keys,
 *    well-known API key prefixes, long high-entropy tokens, URL passwords) wherever they appear:
 *    inside free text, in `string_agg` output, and inside JSON/JSONB (parsed or as text). That is
 *    what makes masking survive aliases and expressions (`lower(email) AS x`, `row_to_json(u)`).
 *
 * Masked values keep a hint of shape (`j***@example.com`, `**** **** **** 4242`, `***-**-6789`).
 *
 * Per-credential rules: `maskColumns` adds names masked whole; `allowColumns` exempts names from
 * name-based masking AND exempts values in those columns from the value-based *PII* detectors
 * (email, phone, SSN, IBAN, IP). Secrets and payment card numbers are masked everywhere, always:
 * allowing a column must never be a way to read an API key or a PAN.
 *
 * What this cannot stop (docs/query-db.md): inference through WHERE clauses, aggregates and
 * ordering (`WHERE password LIKE 'a%'`), values transformed beyond recognition (`reverse(email)`,
 * `encode(ssn::bytea,'base64')`), and PII without a recognisable shape (names, addresses).
 */

export interface MaskRules {
  /** Extra column / JSON key names to mask whole (compared case- and separator-insensitively). */
  maskColumns?: readonly string[];
  /** Names exempt from name-based masking and from value-based PII (not secret/card) detection. */
  allowColumns?: readonly string[];
}

export interface MaskRowsResult {
  rows: unknown[][];
  /** Output columns masked whole because of their name. */
  maskedColumns: string[];
  /** Number of individual values masked: whole cells, JSON fields and matches inside text. */
  maskedValues: number;
}

export const MASKED = '[masked]';
export const SECRET = '[secret]';

// ---------------------------------------------------------------------------------------------
// name-based

/** Normalised names (lower-case, separators removed) that say a column holds PII or a secret. */
const SENSITIVE_NAMES = new Set([
  'email', 'emailaddress', 'mail', 'emailaddr',
  'phone', 'phonenumber', 'telephone', 'tel', 'mobile', 'mobilenumber', 'cellphone', 'msisdn', 'fax',
  'ssn', 'socialsecurity', 'socialsecuritynumber', 'nationalid', 'taxid', 'passportnumber',
  'password', 'passwd', 'pwd', 'passphrase', 'passwordhash',
  'token', 'accesstoken', 'refreshtoken', 'authtoken', 'otp', 'totp',
  'secret', 'clientsecret', 'secretkey', 'apikey', 'accesskey', 'privatekey', 'credential', 'credentials',
  'cardnumber', 'ccnumber', 'ccnum', 'creditcard', 'creditcardnumber', 'cvv', 'cvc', 'pin',
  'iban', 'ip', 'ipv4', 'ipv6', 'ipaddr', 'ipaddress',
  'dob', 'dateofbirth', 'birthdate', 'birthday', 'birth',
]);

function normaliseName(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]/g, '');
}

/** Splits snake_case, kebab-case, camelCase and "spaced names" into lower-case words. */
function nameWords(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
}

function wordIsSensitive(w: string): boolean {
  if (SENSITIVE_NAMES.has(w)) return true;
  // plurals (emails, tokens, secrets, passwords) and birth_* / *birth
  if (w.length > 3 && w.endsWith('s') && SENSITIVE_NAMES.has(w.slice(0, -1))) return true;
  return w.startsWith('birth');
}

/** True when `name` alone says the column holds PII or a secret (ignoring per-credential rules). */
export function isSensitiveName(name: string): boolean {
  const words = nameWords(name);
  // single words, and runs of 2–4 adjacent words ("e_mail", "api_key", "date_of_birth", "ip_address")
  for (let i = 0; i < words.length; i++) {
    let joined = '';
    for (let j = i; j < Math.min(words.length, i + 4); j++) {
      joined += words[j];
      if (wordIsSensitive(joined)) return true;
    }
  }
  return false;
}

/** Compiled per-call view of the rules, with a cache of name decisions (JSON keys repeat per row). */
class NamePolicy {
  private readonly extra: Set<string>;
  private readonly allow: Set<string>;
  private readonly cache = new Map<string, boolean>();

  constructor(rules: MaskRules | undefined) {
    this.extra = new Set((rules?.maskColumns ?? []).map(normaliseName));
    this.allow = new Set((rules?.allowColumns ?? []).map(normaliseName));
  }

  isAllowed(name: string): boolean {
    return this.allow.size > 0 && this.allow.has(normaliseName(name));
  }

  /** Whether the whole value under this column/key name is masked. */
  masks(name: string): boolean {
    let v = this.cache.get(name);
    if (v === undefined) {
      const n = normaliseName(name);
      v = this.extra.has(n) || (!this.allow.has(n) && isSensitiveName(name));
      this.cache.set(name, v);
    }
    return v;
  }
}

// ---------------------------------------------------------------------------------------------
// value-based detectors

const SSN_RE = /(?<![\d-])(\d{3})-(\d{2})-(\d{4})(?![\d-])/g;
const IBAN_RE = /(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])/g;
const IPV4_RE = /(?<![\d.])((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\d.]\d|\d)/g;
const IPV6_CANDIDATE_RE = /(?<![0-9A-Za-z:])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|:)?(?![0-9A-Za-z:])/g;
// phones: international (+CC …), North American (415) 555-0123 / 415-555-0123, and national
// trunk-0 formats with separators (020 7946 0958, 06 12 34 56 78). Plain digit runs and dates
// (2024-01-15) are deliberately not phones: too many false positives.
const PHONE_INTL_RE = /(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,5}\)?){1,6}(?![\w])/g;
const PHONE_NANP_RE = /(?<![\w(+])(?:\(\d{3}\) ?|\d{3}[ .-])\d{3}[ .-]\d{4}(?!\w|[.-]\d)/g;
const PHONE_NATIONAL_RE = /(?<![\w+.:-])0\d{1,4}(?:[ .-]\d{2,4}){2,4}(?![\w]|[.:-]\d)/g;

const PEM_RE = /-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY-----[\s\S]*?(?:-----END \1PRIVATE KEY-----|$)/g;
const JWT_RE = /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g;
const KEY_PREFIX_RE = new RegExp(
  '(?<![A-Za-z0-9_-])(?:' + [
    'sk-(?:proj-|ant-|live-)?[A-Za-z0-9_-]{20,}', // OpenAI / Anthropic style
    '(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}', // Stripe secret / restricted keys
    'gh[pousr]_[A-Za-z0-9]{30,}', 'github_pat_[A-Za-z0-9_]{30,}', // GitHub
    'xox[abposre]-[A-Za-z0-9-]{10,}', 'xapp-[A-Za-z0-9-]{10,}', // Slack
    '(?:AKIA|ASIA)[0-9A-Z]{16}', // AWS access key ids
    'custos_(?:agent|ssh|ci)_[A-Za-z0-9]{20,}', // our own tokens
    'glpat-[A-Za-z0-9_-]{20,}', 'AIza[0-9A-Za-z_-]{35}', 'npm_[A-Za-z0-9]{36}',
    'SG\\.[A-Za-z0-9_-]{16,}\\.[A-Za-z0-9_-]{16,}', 'whsec_[A-Za-z0-9+/=]{20,}',
  ].join('|') + ')',
  'g',
);
const URL_PASSWORD_RE = /(\b[a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:)([^\s@/]+)(@)/gi;
const LONG_TOKEN_RE = /[A-Za-z0-9+/_=-]{32,}/g;

function ibanValid(compact: string): boolean {
  if (compact.length < 15 || compact.length > 34) return false;
  const rearranged = compact.slice(4) + compact.slice(0, 4);
  let rem = 0;
  for (let i = 0; i < rearranged.length; i++) {
    const c = rearranged.charCodeAt(i);
    const v = c >= 65 ? String(c - 55) : String.fromCharCode(c);
    for (let k = 0; k < v.length; k++) rem = (rem * 10 + (v.charCodeAt(k) - 48)) % 97;
  }
  return rem === 1;
}

function ssnValid(area: string, group: string, serial: string): boolean {
  return area !== '000' && area !== '666' && area[0] !== '9' && group !== '00' && serial !== '0000';
}

function isIPv6(s: string): boolean {
  // Full validation without a regex zoo: at most one "::", 8 groups (or fewer with "::"), hex groups.
  if (s.length < 3) return false;
  const dbl = s.indexOf('::');
  if (dbl !== -1 && s.indexOf('::', dbl + 1) !== -1) return false;
  const parts = s.split(':');
  const nonEmpty = parts.filter((p) => p.length > 0);
  if (nonEmpty.some((p) => !/^[0-9A-Fa-f]{1,4}$/.test(p))) return false;
  if (dbl === -1) return parts.length === 8 && nonEmpty.length === 8;
  return nonEmpty.length <= 7;
}

function shannonEntropy(s: string): number {
  const counts = new Map<number, number>();
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    counts.set(c, (counts.get(c) ?? 0) + 1);
  }
  let h = 0;
  for (const n of counts.values()) {
    const p = n / s.length;
    h -= p * Math.log2(p);
  }
  return h;
}

/** 0 digit, 1 lower, 2 upper, -1 anything else (separators are skipped when counting switches). */
function charClass(c: number): number {
  if (c >= 48 && c <= 57) return 0;
  if (c >= 97 && c <= 122) return 1;
  if (c >= 65 && c <= 90) return 2;
  return -1;
}

/**
 * A long run of base64/base62 characters that looks machine-generated: letters and digits mixed
 * throughout (random tokens switch between digit/lower/upper on most characters; identifiers such
 * as `the_quick_brown_fox_2024` or `camelCaseNames` rarely do) and a high character entropy.
 */
function looksLikeRandomToken(s: string): boolean {
  if (/^[0-9A-Fa-f-]+$/.test(s)) return false; // hashes, UUIDs, hex ids: common and not secrets per se
  let prev = -1;
  let switches = 0;
  let counted = 0;
  let hasDigit = false;
  let hasLetter = false;
  for (let i = 0; i < s.length; i++) {
    const cls = charClass(s.charCodeAt(i));
    if (cls < 0) continue;
    if (cls === 0) hasDigit = true;
    else hasLetter = true;
    if (prev >= 0 && cls !== prev) switches++;
    prev = cls;
    counted++;
  }
  if (!hasDigit || !hasLetter || counted < 24 || switches / counted < 0.25) return false;
  return shannonEntropy(s) >= 4;
}

function jwtHeaderHasAlg(token: string): boolean {
  try {
    const header = JSON.parse(Buffer.from(token.slice(0, token.indexOf('.')), 'base64url').toString('utf8')) as unknown;
    return typeof header === 'object' && header !== null && 'alg' in header;
  } catch {
    return false;
  }
}

/** Keeps every non-digit and the last `keep` digits; other digits become `*`. */
function starDigits(s: string, keep: number): string {
  let total = 0;
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) >= 48 && s.charCodeAt(i) <= 57) total++;
  let seen = 0;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      seen++;
      out += seen > total - keep ? s[i] : '*';
    } else out += s[i];
  }
  return out;
}

function countDigits(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 48 && c <= 57) n++;
  }
  return n;
}

const enum Ch { Dot = 46, Underscore = 95, Dash = 45, Plus = 43, Slash = 47, Equals = 61, At = 64, Colon = 58 }

function isEmailLocal(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 46 || c === 95 || c === 37 || c === 43 || c === 45;
}
function isEmailDomain(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 46 || c === 45;
}
function isLetter(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90);
}

/**
 * Value-based masking of one string. `count` accumulates the number of matches masked.
 *
 * Speed matters (every value of every row goes through here; the bench target is ≤ 1.5× a direct
 * query for 1,000 rows): one pass over the characters collects cheap facts (digit count, dots,
 * colons, '@', the longest run of token characters…) and each detector's regex runs only when
 * its preconditions hold. Facts are taken on the input; masking only removes characters, so a
 * precondition that held before can only over-approximate afterwards (never skip a detector).
 */
export class ValueMasker {
  count = 0;

  /** Masks PII and secrets inside `s`. With `piiExempt`, only secrets and card numbers are masked. */
  maskString(s: string, piiExempt = false): string {
    const len = s.length;
    if (len < 6) return s; // shorter than any detector's shortest match ("a@b.co")
    let digits = 0, dots = 0, colons = 0, upper = 0, run = 0, maxRun = 0;
    let at = false, plus = false, dash = false;
    for (let i = 0; i < len; i++) {
      const c = s.charCodeAt(i);
      if (c >= 48 && c <= 57) { digits++; run++; }
      else if (c >= 97 && c <= 122) run++;
      else if (c >= 65 && c <= 90) { upper++; run++; }
      else {
        switch (c) {
          case Ch.Dot: dots++; run++; break;
          case Ch.Dash: dash = true; run++; break;
          case Ch.Plus: plus = true; run++; break;
          case Ch.Underscore: case Ch.Slash: case Ch.Equals: run++; break;
          case Ch.At: at = true; run = 0; break;
          case Ch.Colon: colons++; run = 0; break;
          default: run = 0;
        }
      }
      if (run > maxRun) maxRun = run;
    }
    let out = s;

    // secrets first: a key may contain digits or '@' that the PII rules would only partly mask
    if (dash && out.includes('-----BEGIN')) out = out.replace(PEM_RE, () => this.hit(SECRET));
    if (maxRun >= 15) {
      // 15 = the shortest prefixed key ("xoxb-" + 10); JWTs and long tokens are longer still
      if (out.includes('eyJ')) out = out.replace(JWT_RE, (m) => (jwtHeaderHasAlg(m) ? this.hit(SECRET) : m));
      out = out.replace(KEY_PREFIX_RE, () => this.hit(SECRET));
      if (maxRun >= 32) out = out.replace(LONG_TOKEN_RE, (m) => (looksLikeRandomToken(m) ? this.hit(SECRET) : m));
    }
    if (colons > 0 && at && out.includes('://')) {
      out = out.replace(URL_PASSWORD_RE, (_m, a: string, _p: string, c: string) => a + this.hit(SECRET) + c);
    }

    if (!piiExempt && at) out = this.maskEmails(out);

    if (digits >= 13) out = this.maskCards(out);
    if (piiExempt) return out;
    if (colons >= 2) {
      out = out.replace(IPV6_CANDIDATE_RE, (m) => {
        if (!isIPv6(m)) return m;
        // keep at most the first two groups written before any "::" (a /32-ish hint), like 192.168.*.*
        const head = m.split('::')[0]!.split(':').filter(Boolean).slice(0, 2).join(':');
        return this.hit(`${head}::*`);
      });
    }
    if (digits < 4) return out;

    if (digits >= 9 && dash) {
      out = out.replace(SSN_RE, (m, a: string, g: string, sr: string) => (ssnValid(a, g, sr) ? this.hit(`***-**-${sr}`) : m));
    }
    if (upper >= 2 && digits >= 2 && len >= 15 && /[A-Z]{2}\d\d/.test(out)) {
      out = out.replace(IBAN_RE, (m) => {
        const compact = m.replace(/ /g, '');
        if (!ibanValid(compact)) return m;
        return this.hit(`${compact.slice(0, 2)}** **** **** ${compact.slice(-4)}`);
      });
    }
    if (dots >= 3) out = out.replace(IPV4_RE, (_m, head: string) => this.hit(`${head}.*.*`));
    if (digits >= 8 && (out === s || countDigits(out) >= 8)) {
      if (plus) {
        out = out.replace(PHONE_INTL_RE, (m) => {
          const d = countDigits(m);
          return d >= 8 && d <= 15 ? this.hit(starDigits(m, 2)) : m;
        });
      }
      if (digits >= 10) out = out.replace(PHONE_NANP_RE, (m) => this.hit(starDigits(m, 2)));
      if (digits >= 9) out = out.replace(PHONE_NATIONAL_RE, (m) => {
        const d = countDigits(m);
        return d >= 9 && d <= 12 ? this.hit(starDigits(m, 2)) : m;
      });
    }
    return out;
  }

  /**
   * Card numbers: runs of 13–19 digits, optionally grouped by single spaces or dashes, not glued
   * to other digits, dots or commas (so amounts like 1,234,567.89 are not candidates), and
   * Luhn-valid. Scanned by hand: this runs on every digit-heavy value.
   */
  private maskCards(s: string): string {
    let out = '';
    let last = 0;
    const n = s.length;
    let i = 0;
    while (i < n) {
      const c = s.charCodeAt(i);
      if (c < 48 || c > 57) { i++; continue; }
      const prev = i > 0 ? s.charCodeAt(i - 1) : 0;
      const start = i;
      // Luhn computed on the fly from the left: keep both parities' sums, pick by the final length
      let count = 0, sumA = 0, sumB = 0, last4 = '';
      let end = i;
      while (end < n) {
        const d = s.charCodeAt(end);
        if (d >= 48 && d <= 57) {
          const v = d - 48;
          const dbl = v * 2 > 9 ? v * 2 - 9 : v * 2;
          if (count % 2 === 0) { sumA += dbl; sumB += v; } else { sumA += v; sumB += dbl; }
          count++;
          end++;
          continue;
        }
        const next = end + 1 < n ? s.charCodeAt(end + 1) : 0;
        if ((d === 32 || d === 45) && next >= 48 && next <= 57) { end++; continue; }
        break;
      }
      const after = end < n ? s.charCodeAt(end) : 0;
      const glued = prev === 46 || prev === 44 || after === 46 || after === 44;
      // the rightmost digit is never doubled: with an even count the left-first digit is doubled (sumA)
      if (!glued && count >= 13 && count <= 19 && (count % 2 === 0 ? sumA : sumB) % 10 === 0) {
        for (let k = end - 1; k >= start && last4.length < 4; k--) {
          const d = s.charCodeAt(k);
          if (d >= 48 && d <= 57) last4 = s[k] + last4;
        }
        out += s.slice(last, start) + this.hit(`**** **** **** ${last4}`);
        last = end;
      }
      i = end;
    }
    return last === 0 ? s : out + s.slice(last);
  }

  /**
   * Emails without a backtracking regex: from each '@', walk left over local-part characters and
   * right over domain characters; the domain needs a dot and an alphabetic TLD of 2+ letters.
   * `x***@domain` keeps the first character and the domain.
   */
  private maskEmails(s: string): string {
    let out = '';
    let last = 0;
    let idx = s.indexOf('@');
    while (idx !== -1) {
      let start = idx;
      while (start > last && isEmailLocal(s.charCodeAt(start - 1))) start--;
      let end = idx + 1;
      while (end < s.length && isEmailDomain(s.charCodeAt(end))) end++;
      while (end > idx + 1 && (s.charCodeAt(end - 1) === Ch.Dot || s.charCodeAt(end - 1) === Ch.Dash)) end--;
      const dot = s.lastIndexOf('.', end - 1);
      let tldOk = dot > idx + 1 && end - dot - 1 >= 2;
      for (let k = dot + 1; tldOk && k < end; k++) if (!isLetter(s.charCodeAt(k))) tldOk = false;
      if (start < idx && tldOk && s.charCodeAt(idx + 1) !== Ch.Dot) {
        out += s.slice(last, start) + this.hit(`${s[start]}***${s.slice(idx, end)}`);
        last = end;
      }
      idx = s.indexOf('@', Math.max(idx + 1, end));
    }
    return last === 0 ? s : out + s.slice(last);
  }

  private hit(replacement: string): string {
    this.count++;
    return replacement;
  }
}

/** Masks a free text (e.g. a database error message): value-based rules only. */
export function maskText(text: string): { text: string; masked: number } {
  const m = new ValueMasker();
  const out = m.maskString(text);
  return { text: out, masked: m.count };
}

// ---------------------------------------------------------------------------------------------
// rows and JSON

class RowMasker {
  readonly values = new ValueMasker();
  constructor(readonly names: NamePolicy) {}

  get count(): number {
    return this.values.count;
  }

  /** Masks one value; returns the same reference when nothing changed. */
  value(v: unknown, piiExempt: boolean, depth = 0): unknown {
    if (typeof v === 'string') {
      const first = v.charCodeAt(0);
      // JSON carried as text (row_to_json(u)::text, a json column read as text): walk it so that
      // key names are seen too, then re-serialise only if something was masked.
      if ((first === 123 /* { */ || first === 91 /* [ */) && v.length > 1 && depth < 32) {
        const parsed = tryParseJson(v);
        if (parsed !== undefined && typeof parsed === 'object' && parsed !== null) {
          const before = this.values.count;
          const masked = this.value(parsed, piiExempt, depth + 1);
          return this.values.count === before ? v : JSON.stringify(masked);
        }
      }
      return this.values.maskString(v, piiExempt);
    }
    if (v === null || typeof v !== 'object' || depth > 64) return v;
    if (Array.isArray(v)) {
      let copy: unknown[] | undefined;
      for (let i = 0; i < v.length; i++) {
        const m = this.value(v[i], piiExempt, depth + 1);
        if (m !== v[i]) (copy ??= v.slice())[i] = m;
      }
      return copy ?? v;
    }
    if (Buffer.isBuffer(v) || v instanceof Date) return v;
    let copy: Record<string, unknown> | undefined;
    const obj = v as Record<string, unknown>;
    for (const key of Object.keys(obj)) {
      const item = obj[key];
      let m: unknown;
      if (this.names.masks(key) && item !== null && item !== undefined) {
        this.values.count++;
        m = MASKED;
      } else {
        m = this.value(item, piiExempt || this.names.isAllowed(key), depth + 1);
      }
      if (m !== item) (copy ??= { ...obj })[key] = m;
    }
    return copy ?? v;
  }
}

function tryParseJson(s: string): unknown {
  try {
    return JSON.parse(s) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * Masks every value of every row. `columns` are the output column names (or `{name}` objects) in
 * row order; `rows` are arrays in that order. Input rows are not modified.
 */
/**
 * Column types whose values cannot carry PII or a secret by value (numbers that fit 32 bits,
 * booleans, dates and times, UUIDs): value scanning is skipped for them. int8 and numeric are NOT
 * here: a card or phone number is often stored in one. Name-based masking still applies.
 */
const VALUE_SAFE_TYPES = new Set(['bool', 'int2', 'int4', 'oid', 'float4', 'float8', 'date', 'time', 'timetz', 'timestamp', 'timestamptz', 'interval', 'uuid']);

export function maskRows(
  columns: readonly (string | { name: string; type?: string })[],
  rows: readonly (readonly unknown[])[],
  rules?: MaskRules,
  /** Output columns known (e.g. from the query's lineage) to derive from a sensitive column. */
  extraMaskedColumns?: ReadonlySet<number>,
): MaskRowsResult {
  const names = new NamePolicy(rules);
  const masker = new RowMasker(names);
  const colNames = columns.map((c) => (typeof c === 'string' ? c : c.name));
  const valueSafe = columns.map((c) => typeof c !== 'string' && c.type !== undefined && VALUE_SAFE_TYPES.has(c.type));
  const wholeMasked = colNames.map((n, i) => names.masks(n) || (extraMaskedColumns?.has(i) ?? false));
  const piiExempt = colNames.map((n, i) => names.isAllowed(n) && !wholeMasked[i]);
  const maskedColumns = colNames.filter((_n, i) => wholeMasked[i]);

  const out: unknown[][] = new Array(rows.length);
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r]!;
    const copy = new Array<unknown>(row.length);
    for (let c = 0; c < row.length; c++) {
      const v = row[c];
      if (wholeMasked[c]) {
        if (v === null || v === undefined) copy[c] = v;
        else {
          copy[c] = MASKED;
          masker.values.count++;
        }
      } else if (valueSafe[c]) {
        copy[c] = v;
      } else {
        copy[c] = masker.value(v, piiExempt[c] ?? false);
      }
    }
    out[r] = copy;
  }
  return { rows: out, maskedColumns, maskedValues: masker.count };
}
