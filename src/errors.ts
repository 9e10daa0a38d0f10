/**
 * One error class for the whole service. Every refusal carries a stable `CUSTOS_ERR_*` code that
 * clients and tests can rely on, an HTTP status, and `expose`: whether `message` may be shown to
 * the caller. Messages that are exposed must never contain a secret value; unknown errors are
 * rendered as CUSTOS_ERR_INTERNAL with no detail at all.
 */

export const ERROR_CODES = {
  CUSTOS_ERR_VALIDATION: 400,
  CUSTOS_ERR_MALFORMED_JSON: 400,
  CUSTOS_ERR_UNSUPPORTED_MEDIA_TYPE: 415,
  CUSTOS_ERR_BODY_TOO_LARGE: 413,
  CUSTOS_ERR_UNAUTHENTICATED: 401,
  CUSTOS_ERR_TOKEN_INVALID: 401,
  CUSTOS_ERR_CSRF: 403,
  CUSTOS_ERR_FORBIDDEN: 403,
  CUSTOS_ERR_ORIGIN_REFUSED: 403,
  CUSTOS_ERR_NOT_FOUND: 404,
  CUSTOS_ERR_CONFLICT: 409,
  CUSTOS_ERR_PLAN_LIMIT: 403,
  CUSTOS_ERR_RATE_LIMITED: 429,
  CUSTOS_ERR_NOT_READY: 409,
  CUSTOS_ERR_REAUTH_REQUIRED: 409,
  CUSTOS_ERR_METHOD_NOT_ALLOWED: 403,
  CUSTOS_ERR_TOOL_NOT_ALLOWED: 403,
  CUSTOS_ERR_URL_REFUSED: 400,
  CUSTOS_ERR_HEADER_REFUSED: 400,
  CUSTOS_ERR_DESTINATION_REFUSED: 403,
  CUSTOS_ERR_UPSTREAM: 502,
  CUSTOS_ERR_UPSTREAM_TIMEOUT: 504,
  CUSTOS_ERR_SQL_REFUSED: 400,
  CUSTOS_ERR_QUERY_TIMEOUT: 504,
  CUSTOS_ERR_DATABASE: 502,
  CUSTOS_ERR_INTEGRITY: 500,
  CUSTOS_ERR_KEY_BACKEND_UNAVAILABLE: 503,
  CUSTOS_ERR_AUDIT_UNAVAILABLE: 503,
  CUSTOS_ERR_UNAVAILABLE: 503,
  CUSTOS_ERR_CONFIG: 500,
  CUSTOS_ERR_INTERNAL: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface CustosErrorOptions {
  /** Whether `message` may be shown to the caller (default true: our messages are written for users). */
  expose?: boolean;
  /** Non-secret structured detail, rendered as `details` (e.g. the plan limit that was hit). */
  details?: Record<string, unknown>;
  /** Internal cause; never rendered, only logged through an allow-listing serializer. */
  cause?: unknown;
}

export class CustosError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly expose: boolean;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: CustosErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CustosError';
    this.code = code;
    this.status = ERROR_CODES[code];
    this.expose = options.expose ?? true;
    this.details = options.details;
  }

  /** The wire shape: `{"error": {"code", "message", "details"?}}`. */
  toJSON(): { error: { code: ErrorCode; message: string; details?: Record<string, unknown> } } {
    const message = this.expose ? this.message : 'Internal error.';
    return { error: { code: this.code, message, ...(this.details ? { details: this.details } : {}) } };
  }
}

export function isCustosError(err: unknown): err is CustosError {
  return err instanceof CustosError;
}

/** Normalise anything thrown into a CustosError without leaking its message. */
export function toCustosError(err: unknown): CustosError {
  if (err instanceof CustosError) return err;
  return new CustosError('CUSTOS_ERR_INTERNAL', 'Internal error.', { expose: false, cause: err });
}

/** The secret-free "not found" used for anything the caller may not see (no existence oracle). */
export function notFound(what: string): CustosError {
  return new CustosError('CUSTOS_ERR_NOT_FOUND', `${what} not found.`);
}
