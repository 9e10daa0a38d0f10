/**
 * The MCP server: one per process behind the stateless JSON transport (transport.ts), so any node can
 * serve any call; one registration per tool file.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ToolDeps } from './context.ts';
import { registerCallApi } from './tools/call-api.ts';
import { registerCreateService } from './tools/create-service.ts';
import { registerListServices } from './tools/list-services.ts';
import { registerQueryDb } from './tools/query-db.ts';

export const SERVER_INFO = { name: 'custos', version: '0.1.0' };

const INSTRUCTIONS = 'Custos brokers credentials: call list_services to see what you may use, then call_api (HTTP) or '
  + 'query_db (read-only SQL) with a service name. Custos injects the secret on the way out; you never see it. '
  + 'A "pending" service needs a person to supply its secret in the Custos app first.';

export type ToolRegistrar = (server: McpServer, deps: ToolDeps) => void;

export const TOOL_REGISTRARS: ToolRegistrar[] = [registerListServices, registerCreateService, registerCallApi, registerQueryDb];

export function buildMcpServer(deps: ToolDeps, registrars: ToolRegistrar[] = TOOL_REGISTRARS): McpServer {
  const server = new McpServer(SERVER_INFO, { instructions: INSTRUCTIONS, capabilities: { tools: {} } });
  for (const register of registrars) register(server, deps);
  return server;
}
