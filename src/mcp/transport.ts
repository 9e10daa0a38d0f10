/**
 * A stateless Streamable HTTP transport (JSON responses) for the SDK's McpServer, built on the SDK's
 * `Transport` interface: one McpServer and one of these serve every /mcp request of the process.
 *
 * Why not the SDK's own `WebStandardStreamableHTTPServerTransport`: in stateless mode it serves
 * exactly one HTTP request, so every call paid for a fresh transport, a server connect/close, a
 * Fetch `Request`, a `Response` with a web stream, and several zod guard passes per message. That
 * was about half of the CPU time of a brokered call (docs/performance.md). This class keeps the
 * wire behaviour of the SDK transport in stateless JSON mode (same status codes, same JSON-RPC error
 * bodies, same checks: Accept, Content-Type, JSON-RPC validation with the SDK's schema, batch size,
 * one initialize per batch, Mcp-Protocol-Version) and test/mcp/transport.test.ts pins it.
 *
 * Many HTTP requests share the server at once, and their JSON-RPC ids collide (every client starts
 * at 0 or 1). So each incoming request gets a process-unique internal id on its way into the SDK,
 * and its response is matched by that id and given back its original id. Nothing of one request
 * can reach another's response, and a client cannot cancel or answer another client's request:
 * client notifications and responses are acknowledged (202) and dropped, as they are meaningless
 * without a session (the SDK's stateless transport hands them to a server that has nothing pending).
 * Server-to-client messages outside a response (progress, logging) have no stream in JSON mode and
 * are dropped, as the SDK transport drops them.
 */
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import { MAX_BATCH_SIZE } from '@modelcontextprotocol/sdk/server/requestBody.js';
import {
  JSONRPCMessageSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
  type JSONRPCMessage,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';

export interface McpHttpRequest {
  accept: string | undefined;
  contentType: string | undefined;
  protocolVersion: string | undefined;
  /** The parsed JSON body. */
  body: unknown;
  authInfo: AuthInfo;
}

export interface McpHttpResponse {
  status: number;
  /** JSON text, or undefined for an empty body (202). */
  body: string | undefined;
}

type Message = JSONRPCMessage & { id?: RequestId; method?: string };

interface Pending {
  originalId: RequestId;
  resolve: (message: Message) => void;
}

function jsonError(status: number, code: number, message: string): McpHttpResponse {
  return { status, body: JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }) };
}

/** A request is a message with a method and an id; a notification has a method and no id. */
const isRequest = (m: Message): boolean => typeof m.method === 'string' && m.id !== undefined;

export interface StatelessJsonTransportOptions {
  /**
   * Methods whose (first-page) result never changes while the process runs (e.g. `tools/list`:
   * tools are registered once at start-up). The first answer is kept and later requests are
   * answered from it without reaching the server.
   */
  staticMethods?: readonly string[];
  /** Shapes a successful result for the caller (e.g. lists only the tools a token may use). */
  shapeResult?: (method: string, result: Record<string, unknown>, authInfo: AuthInfo) => Record<string, unknown>;
}

