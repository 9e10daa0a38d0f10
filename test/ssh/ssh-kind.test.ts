import test from 'ava';
import { spawn } from 'node:child_process';
import { createPublicKey, randomBytes, verify } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isSigner, type ActorCache, type KindContext } from '../../src/kinds/credential-kind.ts';
import { sshKind } from '../../src/kinds/ssh/index.ts';
import { CustosError } from '../../src/errors.ts';
import { AgentClient } from '../../src/ssh/agent-client.ts';
import { silentLogger } from '../../src/log.ts';
import { makeKey, pemBody, run, secretOf, removeKeyDirs } from './helpers.ts';

test.after.always(() => removeKeyDirs());

const SPKI_ED25519_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** Verifies an SSH ed25519 signature blob against a `.pub` line, independently of the kind. */
function verifyWithPublicLine(publicLine: string, data: Buffer, sigBlob: Buffer): boolean {
  const blob = Buffer.from(publicLine.split(' ')[1]!, 'base64');
  const pub = blob.subarray(blob.length - 32);
  const key = createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, pub]), format: 'der', type: 'spki' });
  const algLen = sigBlob.readUInt32BE(0);
  if (sigBlob.subarray(4, 4 + algLen).toString() !== 'ssh-ed25519') return false;
  const sigLen = sigBlob.readUInt32BE(4 + algLen);
  return verify(null, data, key, sigBlob.subarray(8 + algLen, 8 + algLen + sigLen));
}

function memoryCache(): ActorCache & { map: Map<string, Buffer> } {
  const map = new Map<string, Buffer>();
  return { map, get: (k) => map.get(k), set: (k, v) => void map.set(k, v), delete: (k) => void map.delete(k) };
}

function ctxWith(cache: ActorCache): KindContext {
  return { workspaceId: 'w', credentialId: 'c', cache, log: silentLogger(), now: () => Date.now() };
}

function expectValidation(t: import('ava').ExecutionContext, fn: () => unknown, ...mustNotContain: string[]): CustosError {
  const err = t.throws(fn, { instanceOf: CustosError }) as CustosError;
  t.is(err.code, 'CUSTOS_ERR_VALIDATION');
  const rendered = JSON.stringify(err.toJSON()) + err.message + String(err.stack);
  for (const s of mustNotContain) t.false(rendered.includes(s), 'error must not echo key material or passphrase');
  return err;
}

test('ssh kind is a Signer and derives the same fingerprint and public key as ssh-keygen', (t) => {
  t.true(isSigner(sshKind));
  const key = makeKey({ comment: 'alice@laptop' });
  const cfg = sshKind.deriveConfig!(secretOf(key), {});
  t.is(cfg.fingerprint, key.fingerprint);
  t.is(cfg.publicKey, key.publicLine);
  t.is(cfg.comment, 'alice@laptop');
  t.is(cfg.keyBlob, key.publicLine.split(' ')[1]);
  const labelled = sshKind.deriveConfig!(secretOf(key), { label: 'deploy key (prod)' });
  t.is(labelled.comment, 'deploy key (prod)');
  t.deepEqual(sshKind.describe(labelled), {
    authScheme: 'ssh', label: 'deploy key (prod)', publicKey: labelled.publicKey, fingerprint: key.fingerprint,
  });
  t.false(JSON.stringify(labelled).includes(pemBody(key.pem).slice(40, 80)));
});

test('signatures verify with the public key from the .pub file, for any data and flags', (t) => {
  const key = makeKey();
  const cfg = sshKind.deriveConfig!(secretOf(key), {});
  for (const flags of [0, 2, 4]) {
    const data = randomBytes(200);
    const sig = sshKind.sign(secretOf(key), cfg, data, flags);
    t.true(verifyWithPublicLine(key.publicLine, data, sig));
    t.false(verifyWithPublicLine(key.publicLine, Buffer.concat([data, Buffer.from([1])]), sig));
  }
});

test('signatures are byte-identical to those of OpenSSH ssh-agent holding the same key', async (t) => {
  const key = makeKey();
  const cfg = sshKind.deriveConfig!(secretOf(key), {});
  const dir = mkdtempSync(join(tmpdir(), 'custos-openssh-agent-'));
  const sock = join(dir, 'agent.sock');
  const agent = spawn('ssh-agent', ['-D', '-a', sock], { stdio: 'ignore' });
  t.teardown(() => { agent.kill(); rmSync(dir, { recursive: true, force: true }); });
  for (let i = 0; i < 100 && !existsSync(sock); i++) await new Promise((r) => setTimeout(r, 50));
  const add = run('ssh-add', [key.privatePath], { env: { ...process.env, SSH_AUTH_SOCK: sock } });
  t.is(add.code, 0, add.stderr);
  const client = await AgentClient.connect(sock);
  t.teardown(() => client.close());
  const [id] = await client.listIdentities();
  t.is(id!.keyBlob.toString('base64'), cfg.keyBlob!);
  for (let i = 0; i < 5; i++) {
    const data = randomBytes(64 + i * 50);
    const theirs = await client.sign(id!.keyBlob, data, 0);
    const ours = sshKind.sign(secretOf(key), cfg, data, 0);
    t.deepEqual(ours, theirs);
  }
});

