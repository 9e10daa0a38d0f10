/** What every tool handler gets: the authenticated request context and the core services. */
import { CustosError, toCustosError } from '../errors.ts';
import type { RequestContext } from '../core/context.ts';
import type { BrokerService } from '../core/broker.ts';
import type { QueryService } from '../core/query.ts';

export interface ToolDeps {
  broker: BrokerService;
  query: QueryService;
}

export interface AuthExtra {
  authInfo?: { extra?: Record<string, unknown> };
}

export function requestContextOf(extra: AuthExtra): RequestContext {
  const ctx = extra.authInfo?.extra?.custos as RequestContext | undefined;
  if (!ctx) throw new CustosError('CUSTOS_ERR_UNAUTHENTICATED', 'Missing agent token.');
  return ctx;
}

export type ToolResult = {
  content: Array<{ type: 'text'; text: string }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
};

export function ok(result: Record<string, unknown>): ToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result };
}

/**
 * Errors become tool results the model reads: the stable code and our exposed message only, written
 * to say what to do next. Anything unexpected is "internal error" with no detail.
 */
export function toolError(err: unknown): ToolResult {
  const e = toCustosError(err);
  const message = e.expose ? e.message : 'Internal error.';
  return { content: [{ type: 'text', text: `${e.code}: ${message}` }], isError: true };
}

export async function run(fn: () => Promise<Record<string, unknown>>): Promise<ToolResult> {
  try {
    return ok(await fn());
  } catch (err) {
    return toolError(err);
  }
}
