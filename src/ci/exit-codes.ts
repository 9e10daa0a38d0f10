/**
 * Exit codes of `custos run` (docs/ci.md, "Exit codes"). Codes 1–6 are only ever returned BEFORE the
 * command starts (nothing ran); once it has started, `custos run` exits with the command's own code
 * (or 128 + signal number), so a CI job's pass/fail is the command's. Every refusal also prints one
 * line on stderr starting with `custos run:` so the two cases can be told apart in a log.
 */
export const EXIT = {
  /** Unexpected internal failure, or the export file could not be written. */
  FAILURE: 1,
  /** Bad arguments, CUSTOS_CI_TOKEN missing or not a `custos_ci_…` token, CUSTOS_URL missing/invalid,
   *  export target exists without --force. */
  USAGE: 2,
  /** The service refused the token (401: invalid, revoked, expired) or its permission (403: no `reveal`). */
  AUTH: 3,
  /** The service could not be reached, timed out, answered 5xx/429 or something that is not the contract. */
  UNREACHABLE: 4,
  /** 404: the workspace or an --only credential name does not exist (or is not visible to the token). */
  NOT_FOUND: 5,
  /** The environment could not be built: name collision, reserved name, ambiguous AWS default,
   *  unknown auth scheme, missing secret field. */
  ENV_REFUSED: 6,
  /** The command exists but cannot be executed (permission denied, a directory…). */
  CANNOT_EXECUTE: 126,
  /** The command was not found on PATH. */
  COMMAND_NOT_FOUND: 127,
} as const;

/** A refusal with its exit code; `message` is the one line printed after `custos run: `. */
export class CiRunError extends Error {
  readonly exitCode: number;
  constructor(exitCode: number, message: string) {
    super(message);
    this.name = 'CiRunError';
    this.exitCode = exitCode;
  }
}
