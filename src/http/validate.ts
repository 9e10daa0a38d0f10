/** zod validation at the edge: every input is parsed by a strict schema; the first issue is named. */
import type { ZodType } from 'zod';
import { CustosError } from '../errors.ts';

export function parseInput<T>(schema: ZodType<T>, input: unknown, where = 'body'): T {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const field = issue.path.length ? issue.path.join('.') : where;
  let message = issue.message;
  if (issue.code === 'unrecognized_keys') message = `unknown field(s): ${issue.keys.join(', ')}`;
  throw new CustosError('CUSTOS_ERR_VALIDATION', `Invalid ${where}: ${field}: ${message}`, {
    details: { issues: result.error.issues.slice(0, 10).map((i) => ({ path: i.path.join('.'), code: i.code })) },
  });
}
