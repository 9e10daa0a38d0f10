/** The broker's public surface: outbound URL, method, header policy, guarded client, scrubbing. */
export { buildUpstreamUrl, parseBaseUrl, MAX_PATH_LENGTH, MAX_BASE_URL_LENGTH } from './url.ts';
export { checkMethod, isBrokerMethod, BROKER_METHODS, type BrokerMethod } from './methods.ts';
export {
  sanitizeAgentHeaders,
  MAX_AGENT_HEADERS,
  MAX_HEADER_NAME_LENGTH,
  MAX_HEADER_VALUE_LENGTH,
  MAX_AGENT_HEADER_BYTES,
} from './headers.ts';
export { isBlockedAddress, isLoopbackAddress, privateDestinationAllowed, createGuardedConnector, type GuardOptions } from './guard.ts';
export {
  sendOutbound,
  createBrokerAgent,
  closeBrokerAgents,
  DEFAULT_MAX_REQUEST_BYTES,
  type SendOptions,
  type BrokerAgentOptions,
} from './client.ts';
export {
  scrubResponse,
  scrubBuffer,
  secretNeedles,
  safeResponseHeaders,
  renderBody,
  REDACTED,
  MIN_SECRET_BYTES,
  TRUNCATION_MARKER,
  type RenderedBody,
} from './scrub.ts';
export type { UpstreamResponse } from './types.ts';