for (const cipher of ['aes256-ctr', 'aes256-gcm@openssh.com', 'aes128-cbc']) {
  test(`passphrase-protected key (${cipher}) unlocks with the right passphrase only`, (t) => {
    const pass = `MARKER-${randomBytes(6).toString('hex')}`;
    const key = makeKey({ passphrase: pass, extra: ['-Z', cipher] });
    const cfg = sshKind.deriveConfig!(secretOf(key, pass), {});
    t.is(cfg.fingerprint, key.fingerprint);
    const data = randomBytes(32);
    t.true(verifyWithPublicLine(key.publicLine, data, sshKind.sign(secretOf(key, pass), cfg, data, 0)));
    const wrong = expectValidation(t, () => sshKind.deriveConfig!(secretOf(key, pass + 'x'), {}), pass, pemBody(key.pem).slice(60, 100));
    t.regex(wrong.message, /wrong passphrase/);
    const missing = expectValidation(t, () => sshKind.deriveConfig!(secretOf(key), {}), pass);
    t.regex(missing.message, /no passphrase/);
  });
}

test('non-ed25519 keys are refused with a clear validation error', (t) => {
  for (const type of ['rsa', 'ecdsa']) {
    const key = makeKey({ type });
    const err = expectValidation(t, () => sshKind.deriveConfig!(secretOf(key), {}), pemBody(key.pem).slice(60, 100));
    t.regex(err.message, /only ed25519 keys are supported/);
  }
  const pemRsa = makeKey({ type: 'rsa', extra: ['-m', 'PEM'] });
  t.regex(expectValidation(t, () => sshKind.deriveConfig!(secretOf(pemRsa), {})).message, /only OpenSSH-format keys/);
});

test('malformed, truncated and bit-flipped keys are refused without echoing the key', (t) => {
  const key = makeKey({ comment: 'MARKER-comment' });
  const body = pemBody(key.pem);
  const text = key.pem.toString('utf8');
  const cases: string[] = [
    'not a key at all',
    '-----BEGIN OPENSSH PRIVATE KEY-----\n-----END OPENSSH PRIVATE KEY-----\n',
    '-----BEGIN OPENSSH PRIVATE KEY-----\n' + body.slice(0, 100) + '\n-----END OPENSSH PRIVATE KEY-----\n',
    '-----BEGIN OPENSSH PRIVATE KEY-----\n' + body + '\n', // no END
    text.replace(body.slice(40, 44), '!!!!'),
    '-----BEGIN OPENSSH PRIVATE KEY-----\n' + Buffer.from('openssh-key-v1\0garbage').toString('base64') + '\n-----END OPENSSH PRIVATE KEY-----\n',
  ];
  // Flip bytes all over the decoded container: every outcome is either a clean validation error or
  // (when the flip hits the comment or padding-free bytes it cannot detect) a key with the same fingerprint.
  const raw = Buffer.from(body, 'base64');
  for (let i = 0; i < raw.length; i += 7) {
    const copy = Buffer.from(raw);
    copy[i] = copy[i]! ^ 0x01;
    cases.push(`-----BEGIN OPENSSH PRIVATE KEY-----\n${copy.toString('base64')}\n-----END OPENSSH PRIVATE KEY-----\n`);
  }
  let refused = 0;
  for (const c of cases) {
    try {
      const cfg = sshKind.deriveConfig!({ privateKey: Buffer.from(c) }, {});
      // A flip that survives every check can only be in the comment: the key itself is unchanged.
      t.is(cfg.fingerprint, key.fingerprint);
    } catch (err) {
      refused++;
      t.true(err instanceof CustosError, String(err));
      const e = err as CustosError;
      t.is(e.code, 'CUSTOS_ERR_VALIDATION');
      t.false(e.message.includes(body.slice(60, 90)));
    }
  }
  t.true(refused >= cases.length - 3, `refused ${refused} of ${cases.length}`);
});

test('secretSchema refuses text that is not an OpenSSH private key, without echoing it', (t) => {
  const r = sshKind.secretSchema.safeParse({ privateKey: 'MARKER-not-a-key' });
  t.false(r.success);
  t.false(JSON.stringify(r.error?.issues).includes('MARKER-not-a-key'));
  t.true(sshKind.secretSchema.safeParse({ privateKey: makeKey().pem.toString() }).success);
});

test('sign refuses a stored key that does not match its recorded public key', (t) => {
  const a = makeKey();
  const b = makeKey();
  const cfgA = sshKind.deriveConfig!(secretOf(a), {});
  const err = t.throws(() => sshKind.sign(secretOf(b), cfgA, Buffer.from('x'), 0), { instanceOf: CustosError }) as CustosError;
  t.is(err.code, 'CUSTOS_ERR_INTEGRITY');
});

test('an unlocked passphrase-protected key is cached in the actor cache only, and reused', (t) => {
  const pass = 'correct horse';
  const key = makeKey({ passphrase: pass });
  const cfg = sshKind.deriveConfig!(secretOf(key, pass), {});
  const cache = memoryCache();
  const data = Buffer.from('hello');
  const first = sshKind.sign(secretOf(key, pass), cfg, data, 0, ctxWith(cache));
  t.is(cache.map.size, 1);
  t.is([...cache.map.values()][0]!.length, 32);
  // With the seed cached, a second call does not need to decrypt (an unusable secret proves it).
  const second = sshKind.sign({ privateKey: Buffer.from('x') }, cfg, data, 0, ctxWith(cache));
  t.deepEqual(second, first);
  // Unencrypted keys are cheap to parse and are never cached.
  const plain = makeKey();
  const plainCache = memoryCache();
  sshKind.sign(secretOf(plain), sshKind.deriveConfig!(secretOf(plain), {}), data, 0, ctxWith(plainCache));
  t.is(plainCache.map.size, 0);
});

test('sign leaves the caller\'s secret buffers intact for the actor to zero', (t) => {
  const key = makeKey();
  const secret = secretOf(key);
  const before = Buffer.from(secret['privateKey']!);
  sshKind.sign(secret, sshKind.deriveConfig!(secret, {}), Buffer.from('x'), 0);
  t.deepEqual(secret['privateKey'], before);
});
