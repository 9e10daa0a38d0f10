import { z } from 'zod';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { requestContextOf, run, type ToolDeps } from '../context.ts';

export function registerCallApi(server: McpServer, deps: ToolDeps): void {
  server.registerTool('call_api', {
    title: 'Call an API through the broker',
    description: 'Makes an HTTP request to a service\'s upstream API. Custos attaches the stored credential on the way out and '
      + 'returns the upstream\'s status, a safe subset of its headers, and its body; the credential itself is never returned. '
      + 'path is relative to the service\'s base URL and may include a query string (e.g. "/v1/models?limit=5"); absolute URLs, '
      + '"..", and other attempts to leave the base URL are refused. method is an upper-case HTTP method your token allows. '
      + 'Do not send Authorization or other credential headers: they are refused. Redirects are not followed; a 3xx comes back as is. '
      + 'Large bodies are truncated (truncated: true).',
    inputSchema: {
      service: z.string().min(1).max(200).describe('service name from list_services, or "<workspace>/<name>"'),
      method: z.string().min(1).max(16).describe('GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS'),
      path: z.string().min(1).max(8192).describe('path under the base URL, with optional ?query'),
      headers: z.record(z.string(), z.string()).optional().describe('extra non-credential request headers'),
      body: z.union([z.string(), z.record(z.string(), z.unknown()), z.array(z.unknown())]).optional()
        .describe('request body: a JSON object/array (sent as application/json) or a string'),
    },
    outputSchema: {
      service: z.string(),
      status: z.number().int(),
      headers: z.record(z.string(), z.string()),
      body: z.unknown(),
      encoding: z.enum(['json', 'text', 'base64']),
      truncated: z.boolean(),
      latencyMs: z.number(),
    },
    annotations: { readOnlyHint: false, openWorldHint: true },
  }, (args, extra) => run(async () => {
    const ctx = requestContextOf(extra);
    await deps.broker.requireTool(ctx, 'call_api');
    return { ...(await deps.broker.callApi(ctx, args)) };
  }));
}