export class StatelessJsonTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport['onmessage'];
  readonly #pending = new Map<number, Pending>();
  readonly #static: Set<string>;
  readonly #staticResults = new Map<string, Record<string, unknown>>();
  readonly #shape: StatelessJsonTransportOptions['shapeResult'];
  #nextId = 1;
  #closed = false;

  constructor(options: StatelessJsonTransportOptions = {}) {
    this.#static = new Set(options.staticMethods ?? []);
    this.#shape = options.shapeResult;
  }

  async start(): Promise<void> {}

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const p of this.#pending.values()) {
      p.resolve({ jsonrpc: '2.0', id: p.originalId, error: { code: -32000, message: 'Server is shutting down.' } } as Message);
    }
    this.#pending.clear();
    this.onclose?.();
  }

  /** Called by the SDK with each outgoing message. Only responses to a pending request go anywhere. */
  async send(message: JSONRPCMessage): Promise<void> {
    const m = message as Message;
    if (typeof m.method === 'string' || typeof m.id !== 'number') return; // notification / server request: no stream
    const pending = this.#pending.get(m.id);
    if (!pending) return;
    this.#pending.delete(m.id);
    pending.resolve({ ...m, id: pending.originalId } as Message);
  }

  /** One HTTP POST: validates like the SDK transport, runs its requests, returns the response. */
  async handle(req: McpHttpRequest): Promise<McpHttpResponse> {
    // The client must accept both (a substring check, as the SDK does: Accept is a list).
    if (!req.accept?.includes('application/json') || !req.accept.includes('text/event-stream')) {
      return jsonError(406, -32000, 'Not Acceptable: Client must accept both application/json and text/event-stream');
    }
    if (!isJsonContentType(req.contentType)) {
      return jsonError(415, -32000, 'Unsupported Media Type: Content-Type must be application/json');
    }
    const raw = req.body;
    if (Array.isArray(raw) && raw.length > MAX_BATCH_SIZE) {
      return jsonError(400, -32600, `Invalid Request: Batch must not exceed ${MAX_BATCH_SIZE} messages`);
    }
    let messages: Message[];
    try {
      messages = (Array.isArray(raw) ? raw : [raw]).map((m) => JSONRPCMessageSchema.parse(m) as Message);
    } catch {
      return jsonError(400, -32700, 'Parse error: Invalid JSON-RPC message');
    }
    const initialize = messages.some((m) => isRequest(m) && m.method === 'initialize');
    if (initialize && messages.length > 1) {
      return jsonError(400, -32600, 'Invalid Request: Only one initialization request is allowed');
    }
    if (!initialize && req.protocolVersion !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(req.protocolVersion)) {
      return jsonError(400, -32000, `Bad Request: Unsupported protocol version: ${req.protocolVersion} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`);
    }
    const requests = messages.filter(isRequest);
    if (requests.length === 0) return { status: 202, body: undefined };
    if (this.#closed || !this.onmessage) return jsonError(503, -32000, 'Server is not accepting requests.');

    const answers = requests.map((m) => this.#answer(m, req.authInfo));
    const responses = await Promise.all(answers);
    // As the SDK transport: one response is sent bare, several as an array.
    return { status: 200, body: JSON.stringify(responses.length === 1 ? responses[0] : responses) };
  }

  /** One request's response: from the static cache or the server, then shaped for the caller. */
  async #answer(m: Message, authInfo: AuthInfo): Promise<Message> {
    // One cached answer per static method, for the first page only (no cursor); `_meta` (e.g. a
    // progress token) does not change a result. Anything else goes to the server: the cache is bounded.
    const params = (m as { params?: Record<string, unknown> }).params;
    const staticKey = this.#static.has(m.method!) && params?.cursor === undefined ? m.method : undefined;
    const cached = staticKey === undefined ? undefined : this.#staticResults.get(staticKey);
    const response = cached ? ({ jsonrpc: '2.0', id: m.id!, result: cached } as Message) : await this.#dispatch(m, authInfo);
    const result = (response as { result?: Record<string, unknown> }).result;
    if (!result) return response;
    if (staticKey !== undefined && !cached) this.#staticResults.set(staticKey, result);
    return this.#shape ? ({ ...response, result: this.#shape(m.method!, result, authInfo) } as Message) : response;
  }

  #dispatch(m: Message, authInfo: AuthInfo): Promise<Message> {
    return new Promise<Message>((resolve) => {
      const internalId = this.#nextId++;
      if (this.#nextId > Number.MAX_SAFE_INTEGER) this.#nextId = 1;
      this.#pending.set(internalId, { originalId: m.id!, resolve });
      try {
        this.onmessage!({ ...m, id: internalId } as JSONRPCMessage, { authInfo });
      } catch (err) {
        // The SDK answers every request it accepts; if it throws instead, answer for it.
        this.#pending.delete(internalId);
        this.onerror?.(err instanceof Error ? err : new Error(String(err)));
        resolve({ jsonrpc: '2.0', id: m.id!, error: { code: -32603, message: 'Internal error' } } as Message);
      }
    });
  }
}
