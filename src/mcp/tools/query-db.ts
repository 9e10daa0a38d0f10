import { z } from 'zod';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { requestContextOf, run, type ToolDeps } from '../context.ts';

export function registerQueryDb(server: McpServer, deps: ToolDeps): void {
  server.registerTool('query_db', {
    title: 'Run a read-only SQL query',
    description: 'Runs ONE read-only PostgreSQL statement (SELECT, WITH … SELECT, VALUES, or EXPLAIN without ANALYZE) on a database '
      + 'service, through a connection you never see. Anything that writes, locks, or runs more than one statement is refused. '
      + 'Use $1, $2, … placeholders with params instead of pasting values into the SQL. Personal data (emails, phone numbers, '
      + 'card numbers, SSNs, IBANs, IP addresses, secrets) is masked in the rows you get back, and the result says which columns '
      + 'and how many values were masked. Results are capped (max_rows, and a byte cap); truncated: true says so. '
      + 'Available on the Pro and Team plans.',
    inputSchema: {
      service: z.string().min(1).max(200).describe('database service name from list_services, or "<workspace>/<name>"'),
      sql: z.string().min(1).max(100_000).describe('one read-only statement'),
      params: z.array(z.union([z.string(), z.number(), z.boolean(), z.null()])).max(1000).optional().describe('values for $1, $2, …'),
      max_rows: z.number().int().min(1).optional().describe('fewer rows than the server cap'),
    },
    outputSchema: {
      service: z.string(),
      columns: z.array(z.object({ name: z.string(), type: z.string() })),
      // Each row is an array; its items are not validated one by one (z.any), which on 1,000 rows
      // would cost as much as masking them: they come from our own executor, typed by column.
      rows: z.array(z.any()).describe('one array per row, values in column order'),
      rowCount: z.number().int(),
      truncated: z.boolean(),
      truncatedBy: z.enum(['rows', 'bytes']).optional(),
      statementType: z.string(),
      durationMs: z.number(),
      masked: z.object({ columns: z.array(z.string()), values: z.number().int() }),
    },
    annotations: { readOnlyHint: true, openWorldHint: true },
  }, (args, extra) => run(async () => {
    const ctx = requestContextOf(extra);
    await deps.broker.requireTool(ctx, 'query_db');
    return { ...(await deps.query.query(ctx, { service: args.service, sql: args.sql, params: args.params, maxRows: args.max_rows })) };
  }));
}
