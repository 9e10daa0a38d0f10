/**
 * The credential kinds by auth scheme: an explicit map, no discovery. Adding a kind is one folder
 * under src/kinds/ and one line here; every kind passes the conformance macro (src/kinds/conformance.ts).
 */
import { CustosError } from '../errors.ts';
import type { AuthScheme, CredentialKind } from './credential-kind.ts';
import { bearerKind } from './bearer/index.ts';
import { headerKind } from './header/index.ts';
import { sigv4Kind } from './sigv4/index.ts';
import { oauth2Kind } from './oauth2/index.ts';
import { sshKind } from './ssh/index.ts';
import { databaseKind } from './database/index.ts';

export const KINDS: Readonly<Record<AuthScheme, CredentialKind<any>>> = {
  bearer: bearerKind,
  header: headerKind,
  sigv4: sigv4Kind,
  oauth2: oauth2Kind,
  database: databaseKind,
  ssh: sshKind,
};

export function kindFor(scheme: string): CredentialKind<any> {
  const kind = (KINDS as Record<string, CredentialKind<any> | undefined>)[scheme];
  if (!kind) throw new CustosError('CUSTOS_ERR_VALIDATION', `Unknown auth scheme '${scheme}'.`);
  return kind;
}
