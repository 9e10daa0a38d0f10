/** The official MCP SDK client over Streamable HTTP, as an agent would register Custos. */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export interface Agent {
  client: Client;
  call(name: string, args?: Record<string, unknown>): Promise<{ isError: boolean; text: string; structured: any }>;
  close(): Promise<void>;
}

export async function connectAgent(baseUrl: string, token: string, headers: Record<string, string> = {}): Promise<Agent> {
  const client = new Client({ name: 'custos-test-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}`, ...headers } },
  });
  await client.connect(transport);
  return {
    client,
    async call(name, args = {}) {
      const r = await client.callTool({ name, arguments: args });
      const content = r.content as Array<{ type: string; text?: string }>;
      return { isError: r.isError === true, text: content.map((c) => c.text ?? '').join(''), structured: r.structuredContent };
    },
    close: () => client.close(),
  };
}
