import { z } from 'zod';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { requestContextOf, run, type ToolDeps } from '../context.ts';

export const serviceShape = {
  id: z.string(),
  name: z.string(),
  workspace: z.string(),
  workspaceId: z.string(),
  service: z.string().describe('catalog id, or "custom"'),
  authScheme: z.enum(['bearer', 'header', 'sigv4', 'oauth2', 'database', 'ssh']),
  baseUrl: z.string().nullable(),
  status: z.enum(['pending', 'ready']),
  health: z.enum(['ok', 'reauth_required']),
  allowedMethods: z.array(z.string()),
  config: z.record(z.string(), z.unknown()),
};

export function registerListServices(server: McpServer, deps: ToolDeps): void {
  server.registerTool('list_services', {
    title: 'List services',
    description: 'Lists the services (stored credentials) this agent may see or use, with their non-secret configuration only: '
      + 'name, workspace, auth scheme, base URL, status and the HTTP methods you may call. Secrets are never shown. '
      + 'A service with status "pending" has no secret yet: a person must supply it in the Custos app before call_api works. '
      + 'Pass a service\'s name (or "<workspace>/<name>" when the name is not unique) to call_api or query_db.',
    inputSchema: {},
    outputSchema: { services: z.array(z.object(serviceShape)) },
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, (_args, extra) => run(async () => {
    const ctx = requestContextOf(extra);
    await deps.broker.requireTool(ctx, 'list_services');
    return { services: await deps.broker.listServices(ctx) };
  }));
}
