/**
 * Credentials: non-secret config in the clear, the secret sealed by the workspace actor. A credential
 * without a secret is `pending` and cannot be used; supplying the secret makes it `ready`. The secret
 * is never returned, except by `reveal` (the `reveal` permission, audited). Replacing a secret
 * overwrites the old ciphertext: the old value is unrecoverable from then on.
 */
import { randomUUID } from 'node:crypto';
import { CustosError, notFound } from '../errors.ts';
import { workspaceChain } from '../audit/audit-log.ts';
import { parseBaseUrl } from '../broker/url.ts';
import { kindFor } from '../kinds/registry.ts';
import { findCatalogEntry } from '../kinds/catalog.ts';
import { isHttpScheme, type AuthScheme, type PublicView } from '../kinds/credential-kind.ts';
import { actorOf, type RequestContext } from './context.ts';
import { canSeeConfig, type Permission } from './policy.ts';
import type { AccessService } from './access.ts';
import type { PlanService } from './plans.ts';
import type { CredentialRow, SecretVault, Store, Tx, WorkspaceRow } from './ports.ts';

/**
 * The workspace DEK changed (another node or `custos keys rotate-dek` rotated it) after the secret
 * was sealed: saving it would store ciphertext under a key storage no longer holds, i.e. lose the
 * secret at the next activation. The vault turns this into a re-activation and one retry.
 */
export class WorkspaceKeyChangedError extends CustosError {
  constructor() {
    super('CUSTOS_ERR_UNAVAILABLE', 'The workspace key changed while the secret was being saved; retry.');
  }
}

/** Inside the write transaction: the DEK version the secret was sealed under must still be current. */
async function assertDekVersion(tx: Tx, workspaceId: string, sealedUnder: number): Promise<void> {
  // Locked, so a rotation committing on another node cannot slip in between this check and the write.
  const ws = await tx.lockWorkspace(workspaceId);
  if (!ws || Number(ws.dek_version) !== sealedUnder) throw new WorkspaceKeyChangedError();
}

export interface CredentialInput {
  name: string;
  service: string;
  authScheme?: AuthScheme | undefined;
  baseUrl?: string | null | undefined;
  config?: Record<string, unknown> | undefined;
  secret?: Record<string, unknown> | undefined;
  envName?: string | null | undefined;
}

export interface CredentialPatch {
  name?: string | undefined;
  baseUrl?: string | null | undefined;
  config?: Record<string, unknown> | undefined;
  envName?: string | null | undefined;
}

export interface CredentialView {
  id: string;
  workspaceId: string;
  name: string;
  service: string;
  authScheme: AuthScheme;
  baseUrl: string | null;
  status: 'pending' | 'ready';
  health: 'ok' | 'reauth_required';
  healthReason: string | null;
  config: PublicView;
  envName: string | null;
  secretVersion: number;
  createdBy: string;
  updatedBy: string;
  createdAt: string;
  updatedAt: string;
}

export function credentialView(row: CredentialRow): CredentialView {
  const kind = kindFor(row.auth_scheme);
  return {
    id: row.id, workspaceId: row.workspace_id, name: row.name, service: row.service, authScheme: row.auth_scheme as AuthScheme,
    baseUrl: row.base_url, status: row.status as CredentialView['status'], health: row.health as CredentialView['health'],
    healthReason: row.health_reason, config: kind.describe(JSON.parse(row.config) as Record<string, unknown>), envName: row.env_name,
    secretVersion: Number(row.secret_version), createdBy: row.created_by, updatedBy: row.updated_by, createdAt: row.created_at, updatedAt: row.updated_at,
  };
}

export class CredentialService {
  constructor(
    private readonly store: Store,
    private readonly access: AccessService,
    private readonly plans: PlanService,
    private readonly vault: SecretVault,
  ) {}

  /** Loads a credential the principal may act on, with the permission checked on its workspace. */
  async load(ctx: RequestContext, id: string, needed: Permission | 'see', action: string): Promise<{ row: CredentialRow; workspace: WorkspaceRow; permissions: Permission[] }> {
    const row = await this.store.read.findCredential(id);
    if (!row) throw notFound('Credential');
    let loaded;
    try {
      loaded = await this.access.require(ctx, row.workspace_id, needed === 'see' ? null : needed, action);
    } catch (err) {
      // Whatever the workspace answered, a credential in a workspace one cannot see does not exist.
      if (err instanceof CustosError && err.code === 'CUSTOS_ERR_NOT_FOUND') throw notFound('Credential');
      throw err;
    }
    if (needed === 'see' && !canSeeConfig(loaded.permissions)) {
      await this.access.require(ctx, row.workspace_id, 'read', action);
    }
    return { row, ...loaded };
  }

