/**
 * SQL that creates a dedicated low-privilege PostgreSQL role for query_db (`custos db
 * readonly-role-sql`). A read-only transaction stops writes, but not everything: advisory locks,
 * signalling other backends of the same role, dblink, COPY … TO PROGRAM for privileged roles,
 * reading every table the role can see. The role is the layer that limits *what* can be read and
 * *which* functions exist for it; the guard and the executor limit *how*.
 *
 * The output is meant to be reviewed and run by a database owner (psql -f). It sets no password:
 * set one with `\password <role>` in psql (so it never lands in a file or shell history).
 */
import { CustosError } from '../errors.ts';

export interface ReadonlyRoleOptions {
  role: string;
  database: string;
  /** Schemas to grant read access to (default ['public']). */
  schemas?: readonly string[];
  /** Owner of future tables: default privileges are set FOR this role (default: whoever runs the script). */
  tableOwner?: string;
  /** Concurrent sessions the role may open (default 10). */
  connectionLimit?: number;
  /** Server-side statement timeout for the role, a second guard behind query_db's own (default '30s'). */
  statementTimeout?: string;
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_$]{0,62}$/;

function ident(value: string, what: string): string {
  if (typeof value !== 'string' || !IDENT.test(value)) {
    throw new CustosError('CUSTOS_ERR_VALIDATION',
      `${what} must be a plain identifier (letters, digits, _ and $, starting with a letter or _; at most 63).`);
  }
  return `"${value}"`;
}

/** Functions a query role should not run even inside a read-only transaction. */
const REVOKED_FUNCTIONS = [
  'pg_catalog.lo_import(text)', 'pg_catalog.lo_import(text, oid)', 'pg_catalog.lo_export(oid, text)',
  'pg_catalog.pg_read_file(text)', 'pg_catalog.pg_read_binary_file(text)', 'pg_catalog.pg_ls_dir(text)',
];

export function readonlyRoleSql(options: ReadonlyRoleOptions): string {
  const role = ident(options.role, 'role');
  const db = ident(options.database, 'database');
  const schemas = (options.schemas?.length ? options.schemas : ['public']).map((s) => ident(s, 'schema'));
  const owner = options.tableOwner === undefined ? undefined : ident(options.tableOwner, 'table owner');
  const limit = options.connectionLimit ?? 10;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'connection limit must be an integer between 1 and 1000.');
  }
  const timeout = options.statementTimeout ?? '30s';
  if (!/^\d{1,7}(ms|s|min)?$/.test(timeout)) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', "statement timeout must look like 30s, 5000ms or 2min.");
  }

  const lines: string[] = [
    `-- query_db read-only role ${role} for database ${db}. Review, then run as the database owner.`,
    '-- No superuser, no CREATEDB/CREATEROLE, no replication, no RLS bypass; NOINHERIT so a later',
    '-- "GRANT some_role TO ..." does not silently widen it.',
    `CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT ${limit};`,
    `-- Every transaction of this role is read-only unless it explicitly asks otherwise (query_db never does),`,
    '-- and runaway statements stop server-side even if the broker is gone.',
    `ALTER ROLE ${role} SET default_transaction_read_only = on;`,
    `ALTER ROLE ${role} SET statement_timeout = '${timeout}';`,
    `ALTER ROLE ${role} SET idle_in_transaction_session_timeout = '60s';`,
    `ALTER ROLE ${role} SET lock_timeout = '5s';`,
    '',
    `REVOKE ALL ON DATABASE ${db} FROM ${role};`,
    `GRANT CONNECT ON DATABASE ${db} TO ${role};`,
  ];
  for (const schema of schemas) {
    lines.push(
      '',
      `-- schema ${schema}: read tables and views, nothing else (no CREATE, no sequence USAGE: nextval is a write)`,
      `REVOKE CREATE ON SCHEMA ${schema} FROM ${role};`,
      `GRANT USAGE ON SCHEMA ${schema} TO ${role};`,
      `GRANT SELECT ON ALL TABLES IN SCHEMA ${schema} TO ${role};`,
      `ALTER DEFAULT PRIVILEGES${owner ? ` FOR ROLE ${owner}` : ''} IN SCHEMA ${schema} GRANT SELECT ON TABLES TO ${role};`,
    );
  }
  lines.push(
    '',
    '-- Server-file functions: superuser-only by default; revoked again in case someone granted them.',
    ...REVOKED_FUNCTIONS.map((f) => `REVOKE EXECUTE ON FUNCTION ${f} FROM PUBLIC, ${role};`),
    '',
    '-- Optional, affects every role in this database: functions a read-only transaction does not stop.',
    '-- query_db already refuses them by name; uncomment to remove them at the database too.',
    '-- REVOKE EXECUTE ON FUNCTION pg_catalog.pg_terminate_backend(integer, bigint) FROM PUBLIC;',
    '-- REVOKE EXECUTE ON FUNCTION pg_catalog.pg_cancel_backend(integer) FROM PUBLIC;',
    '-- REVOKE EXECUTE ON FUNCTION pg_catalog.pg_advisory_lock(bigint) FROM PUBLIC;',
    '-- REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) FROM PUBLIC;',
    `-- REVOKE TEMPORARY ON DATABASE ${db} FROM PUBLIC;  (CREATE TEMP is refused in read-only transactions anyway)`,
    '-- If the dblink extension is installed: REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA <its schema> FROM PUBLIC;',
    '',
    `-- Then set a password without writing it down anywhere:  \\password ${options.role}`,
    '',
  );
  return lines.join('\n');
}
