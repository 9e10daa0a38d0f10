/**
 * Known services: picking one pre-fills the auth scheme, header name, base URL and kind config
 * (SigV4 region/service, OAuth2 token URL) of a new credential. Nothing here is secret; this list is
 * what GET /api/v1/catalog and create_service show. `custom` lets a person fill everything in.
 *
 * Entries are data, checked by test/kinds/catalog.test.ts: every config here parses with its kind's
 * configSchema, so a catalog pick can never produce a credential the kind would refuse.
 */
import type { AuthScheme } from './credential-kind.ts';

export interface CatalogEntry {
  readonly id: string;
  readonly name: string;
  /** The scheme this service uses; null only for `custom`, where the person chooses. */
  readonly authScheme: AuthScheme | null;
  /** For `header` (and informational for bearer/oauth2: `authorization`). */
  readonly headerName?: string;
  /** Where calls go; the broker keeps every call under this origin and path. Absent for non-HTTP kinds. */
  readonly baseUrl?: string;
  /** Defaults for the kind's non-secret config (e.g. { region, service } or { tokenUrl, scopes }). */
  readonly config: Readonly<Record<string, unknown>>;
  readonly docsUrl?: string;
  /** What a person should know when supplying the secret (never a secret itself). */
  readonly notes?: string;
}

