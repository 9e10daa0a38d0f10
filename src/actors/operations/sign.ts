/** SSH signing inside the actor: the private key is decrypted, used for one signature, zeroed. */
import { CustosError } from '../../errors.ts';
import { isSigner } from '../../kinds/credential-kind.ts';
import { kindFor } from '../../kinds/registry.ts';
import type { CredentialRow } from '../../core/ports.ts';
import type { UseContext } from '../workspace-actor.ts';

export function signInActor(row: CredentialRow, data: Buffer, flags: number, use: UseContext): Buffer {
  const kind = kindFor(row.auth_scheme);
  if (!isSigner(kind)) throw new CustosError('CUSTOS_ERR_VALIDATION', `Credential '${row.name}' is not an SSH key.`);
  return kind.sign(use.secret, JSON.parse(row.config) as Record<string, unknown>, data, flags, use.kind);
}
