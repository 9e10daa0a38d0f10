/**
 * The `ssh` credential kind: an OpenSSH-format ed25519 private key (optionally passphrase-protected)
 * that never leaves the service. Its one capability is Signer: the workspace actor hands it the
 * decrypted key and the data an SSH client asked to sign, and gets back only the signature.
 *
 * Validation happens in two steps: `secretSchema` checks the shape (it runs on strings at the API
 * edge), `deriveConfig` fully parses and verifies the key at save time (inside the actor) and throws
 * CUSTOS_ERR_VALIDATION for a non-ed25519, malformed or wrongly-unlocked key. No error or derived
 * field ever contains a byte of the private key or the passphrase.
 */
import { sign as cryptoSign } from 'node:crypto';
import { z } from 'zod';
import { CustosError } from '../../errors.ts';
import type { CredentialKind, KindContext, PublicView, SecretFields, Signer } from '../credential-kind.ts';
import {
  KeyParseError, MAX_KEY_TEXT_BYTES, ed25519KeyBlob, ed25519PrivateKeyObject, parseOpenSshEd25519,
  sshFingerprint, type ParsedEd25519Key,
} from './openssh-key.ts';
import { sshString } from './wire.ts';

export interface SshConfig extends Record<string, unknown> {
  /** A person's name for the key; it is the comment `ssh-add -l` shows. */
  label?: string | undefined;
  /** Derived: `ssh-ed25519 AAAA… comment`, ready for authorized_keys. */
  publicKey?: string | undefined;
  /** Derived: `SHA256:…`, as `ssh-keygen -lf` prints it. */
  fingerprint?: string | undefined;
  /** Derived: base64 of the SSH wire public key blob (what the agent protocol lists and signs with). */
  keyBlob?: string | undefined;
  /** Derived: the label, or else the comment stored in the key file. */
  comment?: string | undefined;
}

/** How long an unlocked (passphrase-protected) key's seed stays in the actor cache. */
export const UNLOCKED_SEED_TTL_MS = 5 * 60 * 1000;

const OPENSSH_BEGIN = '-----BEGIN OPENSSH PRIVATE KEY-----';

const secretSchema = z.object({
  privateKey: z
    .string()
    .max(MAX_KEY_TEXT_BYTES, 'the private key is too large to be an ed25519 key')
    .refine((s) => s.includes(OPENSSH_BEGIN), {
      message: `must be an OpenSSH private key (${OPENSSH_BEGIN}); generate one with \`ssh-keygen -t ed25519\``,
    }),
  passphrase: z.string().max(1024).optional(),
});

const labelSchema = z.string().min(1).max(200).regex(/^[^\u0000-\u001f\u007f]*$/, 'no control characters');

const configSchema = z.object({
  label: labelSchema.optional(),
  publicKey: z.string().max(1000).optional(),
  fingerprint: z.string().max(100).optional(),
  keyBlob: z.string().max(1000).optional(),
  comment: z.string().max(1000).optional(),
});

function validationError(err: unknown): CustosError {
  const message = err instanceof KeyParseError ? err.message : 'the private key could not be read';
  // No `cause`: a library error could quote its input, and the input is a private key.
  return new CustosError('CUSTOS_ERR_VALIDATION', `Invalid SSH private key: ${message}.`);
}

function parseSecret(secret: SecretFields): ParsedEd25519Key {
  const text = secret['privateKey'];
  if (!text || text.length === 0) {
    throw new CustosError('CUSTOS_ERR_VALIDATION', 'Invalid SSH private key: the privateKey field is required.');
  }
  try {
    return parseOpenSshEd25519(text, secret['passphrase']);
  } catch (err) {
    throw validationError(err);
  }
}

/** The comment shown by `ssh-add -l`: one line, printable, bounded. */
function safeComment(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f]/g, ' ').slice(0, 200);
}

export const sshKind: CredentialKind<SshConfig> & Signer<SshConfig> = {
  scheme: 'ssh',
  secretFields: ['privateKey', 'passphrase'],
  secretSchema: secretSchema as unknown as z.ZodType<Record<string, string>>,
  configSchema: configSchema as z.ZodType<SshConfig>,

  deriveConfig(secret: SecretFields, config: SshConfig): SshConfig {
    const parsed = parseSecret(secret);
    parsed.seed.fill(0); // only the public half is needed here
    const blob = ed25519KeyBlob(parsed.publicKey);
    const comment = safeComment(config.label ?? (parsed.comment || 'custos ssh key'));
    const b64 = blob.toString('base64');
    return {
      ...config,
      keyBlob: b64,
      fingerprint: sshFingerprint(blob),
      comment,
      publicKey: `ssh-ed25519 ${b64} ${comment}`.trimEnd(),
    };
  },

  describe(config: SshConfig): PublicView {
    return {
      authScheme: 'ssh',
      label: config.label ?? config.comment,
      publicKey: config.publicKey,
      fingerprint: config.fingerprint,
    };
  },

  sign(secret: SecretFields, config: SshConfig, data: Buffer, _flags: number, ctx?: KindContext): Buffer {
    // Flags: SSH_AGENT_RSA_SHA2_256/512 select RSA hash variants; Ed25519 has exactly one
    // signature algorithm, so (like OpenSSH's agent) they are ignored.
    const seed = unlockSeed(secret, config, ctx);
    try {
      const key = ed25519PrivateKeyObject(seed);
      const sig = cryptoSign(null, data, key);
      return Buffer.concat([sshString('ssh-ed25519'), sshString(sig)]);
    } finally {
      seed.fill(0);
    }
  },
};

/**
 * Returns a fresh copy of the 32-byte seed (the caller zeroes it). A passphrase-protected key costs
 * a bcrypt-pbkdf run (~tens of ms per 16 rounds) to unlock, so its seed is kept for a few minutes in
 * the actor's zeroing cache when one is given; an unprotected key is simply re-parsed each time.
 */
function unlockSeed(secret: SecretFields, config: SshConfig, ctx: KindContext | undefined): Buffer {
  const cacheKey = config.keyBlob ? `ssh-seed:${config.keyBlob}` : undefined;
  if (ctx && cacheKey) {
    const cached = ctx.cache.get(cacheKey);
    if (cached && cached.length === 32) return Buffer.from(cached);
  }
  const parsed = parseSecret(secret);
  if (config.keyBlob !== undefined) {
    // The config is what the service advertised; refuse to sign with a different key than that.
    const blob = ed25519KeyBlob(parsed.publicKey);
    if (blob.toString('base64') !== config.keyBlob) {
      parsed.seed.fill(0);
      throw new CustosError('CUSTOS_ERR_INTEGRITY', 'The stored SSH key does not match its recorded public key.');
    }
  }
  if (ctx && cacheKey && parsed.encrypted) {
    ctx.cache.set(cacheKey, Buffer.from(parsed.seed), ctx.now() + UNLOCKED_SEED_TTL_MS);
  }
  return parsed.seed;
}
