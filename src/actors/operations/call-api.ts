/**
 * call_api inside the actor (DESIGN.md §9): the kind injects the credential into a request whose
 * URL, method and agent headers were already checked, the broker sends it (no redirects, address
 * guard at connect time, caps), and the response is scrubbed of every value the call put on the
 * wire before anything leaves the actor. Injected Buffers are zeroed after scrubbing.
 */
import { CustosError } from '../../errors.ts';
import { isInjector, type OutboundRequest } from '../../kinds/credential-kind.ts';
import { kindFor } from '../../kinds/registry.ts';
import { renderBody, safeResponseHeaders, scrubResponse, sendOutbound, type SendOptions } from '../../broker/index.ts';
import type { UseContext } from '../workspace-actor.ts';
import type { CallApiResult, CredentialRow, PreparedCall } from '../../core/ports.ts';

export async function callApiInActor(row: CredentialRow, call: PreparedCall, use: UseContext, send: SendOptions, previewBytes: number): Promise<CallApiResult> {
  const kind = kindFor(row.auth_scheme);
  if (!isInjector(kind)) throw new CustosError('CUSTOS_ERR_VALIDATION', `Service '${row.name}' is a ${row.auth_scheme} credential; call_api works with HTTP credentials.`);
  const req: OutboundRequest = { method: call.method, url: call.url, headers: { ...call.headers }, body: call.body };
  const injected = await kind.inject(req, use.secret, JSON.parse(row.config) as Record<string, unknown>, use.kind);
  try {
    const raw = await sendOutbound(req, send);
    // Scrub against everything injected and every secret field (an echo of any of them is a leak).
    const scrubbed = scrubResponse(raw, [...injected, ...Object.values(use.secret)]);
    // Render (which copies into strings/values) before zeroing: scrubResponse returns the very same
    // Buffer when there was nothing to scrub.
    const rendered = renderBody(scrubbed.body, scrubbed.headers['content-type'], previewBytes, scrubbed.truncated);
    raw.body.fill(0);
    return {
      status: scrubbed.status, headers: safeResponseHeaders(scrubbed.headers), body: rendered.body, encoding: rendered.encoding,
      truncated: rendered.truncated, latencyMs: scrubbed.latencyMs,
    };
  } finally {
    for (const b of injected) b.fill(0);
    // The request's header strings die with `req`; drop the references now rather than at GC.
    for (const k of Object.keys(req.headers)) delete req.headers[k];
  }
}
