/**
 * Finds or creates the Custos KEK on the configured PKCS#11 token, with exactly the attributes the
 * service itself uses (src/keys/pkcs11/pkcs11-backend.ts kekTemplate): generated on the token,
 * CKA_SENSITIVE, CKA_EXTRACTABLE=false, CKA_MODIFIABLE=false. Idempotent: an existing
 * `<kekLabel>-v<N>` is found, never replaced. Config comes from config/*.json and CUSTOS_* env
 * (CUSTOS_PKCS11_MODULE, CUSTOS_PKCS11_TOKEN_LABEL, CUSTOS_PKCS11_PIN_FILE, …).
 *
 *   node --import tsx hsm/init-kek.ts            # find or create <kekLabel>-v1
 *   node --import tsx hsm/init-kek.ts --rotate   # add <kekLabel>-v<N+1> and make it current
 */
import { loadConfig } from '../src/config/loader.ts';
import { createLogger } from '../src/log.ts';
import { createPkcs11Backend } from '../src/keys/pkcs11/index.ts';

const config = loadConfig(process.env);
const log = createLogger({ level: 'warn' });
const backend = await createPkcs11Backend(config.keys.pkcs11, { log, eager: false });
try {
  await backend.health();
  if (process.argv.includes('--rotate')) await backend.rotateKek();
  const versions = await backend.kekVersions();
  process.stdout.write(
    `token "${config.keys.pkcs11.tokenLabel}": KEK versions ${versions.map((v) => `${config.keys.pkcs11.kekLabel}-v${v}`).join(', ')}; current ${backend.id}\n`,
  );
} catch (err) {
  process.stderr.write(`hsm init failed: ${err instanceof Error ? err.message : 'error'}\n`);
  process.exitCode = 1;
} finally {
  await backend.close();
}
