/**
 * The `database` kind: a PostgreSQL DSN `postgres://<user>:<password>@<host>:<port>/<database>`
 * (also `postgresql://`; a missing port means 5432) used only through query_db. The DSN is the
 * one secret field; `read` sees host, port, database and user (derived at save time), and the
 * per-credential masking rules. The password is never derived, described or echoed: a malformed
 * DSN is refused with a message naming the part that is wrong, not the DSN.
 */
import { z } from 'zod';
import type { PublicView, SecretFields } from '../credential-kind.ts';
import { secretField } from '../credential-kind.ts';
import { CustosError } from '../../errors.ts';
import { dsnTarget, parseDsn } from '../../sql/dsn.ts';

/** Column / JSON key names in mask rules: identifier-ish, bounded. */
const columnName = z.string().min(1).max(128).regex(/^[^\u0000-\u001f\u007f]+$/, 'no control characters');

export const databaseSecretSchema = z.strictObject({
  dsn: z
    .string({ error: (issue) => (issue.input === undefined ? 'dsn is required.' : 'dsn must be a string.') })
    .min(1, 'dsn must not be empty.')
    .max(4096, 'dsn must be at most 4096 characters.')
    .superRefine((value, ctx) => {
      try {
        parseDsn(value).password.fill(0);
      } catch (err) {
        // our message names the wrong part, never the value
        ctx.addIssue({ code: 'custom', message: err instanceof CustosError ? err.message : 'The database connection string is not valid.' });
      }
    }),
});

export const databaseConfigSchema = z.strictObject({
  /** Derived from the DSN at save time (anything supplied here is replaced). */
  host: z.string().max(255).optional(),
  port: z.number().int().min(1).max(65535).optional(),
  database: z.string().max(63).optional(),
  user: z.string().max(63).optional(),
  /** Extra column / JSON key names masked whole in query_db results. */
  maskColumns: z.array(columnName).max(200).optional(),
  /** Names exempt from name-based masking and value-based PII masking (secrets and cards stay masked). */
  allowColumns: z.array(columnName).max(200).optional(),
});
export type DatabaseConfig = z.infer<typeof databaseConfigSchema>;

/** Host, port, database and user from the stored DSN; never the password. */
export function deriveDatabaseConfig(secret: SecretFields, config: DatabaseConfig): DatabaseConfig {
  const target = dsnTarget(secretField(secret, 'dsn'));
  return { ...config, host: target.host, port: target.port, database: target.database, user: target.user };
}

export function describeDatabase(config: DatabaseConfig): PublicView {
  return {
    authScheme: 'database',
    host: config.host,
    port: config.port,
    database: config.database,
    user: config.user,
    ...(config.maskColumns?.length ? { maskColumns: config.maskColumns } : {}),
    ...(config.allowColumns?.length ? { allowColumns: config.allowColumns } : {}),
  };
}
