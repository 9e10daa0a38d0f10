/** Shapes shared by the broker's client and scrubber. */

/** What the upstream answered, as read by the broker (before scrubbing and header filtering). */
export interface UpstreamResponse {
  status: number;
  /** lower-case names; repeated headers joined with ", " */
  headers: Record<string, string>;
  /** at most maxResponseBytes, identity-decoded */
  body: Buffer;
  /** true when the upstream sent more than maxResponseBytes and the rest was discarded */
  truncated: boolean;
  latencyMs: number;
}
