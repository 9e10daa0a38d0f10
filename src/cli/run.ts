/**
 * `custos run`: CI injection. Fetches the plaintext of the credentials a CI token may reveal and
 * runs a command with them in its environment (or exports them to a file). docs/ci.md is the guide.
 *
 *   custos run [--workspace W] [--only NAME]… [--aws-default NAME] [--no-mask] [--verbose] -- <command> [args…]
 *   custos run [--format dotenv|json] export [--workspace W] [--only NAME]… [--output FILE [--force]]
 *
 * Everything that can fail (arguments, token shape, the service's answer, env-var naming) is
 * checked BEFORE the command starts, with one `custos run: …` line on stderr and a documented exit
 * code (src/ci/exit-codes.ts); a refused run never runs anything.
 *
 * Start-up budget: this file sits in front of every CI command, so its import graph is node:
 * builtins and src/ci only (no zod, pino or typeorm); bench/run.ts measures it.
 */
import type { Readable, Writable } from 'node:stream';
import { isCustosError } from '../errors.ts';
import { buildCiEnv, type EnvEntry } from '../ci/env-names.ts';
import { CiRunError, EXIT } from '../ci/exit-codes.ts';
import { exportEnv, type ExportFormat } from '../ci/export-env.ts';
import { fetchCiSecrets, readCiToken, secretsUrl } from '../ci/secrets-client.ts';
import { runChild } from '../ci/run-child.ts';
import type { CiCredential } from '../ci/contract.ts';

export const RUN_USAGE = `Usage:
  custos run [options] -- <command> [args…]
  custos run [--format dotenv|json] export [options] [--output FILE [--force]]

Runs <command> with the secrets a CI token may reveal in its environment.
Environment: CUSTOS_CI_TOKEN (custos_ci_…, required), CUSTOS_URL (the service, required).

Options:
  --workspace W        workspace id or name (default: the token's workspace)
  --only NAME          inject only this credential (repeatable)
  --aws-default NAME   the SigV4 credential that gets the unprefixed AWS_* names
  --no-mask            do not mask secret values in the command's output
  --verbose            print the injected variable names (never values) on stderr
  --format F           export format: dotenv (default) or json
  --output FILE        export to FILE (created with mode 0600) instead of stdout
  --force              let export replace an existing FILE
  -h, --help           this text

Exit codes: the command's own (128+N if killed by signal N); before it runs: 2 usage,
3 token refused / no reveal permission, 4 service unreachable, 5 not found,
6 environment refused (name collision…), 126 cannot execute, 127 command not found.
See docs/ci.md.
`;

export interface RunArgs {
  mode: 'run' | 'export' | 'help';
  workspace: string | undefined;
  only: string[];
  awsDefault: string | undefined;
  mask: boolean;
  verbose: boolean;
  format: ExportFormat | undefined;
  output: string | undefined;
  force: boolean;
  command: string[];
}

const VALUE_OPTIONS = new Set(['--workspace', '--only', '--aws-default', '--format', '--output']);

/** Parses `custos run` arguments (without the leading `run`). Throws CiRunError(USAGE). */
export function parseRunArgs(argv: readonly string[]): RunArgs {
  const args: RunArgs = {
    mode: 'run', workspace: undefined, only: [], awsDefault: undefined, mask: true, verbose: false,
    format: undefined, output: undefined, force: false, command: [],
  };
  let sawExport = false;
  let sawDashDash = false;
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i]!;
    if (arg === '--') {
      sawDashDash = true;
      args.command = argv.slice(i + 1);
      break;
    }
    let inline: string | undefined;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0) {
      inline = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    if (arg === '-w') arg = '--workspace';
    if (arg === '-o') arg = '--output';
    if (VALUE_OPTIONS.has(arg)) {
      const value = inline ?? argv[++i];
      if (value === undefined || value === '' || (inline === undefined && value.startsWith('--'))) {
        throw new CiRunError(EXIT.USAGE, `${arg} needs a value.`);
      }
      if (arg === '--workspace') args.workspace = value;
      else if (arg === '--only') args.only.push(value);
      else if (arg === '--aws-default') args.awsDefault = value;
      else if (arg === '--output') args.output = value;
      else if (value === 'dotenv' || value === 'json') args.format = value;
      else throw new CiRunError(EXIT.USAGE, `--format must be dotenv or json, not "${value}".`);
      continue;
    }
    if (inline !== undefined) throw new CiRunError(EXIT.USAGE, `${arg} takes no value.`);
    switch (arg) {
      case '-h':
      case '--help':
        return { ...args, mode: 'help' };
      case '--no-mask': args.mask = false; break;
      case '--verbose': case '-v': args.verbose = true; break;
      case '--force': args.force = true; break;
      case 'export': sawExport = true; break;
      default:
        if (arg.startsWith('-')) throw new CiRunError(EXIT.USAGE, `unknown option ${arg} (see custos run --help).`);
        throw new CiRunError(EXIT.USAGE, `unexpected "${arg}": put the command after --, e.g. custos run -- ${arg}`);
    }
  }
  if (sawExport) {
    if (sawDashDash) throw new CiRunError(EXIT.USAGE, 'export takes no command; use either export or -- <command>.');
    return { ...args, mode: 'export', format: args.format ?? 'dotenv' };
  }
  if (args.format !== undefined || args.output !== undefined || args.force) {
    throw new CiRunError(EXIT.USAGE, '--format, --output and --force only apply to export (custos run --format dotenv export).');
  }
  if (!sawDashDash || args.command.length === 0) {
    throw new CiRunError(EXIT.USAGE, 'no command given: custos run [options] -- <command> [args…] (see custos run --help).');
  }
  if (args.command[0] === '') throw new CiRunError(EXIT.USAGE, 'the command name is empty.');
  return args;
}

