/**
 * How `custos run` names the environment variables it gives the command (docs/ci.md, "Variable
 * names"). The rules are deterministic and checked as a whole BEFORE anything runs: a collision, an
 * ambiguous AWS default or a name that would clobber the runtime (PATH, LD_PRELOAD, NODE_OPTIONS…)
 * is a clear error, never a silent overwrite, because a clobbered PATH or LD_PRELOAD in a CI job is
 * code execution, and a silently dropped AWS_ACCESS_KEY_ID makes SDKs fall back to another identity.
 *
 * Base name: from the credential name: upper-case, every run of non-alphanumerics → one `_`,
 * leading/trailing `_` trimmed, `_` prefixed if it starts with a digit ("Stripe prod" → STRIPE_PROD).
 * A credential's `envName` (set in the service) replaces the base name verbatim.
 *
 *   bearer, header  <BASE>                                   the token / header value
 *   database        <BASE>_URL (no second _URL if BASE ends in _URL; an envName is used as is)
 *                   + DATABASE_URL when exactly one database credential is injected
 *   sigv4           <BASE>_AWS_ACCESS_KEY_ID, <BASE>_AWS_SECRET_ACCESS_KEY, <BASE>_AWS_SESSION_TOKEN?,
 *                   <BASE>_AWS_REGION? and, for the one default SigV4 credential, the unprefixed
 *                   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN?, AWS_REGION?,
 *                   AWS_DEFAULT_REGION?. With several SigV4 credentials the default must be chosen
 *                   (--aws-default NAME) or narrowed (--only NAME), else it is an error.
 *   oauth2          <BASE>_CLIENT_ID, <BASE>_CLIENT_SECRET, <BASE>_REFRESH_TOKEN?
 *   ssh             <BASE>_PRIVATE_KEY, <BASE>_PASSPHRASE?
 */
import { CustosError } from '../errors.ts';
import type { CiCredential } from './contract.ts';

/** Exact names a credential may never set (compared upper-cased). Each one changes what code runs,
 *  where it is loaded from, where traffic goes, or leaks into the CI runner's own control files. */
export const RESERVED_ENV_NAMES: readonly string[] = [
  // process basics and shells
  'PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'PWD', 'OLDPWD', 'TMPDIR', 'TMP', 'TEMP', 'IFS', 'ENV',
  'BASH_ENV', 'CDPATH', 'PS4', 'SHELLOPTS', 'BASHOPTS', 'GLOBIGNORE', 'PROMPT_COMMAND', 'TERM', 'LANG',
  'LANGUAGE', 'TZ', 'EDITOR', 'VISUAL', 'PAGER',
  // language runtimes: module search paths and startup hooks
  'NODE_OPTIONS', 'NODE_PATH', 'NODE_EXTRA_CA_CERTS', 'NODE_TLS_REJECT_UNAUTHORIZED',
  'PYTHONPATH', 'PYTHONHOME', 'PYTHONSTARTUP', 'PERL5LIB', 'PERL5OPT', 'PERLLIB', 'RUBYOPT', 'RUBYLIB',
  'JAVA_TOOL_OPTIONS', '_JAVA_OPTIONS', 'JDK_JAVA_OPTIONS', 'CLASSPATH',
  // git / ssh helpers that run programs
  'GIT_SSH', 'GIT_SSH_COMMAND', 'GIT_EXEC_PATH', 'GIT_ASKPASS', 'SSH_ASKPASS', 'GIT_PAGER', 'GIT_DIR',
  'GIT_WORK_TREE', 'GIT_CONFIG', 'SSH_AUTH_SOCK',
  // TLS trust and proxies: would redirect or intercept the job's traffic
  'SSL_CERT_FILE', 'SSL_CERT_DIR', 'CURL_CA_BUNDLE', 'REQUESTS_CA_BUNDLE',
  'HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'NO_PROXY',
  // the CI runner's own control files
  'GITHUB_ENV', 'GITHUB_PATH', 'GITHUB_OUTPUT', 'GITHUB_STATE', 'GITHUB_STEP_SUMMARY',
];

