/**
 * The configuration schema. Every key has a default (config/default.json holds the same values,
 * documented in docs/configuration.md); CUSTOS_* environment variables override them (loader.ts).
 * Secrets that belong in config (the HSM PIN, the token pepper) may come from files instead.
 */
import { z } from 'zod';

const port = z.number().int().min(0).max(65535);
const nullableString = z.string().min(1).nullable();

export const planSchema = z.strictObject({
  title: z.string(),
  /** null = unlimited */
  workspacesPerAccount: z.number().int().positive().nullable(),
  credentialsPerWorkspace: z.number().int().positive().nullable(),
  queryDb: z.boolean(),
});
export type Plan = z.infer<typeof planSchema>;
export const PLAN_IDS = ['free', 'pro', 'team'] as const;
export type PlanId = (typeof PLAN_IDS)[number];
export const plansSchema = z.strictObject({ free: planSchema, pro: planSchema, team: planSchema });
export type Plans = z.infer<typeof plansSchema>;

export const configSchema = z.strictObject({
  server: z.strictObject({
    host: z.string().min(1),
    port,
    /** The URL people and agents use to reach the service; defaults to http://host:port. */
    publicUrl: z.url().nullable(),
    /** Trust X-Forwarded-* (set when behind a TLS-terminating proxy; makes cookies Secure). */
    trustProxy: z.boolean(),
    bodyLimitBytes: z.number().int().positive(),
    /** Extra Origins allowed on /mcp and the app API besides publicUrl's own origin. */
    allowedOrigins: z.array(z.string()),
  }),
  dataDir: z.string().min(1),
  database: z.strictObject({
    /** postgres://… ; null = SQLite file `custos.sqlite` in dataDir. */
    url: nullableString,
  }),
  keys: z.strictObject({
    backend: z.enum(['local-dev', 'pkcs11', 'aws-kms']),
    localDev: z.strictObject({ keyFile: nullableString }),
    pkcs11: z.strictObject({
      module: z.string().min(1),
      tokenLabel: z.string().min(1).max(32),
      pin: nullableString,
      pinFile: nullableString,
      kekLabel: z.string().min(1),
      mechanism: z.enum(['aes-gcm', 'aes-key-wrap-pad']),
      sessions: z.number().int().min(1).max(64),
    }),
    awsKms: z.strictObject({
      keyId: nullableString,
      region: z.string().min(1),
      endpoint: z.url().nullable(),
    }),
  }),
  auth: z.strictObject({
    /** scrypt N (OWASP: 2^17 with r=8, p=1). Must be a power of two. */
    scryptCost: z.number().int().min(1024).refine((n) => (n & (n - 1)) === 0, 'must be a power of two'),
    sessionTtlSeconds: z.number().int().positive(),
    loginAttempts: z.strictObject({ max: z.number().int().positive(), windowSeconds: z.number().int().positive() }),
    tokenPepper: nullableString,
    tokenPepperFile: nullableString,
  }),
  actors: z.strictObject({
    idleSeconds: z.number().positive(),
    useConcurrency: z.number().int().positive(),
  }),
  broker: z.strictObject({
    timeoutMs: z.number().int().positive(),
    connectTimeoutMs: z.number().int().positive(),
    maxRequestBytes: z.number().int().positive(),
    maxResponseBytes: z.number().int().positive(),
    agentBodyPreviewBytes: z.number().int().positive(),
  }),
  mcp: z.strictObject({
    bodyLimitBytes: z.number().int().positive(),
    ratePerMinute: z.number().int().positive(),
  }),
  queryDb: z.strictObject({
    maxRows: z.number().int().positive(),
    maxBytes: z.number().int().positive(),
    statementTimeoutMs: z.number().int().positive(),
    connectTimeoutMs: z.number().int().positive(),
    poolSize: z.number().int().positive(),
  }),
  log: z.strictObject({ level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']) }),
});

export type Config = z.infer<typeof configSchema>;