export interface RunIo {
  stdout?: Writable;
  stderr?: Writable;
  /** undefined = the child inherits this process's stdin. */
  stdin?: Readable;
}

/** Keeps the credentials the user asked for; an --only name the service did not return is a 404. */
function selectCredentials(all: CiCredential[], only: string[]): CiCredential[] {
  if (only.length === 0) return all;
  const wanted = new Set(only);
  const picked = all.filter((c) => wanted.has(c.name));
  const missing = only.filter((n) => !picked.some((c) => c.name === n));
  if (missing.length > 0) {
    throw new CiRunError(EXIT.NOT_FOUND, `credential ${missing.map((n) => `"${n}"`).join(', ')} not found in the workspace (or not allowed for this CI token).`);
  }
  return picked;
}

/** The whole command; resolves to the process exit code. Never throws. */
export async function runCommand(argv: string[], env: NodeJS.ProcessEnv, io: RunIo = {}): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  try {
    const args = parseRunArgs(argv);
    if (args.mode === 'help') {
      stdout.write(RUN_USAGE);
      return 0;
    }
    const token = readCiToken(env.CUSTOS_CI_TOKEN);
    const url = secretsUrl(env.CUSTOS_URL, env.CUSTOS_INSECURE_HTTP === '1');
    const answer = await fetchCiSecrets({
      url,
      token,
      request: {
        ...(args.workspace !== undefined ? { workspace: args.workspace } : {}),
        ...(args.only.length > 0 ? { only: args.only } : {}),
      },
    });
    const credentials = selectCredentials(answer.credentials, args.only);
    let entries: EnvEntry[];
    try {
      entries = buildCiEnv(credentials, { awsDefault: args.awsDefault });
    } catch (err) {
      if (isCustosError(err)) throw new CiRunError(EXIT.ENV_REFUSED, err.message);
      throw err;
    }
    // From here on the entries are the only holders of the secret strings (see runChild's note).
    for (const c of answer.credentials) c.secret = {};
    if (args.verbose) {
      stderr.write(`custos run: workspace "${answer.workspace.name}": ${credentials.length} credential(s) → ${entries.map((e) => e.name).join(', ') || '(none)'}\n`);
    }

    if (args.mode === 'export') {
      try {
        await exportEnv(entries, { format: args.format ?? 'dotenv', output: args.output, force: args.force, stdout, stderr });
      } finally {
        entries.length = 0;
      }
      return 0;
    }

    // The child's environment: ours, minus the CI token (the command never needs it and must not
    // be able to fetch more secrets with it), plus the secrets, which override same-named variables.
    const childEnv: NodeJS.ProcessEnv = { ...env };
    delete childEnv.CUSTOS_CI_TOKEN;
    for (const e of entries) childEnv[e.name] = e.value;
    const secrets = entries.filter((e) => e.secret).map((e) => e.value);
    entries.length = 0;
    const [command, ...commandArgs] = args.command as [string, ...string[]];
    return await runChild({ command, args: commandArgs, env: childEnv, secrets, mask: args.mask, stdin: io.stdin, stdout, stderr });
  } catch (err) {
    if (err instanceof CiRunError) {
      stderr.write(`custos run: ${err.message}\n`);
      return err.exitCode;
    }
    // Unknown failures: no message text (it could carry anything); the class name helps a bug report.
    stderr.write(`custos run: internal error (${err instanceof Error ? err.name : typeof err}).\n`);
    return EXIT.FAILURE;
  }
}