/** Prefixes a credential may never set: loader hooks, bash exported functions, git/npm config
 *  injection, and Custos's own settings (CUSTOS_CI_TOKEN, CUSTOS_URL…). */
export const RESERVED_ENV_PREFIXES: readonly string[] = ['LD_', 'DYLD_', 'BASH_FUNC_', 'GIT_CONFIG_', 'NPM_CONFIG_', 'CUSTOS_'];

const RESERVED = new Set(RESERVED_ENV_NAMES);

export function isReservedEnvName(name: string): boolean {
  const upper = name.toUpperCase();
  return RESERVED.has(upper) || RESERVED_ENV_PREFIXES.some((p) => upper.startsWith(p));
}

/** Portable env-var name: what every POSIX shell can `export`. */
const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** "Stripe prod" → STRIPE_PROD; "2fa-key" → _2FA_KEY; "!!!" → "" (the caller refuses empty). */
export function deriveEnvName(credentialName: string): string {
  let name = credentialName.toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/^_+|_+$/g, '');
  if (/^[0-9]/.test(name)) name = `_${name}`;
  return name;
}

export interface EnvEntry {
  /** The variable name. */
  name: string;
  value: string;
  /** The credential it came from (for error messages and --verbose; never a value). */
  credential: string;
  /** True for secret values (masked), false for non-secret config such as a region. */
  secret: boolean;
}

export interface BuildEnvOptions {
  /** Name of the SigV4 credential that gets the unprefixed AWS_* names when several are injected. */
  awsDefault?: string | undefined;
}

function fail(code: 'CUSTOS_ERR_VALIDATION' | 'CUSTOS_ERR_CONFLICT', message: string): never {
  throw new CustosError(code, message);
}

function required(c: CiCredential, field: string): string {
  const v = c.secret[field];
  if (typeof v !== 'string' || v.length === 0) {
    fail('CUSTOS_ERR_VALIDATION', `Credential "${c.name}" (${c.authScheme}) has no "${field}" secret field; it cannot be injected.`);
  }
  return v;
}

