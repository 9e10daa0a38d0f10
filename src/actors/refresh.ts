/**
 * RefreshPort on the database: an OAuth2 refresh runs inside a transaction holding the credential's
 * row lock (SELECT … FOR UPDATE on PostgreSQL; SQLite serialises transactions), so two nodes never
 * spend the same refresh token, and a rotated refresh token is sealed and stored before use.
 * On SQLite the lock is the whole database's write lock for the refresh's duration (a token
 * endpoint round trip, about once an hour per credential); docs/kinds.md says so.
 */
import { workspaceChain } from '../audit/audit-log.ts';
import { CustosError } from '../errors.ts';
import type { RefreshPort, RefreshTx, SecretFields } from '../kinds/credential-kind.ts';
import type { Store } from '../core/ports.ts';
import type { SealedSecret, WorkspaceActor } from './workspace-actor.ts';

export function dbRefreshPort(actor: WorkspaceActor, store: Store, credentialId: string): RefreshPort {
  return {
    withLock: <T>(fn: (fresh: SecretFields, tx: RefreshTx) => Promise<T>): Promise<T> => store.tx(async (tx) => {
      const row = await tx.lockCredential(credentialId);
      if (!row) throw new CustosError('CUSTOS_ERR_NOT_FOUND', 'Service not found.');
      const fresh = actor.openForRefresh(row);
      try {
        return await fn(fresh, {
          async persistSecret(fields) {
            const current = JSON.parse(row.secret ?? '{}') as SealedSecret;
            const { sealed, dekVersion } = actor.seal(credentialId, fields);
            if (dekVersion !== Number(row.dek_version)) throw new CustosError('CUSTOS_ERR_UNAVAILABLE', 'The workspace key changed during a refresh; retry.');
            await tx.updateCredential(credentialId, { secret: JSON.stringify({ ...current, ...sealed }), updated_at: new Date().toISOString() });
            await tx.audit({ chain: workspaceChain(row.workspace_id), actor: { type: 'system', id: null }, action: 'credential.oauth2.rotate',
              target: { type: 'credential', id: credentialId, name: row.name }, outcome: 'success', details: { fields: Object.keys(fields) } });
          },
          async setHealth(health, reason) {
            if (row.health === health && (row.health_reason ?? undefined) === reason) return;
            await tx.updateCredential(credentialId, { health, health_reason: reason ?? null });
            await tx.audit({ chain: workspaceChain(row.workspace_id), actor: { type: 'system', id: null }, action: 'credential.health',
              target: { type: 'credential', id: credentialId, name: row.name }, outcome: health === 'ok' ? 'success' : 'failure',
              details: { health, ...(reason ? { reason } : {}) } });
          },
        });
      } finally {
        for (const b of Object.values(fresh)) b.fill(0);
      }
    }),
  };
}
