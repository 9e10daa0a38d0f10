/** Request schemas of the app API. Strict objects: unknown fields are refused, not ignored. */
import { z } from 'zod';
import { HTTP_METHODS, PERMISSIONS, TOOLS } from '../../core/policy.ts';

export const email = z.email().max(320);
export const signupBody = z.strictObject({ email, password: z.string().min(12, 'must be at least 12 characters').max(1024) });
export const loginBody = z.strictObject({ email, password: z.string().min(1).max(1024) });
export const workspaceName = z.string().trim().min(1).max(100).regex(/^[^\u0000-\u001f\u007f]+$/, 'must not contain control characters');
export const createWorkspaceBody = z.strictObject({ name: workspaceName });
export const renameWorkspaceBody = z.strictObject({ name: workspaceName });
export const permissions = z.array(z.enum(PERMISSIONS)).min(1).max(5);
export const putGrantBody = z.strictObject({ permissions });
export const id = z.string().min(1).max(64).regex(/^[A-Za-z0-9-]+$/, 'is not an id');
export const principalParam = z.union([id, email]);
export const auditQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  before: z.coerce.number().int().min(1).optional(),
});
const expiresAt = z.iso.datetime({ offset: true }).nullable().optional();
const tokenName = z.string().trim().min(1).max(100);
export const agentTokenBody = z.strictObject({
  name: tokenName,
  tools: z.array(z.enum(TOOLS)).min(1),
  methods: z.array(z.enum(HTTP_METHODS)).min(1).default(['GET']),
  workspaceId: id.nullable().optional(),
  grants: z.record(id, permissions).optional(),
  defaultPermissions: permissions.optional(),
  expiresAt,
});
export const sshTokenBody = z.strictObject({
  name: tokenName, workspaceId: id.nullable().optional(), credentialIds: z.array(id).min(1).nullable().optional(), expiresAt,
});
export const ciTokenBody = z.strictObject({
  name: tokenName, workspaceId: id, credentials: z.array(z.string().min(1).max(100)).min(1).nullable().optional(),
  expiresAt: z.iso.datetime({ offset: true }),
});

export const credentialName = z.string().trim().min(1).max(100).regex(/^[^\u0000-\u001f\u007f]+$/, 'must not contain control characters');
export const envName = z.string().regex(/^[A-Z_][A-Z0-9_]{0,99}$/, 'must be an upper-case environment variable name');
const authScheme = z.enum(['bearer', 'header', 'sigv4', 'oauth2', 'database', 'ssh']);
/** The secret's own shape is the kind's schema, checked inside the actor; here only "an object". */
const secretObject = z.record(z.string(), z.unknown());
export const createCredentialBody = z.strictObject({
  name: credentialName,
  service: z.string().min(1).max(64).default('custom'),
  authScheme: authScheme.optional(),
  baseUrl: z.string().max(2048).nullable().optional(),
  config: z.record(z.string(), z.unknown()).optional(),
  secret: secretObject.optional(),
  envName: envName.nullable().optional(),
});
export const updateCredentialBody = z.strictObject({
  name: credentialName.optional(),
  baseUrl: z.string().max(2048).nullable().optional(),
  config: z.record(z.string(), z.unknown()).optional(),
  envName: envName.nullable().optional(),
});
export const putSecretBody = z.strictObject({ secret: secretObject });

const base64 = z.string().max(1_400_000).regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64');
export const sshSignBody = z.strictObject({ keyBlob: base64.min(1), data: base64, flags: z.number().int().min(0).max(0xffffffff).default(0) });
export const sshIdentitiesBody = z.strictObject({});
export const ciSecretsBody = z.strictObject({
  workspace: z.string().min(1).max(100).optional(),
  only: z.array(z.string().min(1).max(100)).min(1).max(100).optional(),
});