  /** Normalises scheme, base URL and config for a new credential (catalog prefill, then validation). */
  #shape(input: CredentialInput): { scheme: AuthScheme; baseUrl: string | null; config: Record<string, unknown> } {
    const entry = input.service === 'custom' ? null : findCatalogEntry(input.service);
    if (input.service !== 'custom' && !entry) throw new CustosError('CUSTOS_ERR_VALIDATION', `Unknown catalog service '${input.service}'; use 'custom' or one of GET /api/v1/catalog.`);
    const scheme = (input.authScheme ?? entry?.authScheme) as AuthScheme | undefined;
    if (!scheme) throw new CustosError('CUSTOS_ERR_VALIDATION', 'authScheme is required for a custom service.');
    if (entry && input.authScheme && input.authScheme !== entry.authScheme) {
      throw new CustosError('CUSTOS_ERR_VALIDATION', `${entry.name} uses the ${entry.authScheme} scheme, not ${input.authScheme}.`);
    }
    const kind = kindFor(scheme);
    const baseUrl = input.baseUrl ?? entry?.baseUrl ?? null;
    const config = { ...(entry?.config ?? {}), ...(input.config ?? {}) };
    return { scheme, ...this.#validate(kind.scheme, baseUrl, config) };
  }

  #validate(scheme: AuthScheme, baseUrl: string | null, config: Record<string, unknown>): { baseUrl: string | null; config: Record<string, unknown> } {
    if (isHttpScheme(scheme)) {
      if (!baseUrl) throw new CustosError('CUSTOS_ERR_VALIDATION', `A ${scheme} credential needs a baseUrl.`);
      parseBaseUrl(baseUrl); // throws a clear CUSTOS_ERR_URL_REFUSED / VALIDATION
    } else if (baseUrl) {
      throw new CustosError('CUSTOS_ERR_VALIDATION', `A ${scheme} credential has no baseUrl.`);
    }
    const parsed = kindFor(scheme).configSchema.safeParse(config);
    if (!parsed.success) {
      const i = parsed.error.issues[0]!;
      throw new CustosError('CUSTOS_ERR_VALIDATION', `Invalid config: ${i.path.join('.') || 'config'}: ${i.code === 'unrecognized_keys' ? 'unknown field(s)' : i.message}`);
    }
    return { baseUrl, config: parsed.data as Record<string, unknown> };
  }

  async create(ctx: RequestContext, workspaceId: string, input: CredentialInput, action = 'credential.create'): Promise<CredentialView> {
    const { workspace } = await this.access.require(ctx, workspaceId, 'write', action);
    const { scheme, baseUrl, config } = this.#shape(input);
    const org = await this.store.read.findOrganization(workspace.org_id);
    const checkLimit = async (count: number): Promise<void> => {
      try {
        this.plans.assertCredentialCount(org?.plan ?? 'free', count);
      } catch (err) {
        await this.store.audit({ chain: workspaceChain(workspaceId), actor: actorOf(ctx), action, target: { type: 'credential', name: input.name },
          outcome: 'denied', details: { reason: 'plan limit', limit: 'credentialsPerWorkspace' } });
        throw err;
      }
    };
    await checkLimit(await this.store.read.countCredentials(workspaceId));
    if (await this.store.read.findCredentialByName(workspaceId, input.name)) {
      throw new CustosError('CUSTOS_ERR_CONFLICT', `A credential named '${input.name}' already exists in this workspace.`);
    }
    const now = new Date().toISOString();
    const by = actorOf(ctx).id ?? 'system';
    const row: CredentialRow = {
      id: randomUUID(), workspace_id: workspaceId, name: input.name, service: input.service, auth_scheme: scheme, base_url: baseUrl,
      config: JSON.stringify(config), secret: null, secret_version: 0, dek_version: workspace.dek_version, status: 'pending', health: 'ok',
      health_reason: null, env_name: input.envName ?? null, created_by: by, updated_by: by, created_at: now, updated_at: now,
    };
    const insert = async (final: CredentialRow): Promise<void> => {
      await this.store.tx(async (tx) => {
        this.plans.assertCredentialCount(org?.plan ?? 'free', await tx.countCredentials(workspaceId));
        if (final.secret !== null) await assertDekVersion(tx, workspaceId, Number(final.dek_version));
        if (await tx.findCredentialByName(workspaceId, input.name)) {
          throw new CustosError('CUSTOS_ERR_CONFLICT', `A credential named '${input.name}' already exists in this workspace.`);
        }
        await tx.insertCredential(final);
        await tx.audit({ chain: workspaceChain(workspaceId), actor: actorOf(ctx), action, target: { type: 'credential', id: final.id, name: final.name },
          outcome: 'success', details: { service: final.service, authScheme: scheme, status: final.status, baseUrl: final.base_url } });
      });
    };
    if (input.secret === undefined) {
      await insert(row);
      return credentialView(row);
    }
    let final = row;
    await this.vault.seal(workspaceId, row.id, scheme, input.secret, config, async (sealed) => {
      final = {
        ...row, config: JSON.stringify(sealed.derivedConfig), secret: sealed.secret, dek_version: sealed.dekVersion,
        secret_version: 1, status: 'ready',
      };
      await insert(final);
    });
    return credentialView(final);
  }

  async list(ctx: RequestContext, workspaceId: string): Promise<CredentialView[]> {
    const { permissions } = await this.access.require(ctx, workspaceId, null, 'credential.list');
    if (!canSeeConfig(permissions)) await this.access.require(ctx, workspaceId, 'read', 'credential.list');
    return (await this.store.read.listCredentials(workspaceId)).map(credentialView);
  }

  async get(ctx: RequestContext, id: string): Promise<CredentialView> {
    return credentialView((await this.load(ctx, id, 'see', 'credential.get')).row);
  }

  async update(ctx: RequestContext, id: string, patch: CredentialPatch): Promise<CredentialView> {
    const { row } = await this.load(ctx, id, 'write', 'credential.update');
    const merged = { ...(JSON.parse(row.config) as Record<string, unknown>), ...(patch.config ?? {}) };
    const { baseUrl, config } = this.#validate(row.auth_scheme as AuthScheme, patch.baseUrl !== undefined ? patch.baseUrl : row.base_url, merged);
    const now = new Date().toISOString();
    const next: CredentialRow = {
      ...row, name: patch.name ?? row.name, base_url: baseUrl, config: JSON.stringify(config),
      env_name: patch.envName !== undefined ? patch.envName : row.env_name, updated_by: actorOf(ctx).id ?? 'system', updated_at: now,
    };
    await this.store.tx(async (tx) => {
      if (patch.name && patch.name !== row.name && (await tx.findCredentialByName(row.workspace_id, patch.name))) {
        throw new CustosError('CUSTOS_ERR_CONFLICT', `A credential named '${patch.name}' already exists in this workspace.`);
      }
      await tx.updateCredential(id, { name: next.name, base_url: next.base_url, config: next.config, env_name: next.env_name, updated_by: next.updated_by, updated_at: now });
      await tx.audit({ chain: workspaceChain(row.workspace_id), actor: actorOf(ctx), action: 'credential.update', target: { type: 'credential', id, name: next.name },
        outcome: 'success', details: { fields: Object.keys(patch).filter((k) => (patch as Record<string, unknown>)[k] !== undefined) } });
    });
    // The base URL binds the credential: anything cached for the old endpoint is dropped.
    await this.vault.reset(row.workspace_id, id);
    return credentialView(next);
  }

  async putSecret(ctx: RequestContext, id: string, secret: Record<string, unknown>): Promise<CredentialView> {
    const { row } = await this.load(ctx, id, 'write', 'credential.secret');
    let final = row;
    await this.vault.seal(row.workspace_id, id, row.auth_scheme, secret, JSON.parse(row.config) as Record<string, unknown>, async (sealed) => {
      const now = new Date().toISOString();
      final = {
        ...row, config: JSON.stringify(sealed.derivedConfig), secret: sealed.secret, dek_version: sealed.dekVersion,
        secret_version: Number(row.secret_version) + 1, status: 'ready', health: 'ok', health_reason: null, updated_by: actorOf(ctx).id ?? 'system', updated_at: now,
      };
      await this.store.tx(async (tx) => {
        await assertDekVersion(tx, row.workspace_id, sealed.dekVersion);
        await tx.updateCredential(id, {
          config: final.config, secret: final.secret, dek_version: final.dek_version, secret_version: final.secret_version, status: 'ready',
          health: 'ok', health_reason: null, updated_by: final.updated_by, updated_at: now,
        });
        await tx.audit({ chain: workspaceChain(row.workspace_id), actor: actorOf(ctx), action: row.status === 'pending' ? 'credential.secret.supply' : 'credential.secret.replace',
          target: { type: 'credential', id, name: row.name }, outcome: 'success', details: { secretVersion: final.secret_version, status: 'ready' } });
      });
    });
    // The replaced ciphertext must not linger in the database files ("old one unrecoverable").
    if (row.secret !== null) await this.store.purgeDeleted();
    return credentialView(final);
  }

  async delete(ctx: RequestContext, id: string): Promise<void> {
    const { row } = await this.load(ctx, id, 'write', 'credential.delete');
    await this.store.tx(async (tx) => {
      await tx.deleteCredential(id);
      await tx.audit({ chain: workspaceChain(row.workspace_id), actor: actorOf(ctx), action: 'credential.delete', target: { type: 'credential', id, name: row.name }, outcome: 'success' });
    });
    await this.vault.reset(row.workspace_id, id);
    await this.store.purgeDeleted();
  }

  /** The only path back to plaintext: `reveal`, audited before the value is returned. */
  async reveal(ctx: RequestContext, id: string): Promise<{ credential: CredentialView; secret: Record<string, string> }> {
    const { row } = await this.load(ctx, id, 'reveal', 'credential.reveal');
    const target = { type: 'credential', id, name: row.name };
    let secret: Record<string, string>;
    try {
      secret = await this.vault.reveal(row);
    } catch (err) {
      await this.store.audit({ chain: workspaceChain(row.workspace_id), actor: actorOf(ctx), action: 'credential.reveal', target, outcome: 'failure',
        details: { code: err instanceof CustosError ? err.code : 'CUSTOS_ERR_INTERNAL' } });
      throw err;
    }
    await this.store.audit({ chain: workspaceChain(row.workspace_id), actor: actorOf(ctx), action: 'credential.reveal', target, outcome: 'success',
      details: { secretVersion: Number(row.secret_version), fields: Object.keys(secret) } });
    return { credential: credentialView(row), secret };
  }

  /** Re-encrypts every secret of the workspace under a fresh DEK (`manage`). */
  async rotateDek(ctx: RequestContext, workspaceId: string): Promise<{ dekVersion: number; credentials: number }> {
    await this.access.require(ctx, workspaceId, 'manage', 'workspace.rotate_dek');
    let count = 0;
    const version = await this.vault.rotateDek(workspaceId, async (wrappedDek, keyBackendId, dekVersion, resealed) => {
      count = resealed.length;
      await this.store.tx(async (tx) => {
        // Two rotations racing (two nodes, or a node and the CLI): only the one that started from
        // the current version may commit; the other re-activates and rotates again.
        await assertDekVersion(tx, workspaceId, dekVersion - 1);
        // Every stored secret must be exactly what was re-encrypted: one written meanwhile (by
        // another node, under the old DEK) would otherwise be lost or overwritten by a stale copy.
        const byId = new Map(resealed.map((r) => [r.id, r.before]));
        for (const row of await tx.listCredentials(workspaceId)) {
          if (row.secret !== null && byId.get(row.id) !== row.secret) throw new WorkspaceKeyChangedError();
        }
        for (const r of resealed) await tx.updateCredential(r.id, { secret: r.secret, dek_version: dekVersion });
        await tx.updateWorkspace(workspaceId, { wrapped_dek: wrappedDek, key_backend_id: keyBackendId, dek_version: dekVersion, updated_at: new Date().toISOString() });
        await tx.audit({ chain: workspaceChain(workspaceId), actor: actorOf(ctx), action: 'workspace.rotate_dek', target: { type: 'workspace', id: workspaceId },
          outcome: 'success', details: { dekVersion, credentialsReencrypted: resealed.length, keyBackend: keyBackendId } });
      });
    });
    await this.store.purgeDeleted();
    return { dekVersion: version, credentials: count };
  }
}
