/**
 * Key operations:
 *  - `custos keys rotate-kek`: makes a new KEK version current in the key backend and re-wraps every
 *    workspace DEK under it, one workspace per transaction. DEKs themselves do not change, so running
 *    nodes keep serving (no downtime); old KEK versions stay usable for unwrap until destroyed by an
 *    operator after every node has restarted (docs/keys.md).
 *  - `custos keys rotate-dek <workspace>`: a new DEK for one workspace, every secret re-encrypted.
 *  - `custos hsm init`: hsm/init-softhsm.sh (a SoftHSM2 development token and KEK).
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../config/loader.ts';
import { CustosError } from '../errors.ts';
import { createLogger } from '../log.ts';
import { workspaceChain } from '../audit/audit-log.ts';
import { isRotatable } from '../keys/key-backend.ts';
import { workspaceAad } from '../actors/workspace-actor.ts';
import { createCustos } from '../compose.ts';
import { systemContext } from '../core/context.ts';

const HELP = `Usage:
  custos keys rotate-kek             new KEK version in the key backend; re-wrap every workspace DEK under it
  custos keys rotate-dek <workspace> new DEK for the workspace; re-encrypt all its secrets
`;

export async function keysCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [sub, arg] = argv;
  if (sub !== 'rotate-kek' && sub !== 'rotate-dek') {
    process.stdout.write(HELP);
    return sub === '--help' ? 0 : 2;
  }
  const config = loadConfig(env);
  const log = createLogger({ level: 'warn' });
  const custos = await createCustos(config, { log, env });
  try {
    if (sub === 'rotate-dek') {
      if (!arg) throw new CustosError('CUSTOS_ERR_VALIDATION', 'Name the workspace id: custos keys rotate-dek <workspace>.');
      const r = await custos.services.credentials.rotateDek(systemContext, arg);
      process.stdout.write(`Workspace ${arg}: DEK version ${r.dekVersion}; ${r.credentials} secret(s) re-encrypted.\n`);
      return 0;
    }
    const backend = custos.backend;
    if (!isRotatable(backend.inner)) throw new CustosError('CUSTOS_ERR_CONFIG', `The ${config.keys.backend} backend cannot rotate its KEK from here (rotate it in the provider).`);
    const from = backend.id;
    const to = await backend.inner.rotateKek();
    let n = 0;
    for (const ws of await custos.store.read.listAllWorkspaces()) {
      if (!ws.wrapped_dek) continue;
      const aad = workspaceAad(ws.id);
      const dek = await backend.unwrap(Buffer.from(ws.wrapped_dek, 'base64'), aad);
      try {
        const wrapped = await backend.wrap(dek, aad);
        await custos.store.tx(async (tx) => {
          await tx.updateWorkspace(ws.id, { wrapped_dek: wrapped.toString('base64'), key_backend_id: backend.id, updated_at: new Date().toISOString() });
          await tx.audit({ chain: workspaceChain(ws.id), actor: { type: 'system', id: null }, action: 'workspace.rewrap_kek',
            target: { type: 'workspace', id: ws.id, name: ws.name }, outcome: 'success', details: { from: ws.key_backend_id, to } });
        });
        n++;
      } finally {
        dek.fill(0);
      }
    }
    process.stdout.write(`KEK rotated: ${from} → ${to}; ${n} workspace DEK(s) re-wrapped.\n`);
    return 0;
  } finally {
    await custos.close();
  }
}

export async function hsmCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  if (argv[0] !== 'init') {
    process.stdout.write('Usage: custos hsm init\n\nCreates a SoftHSM2 development token and KEK (hsm/init-softhsm.sh; see hsm/README.md).\n');
    return argv[0] === '--help' ? 0 : 2;
  }
  const script = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../hsm/init-softhsm.sh');
  const r = spawnSync('sh', [script], { stdio: 'inherit', env });
  return r.status ?? 1;
}
