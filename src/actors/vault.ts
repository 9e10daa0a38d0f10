/**
 * The SecretVault port implemented on the actor system: the write, reveal and rotation paths.
 * Use paths (call_api, query_db, sign) live in src/actors/operations/.
 */
import { CustosError } from '../errors.ts';
import { kindFor } from '../kinds/registry.ts';
import type { Resealed, CredentialRow, SealedSecretRecord, SecretVault, Store } from '../core/ports.ts';
import { WorkspaceKeyChangedError } from '../core/credentials.ts';
import type { ActorSystem } from './actor-system.ts';
import { StaleKeyError } from './mailbox.ts';
import type { WorkspaceActor } from './workspace-actor.ts';

/** zod issues name the field and the rule; never the value. */
function secretValidationError(scheme: string, issues: ReadonlyArray<{ path: PropertyKey[]; message: string; code: string }>): CustosError {
  const first = issues[0]!;
  const field = first.path.map(String).join('.') || 'secret';
  const message = first.code === 'unrecognized_keys' ? 'unknown field(s)' : first.message;
  return new CustosError('CUSTOS_ERR_VALIDATION', `Invalid ${scheme} secret: ${field}: ${message}`);
}

/** A save refused because the DEK moved on is a stale actor: ActorSystem.with re-activates and retries once. */
function staleOnKeyChange(err: unknown): never {
  throw err instanceof WorkspaceKeyChangedError ? new StaleKeyError() : err;
}

export class ActorVault implements SecretVault {
  constructor(private readonly actors: ActorSystem, private readonly store: Store) {}

  /**
   * Another node (or the CLI) may have rotated the workspace DEK since this actor activated; uses
   * notice through the row's dek_version, but a write or a rotation must check before it seals, or
   * it would store ciphertext under a key storage no longer holds (the secret would be lost at the
   * next activation). One indexed read per secret write or rotation, none per use.
   */
  async #assertCurrent(actor: WorkspaceActor): Promise<void> {
    const ws = await this.store.read.findWorkspace(actor.workspaceId);
    if (ws && Number(ws.dek_version) !== actor.dekVersion) throw new StaleKeyError();
  }

  async seal(workspaceId: string, credentialId: string, scheme: string, input: unknown, config: Record<string, unknown>, persist: (s: SealedSecretRecord) => Promise<void>): Promise<void> {
    const kind = kindFor(scheme);
    const parsed = kind.secretSchema.safeParse(input);
    if (!parsed.success) throw secretValidationError(scheme, parsed.error.issues);
    // Strings from the JSON body are unavoidable (JSON.parse makes them); they become Buffers here
    // and are not kept anywhere after this call.
    const fields: Record<string, Buffer> = {};
    for (const [k, v] of Object.entries(parsed.data)) if (typeof v === 'string' && v.length > 0) fields[k] = Buffer.from(v, 'utf8');
    try {
      await this.actors.with(workspaceId, (actor) => actor.mailbox.exclusive(async () => {
        await this.#assertCurrent(actor);
        const derived = kind.deriveConfig ? kind.deriveConfig(fields, config) : config;
        const { sealed, dekVersion } = actor.seal(credentialId, fields);
        await persist({ secret: JSON.stringify(sealed), dekVersion, derivedConfig: derived }).catch(staleOnKeyChange);
        await actor.resetCredential(credentialId);
      }));
    } finally {
      for (const b of Object.values(fields)) b.fill(0);
    }
  }

  async reveal(row: CredentialRow): Promise<Record<string, string>> {
    if (row.auth_scheme === 'ssh') {
      throw new CustosError('CUSTOS_ERR_FORBIDDEN', 'SSH private keys never leave the service, not even through reveal; use custos ssh-agent.');
    }
    return this.actors.with(row.workspace_id, (actor) => actor.use(row, undefined, async ({ secret }) => {
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(secret)) out[k] = v.toString('utf8');
      return out;
    }, () => this.store.read.findCredential(row.id)));
  }

  async reset(workspaceId: string, credentialId: string): Promise<void> {
    const actor = this.actors.peek(workspaceId);
    if (actor && !actor.closed) await actor.mailbox.exclusive(() => actor.resetCredential(credentialId)).catch(() => undefined);
  }

  async rotateDek(workspaceId: string, persist: (wrappedDek: string, keyBackendId: string, version: number, resealed: Resealed[]) => Promise<void>): Promise<number> {
    return this.actors.with(workspaceId, (actor) => actor.mailbox.exclusive(async () => {
      await this.#assertCurrent(actor);
      const rows = await this.store.read.listCredentials(workspaceId);
      return actor.rotateDek(this.actors.backend, rows, (...args) => persist(...args).catch(staleOnKeyChange));
    }));
  }
}
