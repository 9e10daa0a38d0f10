/**
 * Loads configuration: config/default.json (documented defaults) ← an optional JSON file named by
 * CUSTOS_CONFIG ← CUSTOS_* environment variables ← programmatic overrides (tests). The result is
 * validated by the zod schema; a bad value stops start-up with CUSTOS_ERR_CONFIG naming the key.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { z } from 'zod';
import { CustosError } from '../errors.ts';
import { configSchema, plansSchema, type Config, type Plans } from './schema.ts';

export const CONFIG_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../config');

type Json = Record<string, unknown>;

/** Environment variables and the config key each sets; parsers turn the string into the value. */
export const ENV_OVERRIDES: ReadonlyArray<{ env: string; key: string; parse: (v: string) => unknown; doc: string }> = [
  { env: 'CUSTOS_HOST', key: 'server.host', parse: String, doc: 'address to listen on (default 127.0.0.1)' },
  { env: 'CUSTOS_PORT', key: 'server.port', parse: Number, doc: 'port to listen on (default 8080; 0 = any free port)' },
  { env: 'CUSTOS_PUBLIC_URL', key: 'server.publicUrl', parse: String, doc: 'URL people and agents use (default http://host:port)' },
  { env: 'CUSTOS_TRUST_PROXY', key: 'server.trustProxy', parse: parseBool, doc: 'trust X-Forwarded-* from a TLS proxy (true|false)' },
  { env: 'CUSTOS_ALLOWED_ORIGINS', key: 'server.allowedOrigins', parse: parseList, doc: 'extra allowed Origins, comma-separated' },
  { env: 'CUSTOS_DATA_DIR', key: 'dataDir', parse: String, doc: 'data directory (SQLite file, local-dev key); default ./data' },
  { env: 'CUSTOS_DATABASE_URL', key: 'database.url', parse: String, doc: 'postgres://… ; unset = SQLite in the data dir' },
  { env: 'CUSTOS_KEY_BACKEND', key: 'keys.backend', parse: String, doc: 'local-dev | pkcs11 | aws-kms' },
  { env: 'CUSTOS_PKCS11_MODULE', key: 'keys.pkcs11.module', parse: String, doc: 'PKCS#11 module path' },
  { env: 'CUSTOS_PKCS11_TOKEN_LABEL', key: 'keys.pkcs11.tokenLabel', parse: String, doc: 'token label' },
  { env: 'CUSTOS_PKCS11_PIN', key: 'keys.pkcs11.pin', parse: String, doc: 'user PIN (prefer CUSTOS_PKCS11_PIN_FILE)' },
  { env: 'CUSTOS_PKCS11_PIN_FILE', key: 'keys.pkcs11.pinFile', parse: String, doc: 'file holding the user PIN' },
  { env: 'CUSTOS_PKCS11_KEK_LABEL', key: 'keys.pkcs11.kekLabel', parse: String, doc: 'KEK label prefix' },
  { env: 'CUSTOS_PKCS11_MECHANISM', key: 'keys.pkcs11.mechanism', parse: String, doc: 'aes-gcm | aes-key-wrap-pad' },
  { env: 'CUSTOS_KMS_KEY_ID', key: 'keys.awsKms.keyId', parse: String, doc: 'KMS key id or ARN' },
  { env: 'CUSTOS_KMS_REGION', key: 'keys.awsKms.region', parse: String, doc: 'KMS region' },
  { env: 'CUSTOS_KMS_ENDPOINT', key: 'keys.awsKms.endpoint', parse: String, doc: 'KMS endpoint override' },
  { env: 'CUSTOS_LOCAL_KEY_FILE', key: 'keys.localDev.keyFile', parse: String, doc: 'local-dev KEK file (default <dataDir>/local-dev-kek.key)' },
  { env: 'CUSTOS_TOKEN_PEPPER_FILE', key: 'auth.tokenPepperFile', parse: String, doc: 'file holding the token-hash pepper' },
  { env: 'CUSTOS_SCRYPT_COST', key: 'auth.scryptCost', parse: Number, doc: 'scrypt N for password hashes (default 131072)' },
  { env: 'CUSTOS_ACTOR_IDLE_SECONDS', key: 'actors.idleSeconds', parse: Number, doc: 'idle seconds before an actor passivates' },
  { env: 'CUSTOS_MCP_RATE_PER_MINUTE', key: 'mcp.ratePerMinute', parse: Number, doc: 'per-token MCP request rate' },
  { env: 'CUSTOS_LOG_LEVEL', key: 'log.level', parse: String, doc: 'pino level (default info)' },
];

function parseBool(v: string): boolean {
  if (/^(1|true|yes|on)$/i.test(v)) return true;
  if (/^(0|false|no|off)$/i.test(v)) return false;
  return v as unknown as boolean; // left for the schema to reject with a clear message
}
function parseList(v: string): string[] {
  return v.split(',').map((s) => s.trim()).filter(Boolean);
}

function readJson(file: string): Json {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Json;
  } catch (err) {
    throw new CustosError('CUSTOS_ERR_CONFIG', `Cannot read config file ${file}: ${(err as Error).message}`);
  }
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function deepMerge(base: Json, over: Json): Json {
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(over)) {
    out[k] = isObject(v) && isObject(out[k]) ? deepMerge(out[k] as Json, v) : v;
  }
  return out;
}

function setPath(obj: Json, dotted: string, value: unknown): void {
  const parts = dotted.split('.');
  let cur: Json = obj;
  for (const p of parts.slice(0, -1)) {
    if (!isObject(cur[p])) cur[p] = {};
    cur = cur[p] as Json;
  }
  cur[parts[parts.length - 1]!] = value;
}

export type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? (T[K] extends unknown[] ? T[K] : DeepPartial<T[K]>) : T[K] };

export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: DeepPartial<Config> = {}): Config {
  let raw = readJson(path.join(CONFIG_DIR, 'default.json'));
  if (env.CUSTOS_CONFIG) raw = deepMerge(raw, readJson(env.CUSTOS_CONFIG));
  for (const o of ENV_OVERRIDES) {
    const v = env[o.env];
    if (v !== undefined && v !== '') setPath(raw, o.key, o.parse(v));
  }
  raw = deepMerge(raw, overrides as Json);
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    throw new CustosError('CUSTOS_ERR_CONFIG', `Invalid configuration at ${first.path.join('.') || '(root)'}: ${first.message}`, {
      details: { issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) },
    });
  }
  const config = parsed.data;
  config.dataDir = path.resolve(config.dataDir);
  return config;
}

export function loadPlans(file = path.join(CONFIG_DIR, 'plans.json')): Plans {
  const parsed = plansSchema.safeParse(readJson(file));
  if (!parsed.success) {
    throw new CustosError('CUSTOS_ERR_CONFIG', `Invalid plans file ${file}: ${z.prettifyError(parsed.error)}`);
  }
  return parsed.data;
}

export function publicUrl(config: Config, boundPort?: number): string {
  if (config.server.publicUrl) return config.server.publicUrl.replace(/\/+$/, '');
  const host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host;
  return `http://${host}:${boundPort ?? config.server.port}`;
}
