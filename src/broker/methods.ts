/**
 * HTTP method policy (DESIGN.md §9): an exact, uppercase allow-list, further cut by the agent token's
 * method scope. Exactness matters: some servers treat methods case-insensitively and some proxies do
 * not, so `get`/`Post` could be read differently along the path; CR/LF or spaces in a method would be
 * request-line injection; TRACE (reflects credentials back) and CONNECT (tunnels) are never offered.
 */
import { CustosError } from '../errors.ts';

export const BROKER_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
export type BrokerMethod = (typeof BROKER_METHODS)[number];

const BROKER_METHOD_SET: ReadonlySet<string> = new Set(BROKER_METHODS);
/** RFC 9110 token characters; anything else is malformed, not merely "not allowed". */
const TOKEN_RE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,32}$/;

export function isBrokerMethod(method: string): method is BrokerMethod {
  return BROKER_METHOD_SET.has(method);
}

/**
 * Returns `method` when it is one of BROKER_METHODS and in `allowed` (the token's scope; entries
 * outside BROKER_METHODS never widen the list). Malformed input (not a token, wrong case of a known
 * method) is CUSTOS_ERR_VALIDATION; a well-formed method outside the scope is
 * CUSTOS_ERR_METHOD_NOT_ALLOWED. Messages never echo malformed input.
 */
export function checkMethod(method: string, allowed: readonly string[]): BrokerMethod {
  if (typeof method !== 'string' || !TOKEN_RE.test(method)) {
    throw new CustosError(
      'CUSTOS_ERR_VALIDATION',
      `The HTTP method is malformed; use one of ${BROKER_METHODS.join(', ')} (exact uppercase).`,
    );
  }
  if (!isBrokerMethod(method)) {
    if (isBrokerMethod(method.toUpperCase())) {
      throw new CustosError('CUSTOS_ERR_VALIDATION', `HTTP methods are exact uppercase: use ${method.toUpperCase()}.`);
    }
    throw new CustosError(
      'CUSTOS_ERR_METHOD_NOT_ALLOWED',
      `The HTTP method ${method} is not supported by the broker; use one of ${BROKER_METHODS.join(', ')}.`,
    );
  }
  if (!allowed.includes(method)) {
    const scope = allowed.filter(isBrokerMethod);
    throw new CustosError(
      'CUSTOS_ERR_METHOD_NOT_ALLOWED',
      `This token may not use ${method}; its methods are: ${scope.length > 0 ? scope.join(', ') : 'none'}.`,
    );
  }
  return method;
}