const ENTRIES: CatalogEntry[] = [
  { id: 'openai', name: 'OpenAI', authScheme: 'bearer', headerName: 'authorization', baseUrl: 'https://api.openai.com/v1', config: {}, docsUrl: 'https://platform.openai.com/docs/api-reference/authentication' },
  {
    id: 'anthropic', name: 'Anthropic', authScheme: 'header', headerName: 'x-api-key', baseUrl: 'https://api.anthropic.com',
    config: { headerName: 'x-api-key' }, docsUrl: 'https://docs.anthropic.com/en/api/overview',
    notes: 'Calls also need an anthropic-version header (e.g. 2023-06-01), which the caller sends.',
  },
  { id: 'github', name: 'GitHub', authScheme: 'bearer', headerName: 'authorization', baseUrl: 'https://api.github.com', config: {}, docsUrl: 'https://docs.github.com/en/rest/authentication/authenticating-to-the-rest-api' },
  { id: 'gitlab', name: 'GitLab', authScheme: 'header', headerName: 'private-token', baseUrl: 'https://gitlab.com/api/v4', config: { headerName: 'private-token' }, docsUrl: 'https://docs.gitlab.com/ee/api/rest/authentication.html' },
  { id: 'stripe', name: 'Stripe', authScheme: 'bearer', headerName: 'authorization', baseUrl: 'https://api.stripe.com', config: {}, docsUrl: 'https://docs.stripe.com/api/authentication' },
  { id: 'slack', name: 'Slack', authScheme: 'bearer', headerName: 'authorization', baseUrl: 'https://slack.com/api', config: {}, docsUrl: 'https://api.slack.com/web' },
  {
    id: 'twilio', name: 'Twilio', authScheme: 'header', headerName: 'authorization', baseUrl: 'https://api.twilio.com',
    config: { headerName: 'authorization', valuePrefix: 'Basic' }, docsUrl: 'https://www.twilio.com/docs/usage/requests-to-twilio',
    notes: 'Twilio uses HTTP Basic: store base64("AccountSID:AuthToken") (or an API key SID and secret) as the secret.',
  },
  { id: 'sendgrid', name: 'SendGrid', authScheme: 'bearer', headerName: 'authorization', baseUrl: 'https://api.sendgrid.com', config: {}, docsUrl: 'https://www.twilio.com/docs/sendgrid/for-developers/sending-email/api-getting-started' },
  {
    id: 'linear', name: 'Linear', authScheme: 'header', headerName: 'authorization', baseUrl: 'https://api.linear.app',
    config: { headerName: 'authorization' }, docsUrl: 'https://linear.app/developers/graphql',
    notes: 'Personal API keys are sent as "Authorization: <key>" without "Bearer"; for an OAuth access token choose the bearer scheme instead.',
  },
  {
    id: 'notion', name: 'Notion', authScheme: 'bearer', headerName: 'authorization', baseUrl: 'https://api.notion.com', config: {},
    docsUrl: 'https://developers.notion.com/reference/authentication', notes: 'Calls also need a Notion-Version header, which the caller sends.',
  },
  {
    id: 'datadog', name: 'Datadog', authScheme: 'header', headerName: 'dd-api-key', baseUrl: 'https://api.datadoghq.com',
    config: { headerName: 'dd-api-key' }, docsUrl: 'https://docs.datadoghq.com/api/latest/authentication/',
    notes: 'Use the base URL of your Datadog site (e.g. https://api.datadoghq.eu). Endpoints that also need DD-APPLICATION-KEY need a second credential.',
  },
  { id: 'mistral', name: 'Mistral AI', authScheme: 'bearer', headerName: 'authorization', baseUrl: 'https://api.mistral.ai/v1', config: {}, docsUrl: 'https://docs.mistral.ai/api/' },
  { id: 'cloudflare', name: 'Cloudflare', authScheme: 'bearer', headerName: 'authorization', baseUrl: 'https://api.cloudflare.com/client/v4', config: {}, docsUrl: 'https://developers.cloudflare.com/fundamentals/api/get-started/create-token/' },
  { id: 'hubspot', name: 'HubSpot', authScheme: 'bearer', headerName: 'authorization', baseUrl: 'https://api.hubapi.com', config: {}, docsUrl: 'https://developers.hubspot.com/docs/api/private-apps' },
  {
    id: 'aws-s3', name: 'AWS S3', authScheme: 'sigv4', baseUrl: 'https://s3.amazonaws.com', config: { region: 'us-east-1', service: 's3' },
    docsUrl: 'https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-authenticating-requests.html',
    notes: 'For another region use its endpoint (https://s3.<region>.amazonaws.com) and set the region to match.',
  },
  { id: 'aws-sts', name: 'AWS STS', authScheme: 'sigv4', baseUrl: 'https://sts.amazonaws.com', config: { region: 'us-east-1', service: 'sts' }, docsUrl: 'https://docs.aws.amazon.com/STS/latest/APIReference/welcome.html' },
  {
    id: 'google-apis', name: 'Google APIs (OAuth2)', authScheme: 'oauth2', headerName: 'authorization', baseUrl: 'https://www.googleapis.com',
    config: { tokenUrl: 'https://oauth2.googleapis.com/token', scopes: [] }, docsUrl: 'https://developers.google.com/identity/protocols/oauth2/web-server#offline',
    notes: 'Needs a refresh token obtained with access_type=offline. Leave scopes empty to keep the scopes of the original grant. Calls stay on the base URL\'s host: for another API use its host (e.g. https://gmail.googleapis.com).',
  },
  {
    id: 'microsoft-graph', name: 'Microsoft Graph (OAuth2)', authScheme: 'oauth2', headerName: 'authorization', baseUrl: 'https://graph.microsoft.com/v1.0',
    config: { tokenUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/token', scopes: ['offline_access'] },
    docsUrl: 'https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-auth-code-flow#refresh-the-access-token',
    notes: 'Replace "common" in the token URL with your tenant id for single-tenant apps; Microsoft rotates refresh tokens.',
  },
  { id: 'postgresql', name: 'PostgreSQL database', authScheme: 'database', config: {}, docsUrl: 'https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING', notes: 'Use a read-only, low-privilege role for query_db.' },
  { id: 'custom', name: 'Custom', authScheme: null, config: {}, notes: 'Any HTTPS API: choose the scheme, header and base URL yourself.' },
];

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/** Frozen: callers copy `config` before using it as a starting point. */
export const CATALOG: readonly CatalogEntry[] = deepFreeze(ENTRIES);

const BY_ID = new Map(CATALOG.map((entry) => [entry.id, entry]));

export function findCatalogEntry(id: string): CatalogEntry | undefined {
  return BY_ID.get(id);
}
