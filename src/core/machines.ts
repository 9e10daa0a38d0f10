/**
 * The SSH and CI front doors (DESIGN.md §8). SSH tokens list identities and get signatures; the
 * private key never leaves the actor, and every signature is audited (token, key fingerprint,
 * SHA-256 of the data signed, outcome). CI tokens fetch plaintext for `custos run`: that is a use
 * of `reveal` (re-checked against the creator's current grant) and is audited per credential.
 */
import { createHash } from 'node:crypto';
import { CustosError, notFound } from '../errors.ts';
import { workspaceChain } from '../audit/audit-log.ts';
import { actorOf, type RequestContext } from './context.ts';
import type { AccessService } from './access.ts';
import { credentialView } from './credentials.ts';
import type { CredentialRow, SecretVault, SignPort, Store, WorkspaceRow } from './ports.ts';

export interface SshIdentity { keyBlob: string; comment: string; fingerprint: string; credentialId: string }

export class SshService {
  constructor(private readonly store: Store, private readonly access: AccessService, private readonly signer: SignPort) {}

  async #keys(ctx: RequestContext): Promise<Array<{ row: CredentialRow; workspace: WorkspaceRow }>> {
    const p = ctx.principal;
    if (p.type !== 'ssh_token') throw new CustosError('CUSTOS_ERR_UNAUTHENTICATED', 'SSH endpoints need an SSH token.');
    const out: Array<{ row: CredentialRow; workspace: WorkspaceRow }> = [];
    for (const { workspace: ws, permissions } of await this.access.visibleWorkspaces(p)) {
      if (!permissions.includes('use')) continue;
      for (const row of await this.store.read.listCredentials(ws.id)) {
        if (row.auth_scheme !== 'ssh' || row.status !== 'ready') continue;
        if (p.scopes.credentialIds && !p.scopes.credentialIds.includes(row.id)) continue;
        out.push({ row, workspace: ws });
      }
    }
    return out;
  }

  async identities(ctx: RequestContext): Promise<SshIdentity[]> {
    return (await this.#keys(ctx)).map(({ row }) => {
      const c = JSON.parse(row.config) as { keyBlob: string; fingerprint: string; comment?: string; label?: string };
      return { keyBlob: c.keyBlob, comment: c.label ?? c.comment ?? row.name, fingerprint: c.fingerprint, credentialId: row.id };
    });
  }

  async sign(ctx: RequestContext, keyBlob: Buffer, data: Buffer, flags: number): Promise<Buffer> {
    const wanted = keyBlob.toString('base64');
    const match = (await this.#keys(ctx)).find(({ row }) => (JSON.parse(row.config) as { keyBlob?: string }).keyBlob === wanted);
    if (!match) throw notFound('SSH key');
    const config = JSON.parse(match.row.config) as { fingerprint: string };
    const base = {
      chain: workspaceChain(match.workspace.id), actor: actorOf(ctx), action: 'ssh.sign',
      target: { type: 'credential', id: match.row.id, name: match.row.name },
    };
    const details = { fingerprint: config.fingerprint, dataSha256: createHash('sha256').update(data).digest('hex'), flags };
    let signature: Buffer;
    try {
      signature = await this.signer.sign(match.row, data, flags);
    } catch (err) {
      await this.store.audit({ ...base, outcome: 'failure', details: { ...details, code: err instanceof CustosError ? err.code : 'CUSTOS_ERR_INTERNAL' } });
      throw err;
    }
    await this.store.audit({ ...base, outcome: 'success', details });
    return signature;
  }
}

export interface CiCredentialOut {
  id: string; name: string; authScheme: string; envName: string | null; config: Record<string, unknown>; secret: Record<string, string>;
}

export class CiService {
  constructor(private readonly store: Store, private readonly access: AccessService, private readonly vault: SecretVault) {}

  async secrets(ctx: RequestContext, input: { workspace?: string | undefined; only?: string[] | undefined }): Promise<{ workspace: { id: string; name: string }; credentials: CiCredentialOut[]; skipped: Array<{ name: string; reason: string }> }> {
    const p = ctx.principal;
    if (p.type !== 'ci_token') throw new CustosError('CUSTOS_ERR_UNAUTHENTICATED', 'This endpoint needs a CI token.');
    const bound = await this.store.read.findWorkspace(p.scopes.workspaceId);
    if (!bound || (input.workspace && input.workspace !== bound.id && input.workspace !== bound.name)) {
      throw new CustosError('CUSTOS_ERR_NOT_FOUND', 'Workspace not found for this CI token (a CI token is bound to one workspace).');
    }
    // Re-checked on every call: the creator must still hold `reveal` there.
    const { workspace } = await this.access.require(ctx, bound.id, 'reveal', 'ci.secrets');
    const rows = await this.store.read.listCredentials(workspace.id);
    const allowed = p.scopes.credentialNames;
    for (const name of input.only ?? []) {
      if (!rows.some((r) => r.name === name) || (allowed && !allowed.includes(name))) throw notFound(`Credential '${name.slice(0, 100)}'`);
    }
    const chosen = rows.filter((r) => (!allowed || allowed.includes(r.name)) && (!input.only || input.only.includes(r.name)));
    const credentials: CiCredentialOut[] = [];
    const skipped: Array<{ name: string; reason: string }> = [];
    for (const row of chosen) {
      if (row.auth_scheme === 'ssh') {
        skipped.push({ name: row.name, reason: 'SSH private keys never leave the service; use custos ssh-agent' });
        continue;
      }
      if (row.status !== 'ready') {
        if (input.only) throw new CustosError('CUSTOS_ERR_NOT_READY', `Credential '${row.name}' has no secret yet.`);
        skipped.push({ name: row.name, reason: 'pending: no secret yet' });
        continue;
      }
      const target = { type: 'credential', id: row.id, name: row.name };
      const chain = workspaceChain(workspace.id);
      let secret: Record<string, string>;
      try {
        secret = await this.vault.reveal(row);
      } catch (err) {
        await this.store.audit({ chain, actor: actorOf(ctx), action: 'ci.reveal', target, outcome: 'failure', details: { code: err instanceof CustosError ? err.code : 'CUSTOS_ERR_INTERNAL' } });
        throw err;
      }
      // Audited before the value is returned (fail closed: if this write fails, nothing is returned).
      await this.store.audit({ chain, actor: actorOf(ctx), action: 'ci.reveal', target, outcome: 'success', details: { secretVersion: Number(row.secret_version) } });
      const view = credentialView(row);
      credentials.push({ id: row.id, name: row.name, authScheme: row.auth_scheme, envName: row.env_name, config: view.config, secret });
    }
    return { workspace: { id: workspace.id, name: workspace.name }, credentials, skipped };
  }
}
