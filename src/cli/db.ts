/** `custos db readonly-role-sql`: prints SQL creating a dedicated low-privilege role for query_db. */
import { parseArgs } from 'node:util';
import { readonlyRoleSql } from '../sql/readonly-role.ts';

const HELP = `Usage: custos db readonly-role-sql --role NAME --database DB [--schema S …] [--owner ROLE]

Prints SQL (run it as a superuser or the database owner) that creates a login role which can only
read: no superuser, no create, default_transaction_read_only on, SELECT on the named schemas, and the
file-reading functions revoked. Give query_db a DSN for that role, never an owner's. See docs/query-db.md.
`;

export async function dbCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'readonly-role-sql') {
    process.stdout.write(HELP);
    return sub === '--help' ? 0 : 2;
  }
  const { values } = parseArgs({ args: rest, options: {
    role: { type: 'string' }, database: { type: 'string' }, schema: { type: 'string', multiple: true }, owner: { type: 'string' }, help: { type: 'boolean' },
  }, strict: true });
  if (values.help || !values.role || !values.database) {
    process.stdout.write(HELP);
    return values.help ? 0 : 2;
  }
  process.stdout.write(readonlyRoleSql({
    role: values.role, database: values.database, ...(values.schema ? { schemas: values.schema } : {}), ...(values.owner ? { tableOwner: values.owner } : {}),
  }));
  return 0;
}
