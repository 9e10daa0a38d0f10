/** Operator commands that work on the database directly: migrate, admin set-plan. */
import { loadConfig, loadPlans } from '../config/loader.ts';
import { PLAN_IDS } from '../config/schema.ts';
import { CustosError } from '../errors.ts';
import { createLogger } from '../log.ts';
import { openDatabase } from '../storage/data-source.ts';
import { AuditLog, orgChain } from '../audit/audit-log.ts';
import { createStore } from '../storage/repos.ts';

export async function migrateCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  if (argv.includes('--help')) {
    process.stdout.write('Usage: custos migrate\n\nApplies pending database migrations (serve also does this at start-up).\n');
    return 0;
  }
  const config = loadConfig(env);
  const db = await openDatabase({ url: config.database.url, dataDir: config.dataDir });
  try {
    const ran = await db.migrate();
    process.stdout.write(ran.length ? `Applied: ${ran.join(', ')}\n` : 'Database is up to date.\n');
    return 0;
  } finally {
    await db.close();
  }
}

export async function adminCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [sub, orgRef, plan] = argv;
  if (sub !== 'set-plan' || !orgRef || !plan || argv.includes('--help')) {
    process.stdout.write(`Usage: custos admin set-plan <organization id | owner email> <${PLAN_IDS.join('|')}>\n`);
    return argv.includes('--help') ? 0 : 2;
  }
  const plans = loadPlans();
  if (!(PLAN_IDS as readonly string[]).includes(plan)) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', `Unknown plan '${plan}'; plans are ${Object.keys(plans).join(', ')}.`);
  }
  const config = loadConfig(env);
  const log = createLogger({ level: 'warn' });
  const db = await openDatabase({ url: config.database.url, dataDir: config.dataDir });
  try {
    await db.migrate();
    const audit = new AuditLog(db, log);
    const store = createStore(db, audit);
    let org = await store.read.findOrganization(orgRef);
    if (!org && orgRef.includes('@')) {
      const account = await store.read.findAccountByEmail(orgRef.toLowerCase());
      if (account) org = await store.read.findPersonalOrganization(account.id);
    }
    if (!org) throw new CustosError('CUSTOS_ERR_NOT_FOUND', `No organization '${orgRef}'.`);
    const from = org.plan;
    await store.tx(async (tx) => {
      await tx.setOrganizationPlan(org.id, plan);
      await tx.audit({ chain: orgChain(org.id), actor: { type: 'system', id: null }, action: 'organization.set_plan',
        target: { type: 'organization', id: org.id, name: org.name }, outcome: 'success', details: { from, to: plan } });
    });
    process.stdout.write(`Organization ${org.id} (${org.name}): plan ${from} → ${plan}\n`);
    return 0;
  } finally {
    await db.close();
  }
}
