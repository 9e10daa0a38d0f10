import { z } from 'zod';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { requestContextOf, run, type ToolDeps } from '../context.ts';
import { serviceShape } from './list-services.ts';

export function registerCreateService(server: McpServer, deps: ToolDeps): void {
  server.registerTool('create_service', {
    title: 'Register a service',
    description: 'Registers an upstream API as a new service with its secret left blank. The service is created as "pending"; '
      + 'a person must then supply the secret (API key, token, …) in the Custos app, and only then can call_api use it. '
      + 'You never see or handle the secret. authScheme: "bearer" sends Authorization: Bearer <secret>; "header" sends the '
      + 'secret in headerName (e.g. x-api-key); "sigv4" signs requests AWS-style; "oauth2" uses a refreshed access token.',
    inputSchema: {
      name: z.string().min(1).max(100).describe('a short name for the service, unique in its workspace'),
      baseUrl: z.string().url().max(2048).describe('the upstream base URL, e.g. https://api.example.com/v1; calls stay under it'),
      authScheme: z.enum(['bearer', 'header', 'sigv4', 'oauth2']),
      headerName: z.string().min(1).max(100).optional().describe('for authScheme "header": the header carrying the secret'),
      service: z.string().min(1).max(64).optional().describe('a catalog id (see the Custos app), or omit for a custom service'),
      workspace: z.string().min(1).max(100).optional().describe('workspace name or id; required when you can write to several'),
    },
    outputSchema: { service: z.object(serviceShape), supplySecretAt: z.string() },
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  }, (args, extra) => run(async () => {
    const ctx = requestContextOf(extra);
    await deps.broker.requireTool(ctx, 'create_service');
    return { ...(await deps.broker.createService(ctx, args)) };
  }));
}
