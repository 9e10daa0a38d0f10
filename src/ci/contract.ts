/**
 * The wire contract of POST /api/v1/ci/secrets as the `custos run` client sees it, and its
 * hand-written validator. Hand-written on purpose: `custos run` sits in front of every CI command,
 * so its import graph is node: builtins only (no zod) to keep start-up under the 0.3 s budget.
 *
 * A response that does not match is refused as a whole: a half-understood answer must not lead to
 * a command running with a half-built environment.
 */

export const CI_AUTH_SCHEMES = ['bearer', 'header', 'sigv4', 'oauth2', 'database', 'ssh'] as const;
export type CiAuthScheme = (typeof CI_AUTH_SCHEMES)[number];

export interface CiCredential {
  id: string;
  name: string;
  /** Kept as a plain string: a newer service may send a scheme this client does not know yet. */
  authScheme: string;
  /** Per-credential override of the env-var name (see env-names.ts). */
  envName: string | null;
  /** Non-secret config (region, service, headerName, host…). Never masked, never secret. */
  config: Record<string, unknown>;
  /** Secret fields by name (value | accessKeyId, secretAccessKey, sessionToken? | …). */
  secret: Record<string, string>;
}

export interface CiSecretsResponse {
  workspace: { id: string; name: string };
  credentials: CiCredential[];
}

export interface CiSecretsRequest {
  workspace?: string;
  only?: string[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Returns the validated response or a short description of the first problem. The description
 * names fields and credential names only, never a value (values may be secrets).
 */
export function parseCiSecretsResponse(body: unknown): CiSecretsResponse | string {
  if (!isRecord(body)) return 'the answer is not a JSON object';
  const ws = body.workspace;
  if (!isRecord(ws) || typeof ws.id !== 'string' || typeof ws.name !== 'string') {
    return 'the answer has no workspace {id, name}';
  }
  if (!Array.isArray(body.credentials)) return 'the answer has no credentials array';
  const credentials: CiCredential[] = [];
  for (const [i, c] of body.credentials.entries()) {
    if (!isRecord(c) || typeof c.name !== 'string' || typeof c.id !== 'string') {
      return `credential #${i + 1} has no id and name`;
    }
    if (typeof c.authScheme !== 'string') return `credential "${c.name}" has no authScheme`;
    if (c.envName !== undefined && c.envName !== null && typeof c.envName !== 'string') {
      return `credential "${c.name}" has a non-string envName`;
    }
    const config = c.config === undefined || c.config === null ? {} : c.config;
    if (!isRecord(config)) return `credential "${c.name}" has a non-object config`;
    if (!isRecord(c.secret)) return `credential "${c.name}" has no secret object`;
    const secret: Record<string, string> = {};
    for (const [field, value] of Object.entries(c.secret)) {
      if (value === null || value === undefined) continue; // optional field absent
      if (typeof value !== 'string') return `credential "${c.name}" secret field "${field}" is not a string`;
      secret[field] = value;
    }
    credentials.push({
      id: c.id,
      name: c.name,
      authScheme: c.authScheme,
      envName: typeof c.envName === 'string' ? c.envName : null,
      config,
      secret,
    });
  }
  return { workspace: { id: ws.id, name: ws.name }, credentials };
}