function optional(c: CiCredential, field: string): string | undefined {
  const v = c.secret[field];
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

function baseName(c: CiCredential): string {
  if (c.envName !== null) {
    if (!ENV_NAME_RE.test(c.envName)) {
      fail('CUSTOS_ERR_VALIDATION', `Credential "${c.name}" has envName "${c.envName}", which is not a valid environment variable name (letters, digits and _; not starting with a digit).`);
    }
    return c.envName;
  }
  const derived = deriveEnvName(c.name);
  if (derived === '') {
    fail('CUSTOS_ERR_VALIDATION', `Cannot derive an environment variable name from credential "${c.name}": give it letters or digits, or set its envName.`);
  }
  return derived;
}

function configString(c: CiCredential, key: string): string | undefined {
  const v = c.config[key];
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

/**
 * The whole environment contributed by `credentials`, in a stable order, or a CustosError
 * (VALIDATION for bad names / missing fields / unknown schemes, CONFLICT for collisions and an
 * ambiguous AWS default). Nothing is returned partially.
 */
export function buildCiEnv(credentials: readonly CiCredential[], options: BuildEnvOptions = {}): EnvEntry[] {
  const entries: EnvEntry[] = [];
  const push = (c: CiCredential, name: string, value: string, secret = true): void => {
    entries.push({ name, value, credential: c.name, secret });
  };

  const sigv4 = credentials.filter((c) => c.authScheme === 'sigv4');
  let awsDefault: CiCredential | undefined;
  if (options.awsDefault !== undefined) {
    awsDefault = sigv4.find((c) => c.name === options.awsDefault);
    if (!awsDefault) {
      fail('CUSTOS_ERR_VALIDATION', `--aws-default "${options.awsDefault}" is not one of the injected SigV4 credentials${sigv4.length ? ` (${sigv4.map((c) => `"${c.name}"`).join(', ')})` : ' (there are none)'}.`);
    }
  } else if (sigv4.length === 1) {
    awsDefault = sigv4[0];
  } else if (sigv4.length > 1) {
    fail('CUSTOS_ERR_CONFLICT', `${sigv4.length} SigV4 credentials (${sigv4.map((c) => `"${c.name}"`).join(', ')}) would each set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. Pick one with --only NAME, or choose the one that gets the AWS_* names with --aws-default NAME (the others keep their <NAME>_AWS_* variables).`);
  }
  const databases = credentials.filter((c) => c.authScheme === 'database');

  for (const c of credentials) {
    const base = baseName(c);
    switch (c.authScheme) {
      case 'bearer':
      case 'header':
        push(c, base, required(c, 'value'));
        break;
      case 'database': {
        const name = c.envName !== null || /(^|_)URL$/.test(base) ? base : `${base}_URL`;
        const dsn = required(c, 'dsn');
        push(c, name, dsn);
        if (databases.length === 1 && name !== 'DATABASE_URL') push(c, 'DATABASE_URL', dsn);
        break;
      }
      case 'sigv4': {
        const akid = required(c, 'accessKeyId');
        const secret = required(c, 'secretAccessKey');
        const session = optional(c, 'sessionToken');
        const region = configString(c, 'region');
        const prefixes = c === awsDefault ? [`${base}_`, ''] : [`${base}_`];
        for (const p of prefixes) {
          push(c, `${p}AWS_ACCESS_KEY_ID`, akid);
          push(c, `${p}AWS_SECRET_ACCESS_KEY`, secret);
          if (session !== undefined) push(c, `${p}AWS_SESSION_TOKEN`, session);
          if (region !== undefined) push(c, `${p}AWS_REGION`, region, false);
        }
        if (c === awsDefault && region !== undefined) push(c, 'AWS_DEFAULT_REGION', region, false);
        break;
      }
      case 'oauth2': {
        push(c, `${base}_CLIENT_ID`, required(c, 'clientId'));
        push(c, `${base}_CLIENT_SECRET`, required(c, 'clientSecret'));
        const refresh = optional(c, 'refreshToken');
        if (refresh !== undefined) push(c, `${base}_REFRESH_TOKEN`, refresh);
        break;
      }
      case 'ssh': {
        push(c, `${base}_PRIVATE_KEY`, required(c, 'privateKey'));
        const pass = optional(c, 'passphrase');
        if (pass !== undefined) push(c, `${base}_PASSPHRASE`, pass);
        break;
      }
      default:
        fail('CUSTOS_ERR_VALIDATION', `Credential "${c.name}" has auth scheme "${c.authScheme}", which this version of custos cannot inject; leave it out with --only, or upgrade custos.`);
    }
  }

  // Whole-set checks after building, so the error can name both sides of a collision.
  const seen = new Map<string, EnvEntry>();
  for (const e of entries) {
    if (isReservedEnvName(e.name)) {
      fail('CUSTOS_ERR_VALIDATION', `Credential "${e.credential}" would set ${e.name}, which custos run refuses to override (it changes what programs run or where they connect). Rename the credential or set its envName.`);
    }
    // Upper-cased: Windows runners treat env names case-insensitively, and STRIPE vs stripe is a trap anyway.
    const key = e.name.toUpperCase();
    const prior = seen.get(key);
    if (prior) {
      fail('CUSTOS_ERR_CONFLICT', prior.credential === e.credential
        ? `Credential "${e.credential}" would set ${e.name} twice; set its envName.`
        : `Credentials "${prior.credential}" and "${e.credential}" would both set ${e.name}. Rename one, set its envName, or pick one with --only.`);
    }
    seen.set(key, e);
  }
  return entries;
}
