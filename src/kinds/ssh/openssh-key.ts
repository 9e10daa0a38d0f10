/**
 * Parser for OpenSSH-format ed25519 private keys (`-----BEGIN OPENSSH PRIVATE KEY-----`, the
 * "openssh-key-v1" container of OpenSSH's PROTOCOL.key), optionally passphrase-protected with
 * bcrypt-pbkdf + AES.
 *
 * Why our own parser rather than ssh2's `utils.parseKey`: ssh2 re-encodes the private key as a PEM
 * *string* (and keeps it on the parsed object), which can never be zeroed. Here the key text stays a
 * Buffer, its base64 is decoded byte-wise, and every intermediate (decoded container, bcrypt output,
 * decrypted section) is zeroed before returning. The only crypto used is node:crypto (AES, SHA-256,
 * Ed25519) and ssh2's own bcrypt-pbkdf dependency (the KDF OpenSSH uses); no primitive is written here.
 *
 * Honest limits: bcrypt-pbkdf copies the passphrase into internal Uint8Arrays it does not zero, and a
 * node:crypto KeyObject keeps its own copy of the key inside OpenSSL until it is garbage-collected.
 */
import { createDecipheriv, createHash, createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { createRequire } from 'node:module';
import { WireError, WireReader, sshString } from './wire.ts';

const BEGIN = '-----BEGIN OPENSSH PRIVATE KEY-----';
const END = '-----END OPENSSH PRIVATE KEY-----';
const MAGIC = Buffer.from('openssh-key-v1\0', 'latin1');
/** A real ed25519 key file is ~400 bytes (~460 encrypted); anything far larger is not one. */
export const MAX_KEY_TEXT_BYTES = 16 * 1024;
/**
 * bcrypt rounds are a work factor chosen by whoever made the file: ssh-keygen's default is 16, `-a 100`
 * is common advice. Past this cap a key file would be a CPU-exhaustion lever against the service.
 */
export const MAX_KDF_ROUNDS = 1000;

/** A parse failure; the message names what is wrong, never any byte of the key or passphrase. */
export class KeyParseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KeyParseError';
  }
}

export interface ParsedEd25519Key {
  /** The 32-byte private seed. The caller owns it and must zero it. */
  seed: Buffer;
  /** The 32-byte public key. */
  publicKey: Buffer;
  /** The comment stored inside the key file (not secret; e.g. `user@host`). */
  comment: string;
  /** True when the file was passphrase-protected. */
  encrypted: boolean;
}

interface CipherInfo {
  node: string;
  keyLen: number;
  ivLen: number;
  blockLen: number;
  /** AES-GCM: a 16-byte tag follows the encrypted section, outside its length prefix. */
  tagLen: number;
}

const CIPHERS: Record<string, CipherInfo> = {
  'aes128-ctr': { node: 'aes-128-ctr', keyLen: 16, ivLen: 16, blockLen: 16, tagLen: 0 },
  'aes192-ctr': { node: 'aes-192-ctr', keyLen: 24, ivLen: 16, blockLen: 16, tagLen: 0 },
  'aes256-ctr': { node: 'aes-256-ctr', keyLen: 32, ivLen: 16, blockLen: 16, tagLen: 0 },
  'aes128-cbc': { node: 'aes-128-cbc', keyLen: 16, ivLen: 16, blockLen: 16, tagLen: 0 },
  'aes192-cbc': { node: 'aes-192-cbc', keyLen: 24, ivLen: 16, blockLen: 16, tagLen: 0 },
  'aes256-cbc': { node: 'aes-256-cbc', keyLen: 32, ivLen: 16, blockLen: 16, tagLen: 0 },
  'aes128-gcm@openssh.com': { node: 'aes-128-gcm', keyLen: 16, ivLen: 12, blockLen: 16, tagLen: 16 },
  'aes256-gcm@openssh.com': { node: 'aes-256-gcm', keyLen: 32, ivLen: 12, blockLen: 16, tagLen: 16 },
};

type BcryptPbkdf = (
  pass: Uint8Array, passlen: number, salt: Uint8Array, saltlen: number,
  key: Uint8Array, keylen: number, rounds: number,
) => number;

let bcryptPbkdf: BcryptPbkdf | undefined;
/** bcrypt-pbkdf is resolved through ssh2 (whose dependency it is), so it is the copy ssh2 ships. */
function loadBcryptPbkdf(): BcryptPbkdf {
  if (!bcryptPbkdf) {
    const fromHere = createRequire(import.meta.url);
    const fromSsh2 = createRequire(fromHere.resolve('ssh2'));
    bcryptPbkdf = (fromSsh2('bcrypt-pbkdf') as { pbkdf: BcryptPbkdf }).pbkdf;
  }
  return bcryptPbkdf;
}

// ---------------------------------------------------------------------------------------------
// Base64 straight from bytes: Buffer.from(str, 'base64') would need the key body as a JS string,
// which cannot be zeroed. This is a format decoder, not a cryptographic primitive.
const B64 = new Int16Array(256).fill(-1);
'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
  .split('')
  .forEach((c, i) => { B64[c.charCodeAt(0)] = i; });

function decodeBase64Bytes(src: Buffer): Buffer {
  const out = Buffer.alloc(Math.floor((src.length * 3) / 4) + 3);
  let acc = 0;
  let bits = 0;
  let n = 0;
  let padding = false;
  for (let i = 0; i < src.length; i++) {
    const c = src[i]!;
    if (c === 0x0a || c === 0x0d || c === 0x20 || c === 0x09) continue;
    if (c === 0x3d) { padding = true; continue; } // '='
    const v = B64[c]!;
    if (v < 0 || padding) {
      out.fill(0);
      acc = 0;
      throw new KeyParseError('the private key is not valid base64 between its BEGIN and END lines');
    }
    acc = ((acc << 6) | v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (acc >> bits) & 0xff;
    }
  }
  acc = 0;
  const result = Buffer.alloc(n);
  out.copy(result, 0, 0, n);
  out.fill(0);
  return result;
}

/** Strips the armour and decodes the container; the result holds key material: caller zeroes it. */
function dearmor(text: Buffer): Buffer {
  if (text.length > MAX_KEY_TEXT_BYTES) throw new KeyParseError('the private key text is too large to be an ed25519 key');
  const begin = text.indexOf(BEGIN, 0, 'latin1');
  if (begin < 0) {
    if (text.includes('-----BEGIN', 0, 'latin1')) {
      throw new KeyParseError(
        'only OpenSSH-format keys are accepted (-----BEGIN OPENSSH PRIVATE KEY-----); convert with `ssh-keygen -p -f KEY` or generate with `ssh-keygen -t ed25519`',
      );
    }
    throw new KeyParseError('the private key must be an OpenSSH private key (-----BEGIN OPENSSH PRIVATE KEY-----)');
  }
  const bodyStart = begin + BEGIN.length;
  const end = text.indexOf(END, bodyStart, 'latin1');
  if (end < 0) throw new KeyParseError('the private key has no -----END OPENSSH PRIVATE KEY----- line');
  return decodeBase64Bytes(text.subarray(bodyStart, end));
}

/** The SSH wire public key blob: string "ssh-ed25519" ‖ string pub. */
export function ed25519KeyBlob(publicKey: Buffer): Buffer {
  return Buffer.concat([sshString('ssh-ed25519'), sshString(publicKey)]);
}

/** `SHA256:<unpadded base64>`, exactly as `ssh-keygen -lf` prints it. */
export function sshFingerprint(keyBlob: Buffer): string {
  return 'SHA256:' + createHash('sha256').update(keyBlob).digest('base64').replace(/=+$/, '');
}

/** PKCS#8 DER prefix for an Ed25519 private key (RFC 8410): SEQ{ INT 0, SEQ{OID 1.3.101.112}, OCTET{OCTET[32]} }. */
const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/**
 * A node:crypto KeyObject from a 32-byte seed. The DER we build is zeroed at once; OpenSSL keeps its
 * own copy inside the KeyObject until garbage collection (node offers no way to wipe it).
 */
export function ed25519PrivateKeyObject(seed: Buffer): KeyObject {
  const der = Buffer.alloc(PKCS8_ED25519_PREFIX.length + 32);
  PKCS8_ED25519_PREFIX.copy(der, 0);
  seed.copy(der, PKCS8_ED25519_PREFIX.length);
  try {
    return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
  } finally {
    der.fill(0);
  }
}

/** The raw 32-byte public key that a private KeyObject really corresponds to. */
export function ed25519PublicFromPrivate(key: KeyObject): Buffer {
  const spki = createPublicKey(key).export({ format: 'der', type: 'spki' });
  return Buffer.from(spki.subarray(spki.length - 32));
}

function decryptSection(
  cipherName: string, kdfName: string, kdfOptions: Buffer, sealed: Buffer, tag: Buffer | undefined,
  passphrase: Buffer | undefined,
): Buffer {
  const info = CIPHERS[cipherName];
  if (!info) throw new KeyParseError(`unsupported key encryption cipher "${cipherName.slice(0, 40)}"; re-encrypt with \`ssh-keygen -p -Z aes256-ctr\``);
  if (kdfName !== 'bcrypt') throw new KeyParseError(`unsupported key derivation "${kdfName.slice(0, 40)}"`);
  if (!passphrase || passphrase.length === 0) throw new KeyParseError('the private key is passphrase-protected but no passphrase was given');
  if (sealed.length % info.blockLen !== 0) throw new KeyParseError('the encrypted private key section has a bad length');
  const opts = new WireReader(kdfOptions);
  const salt = opts.string();
  const rounds = opts.uint32();
  if (rounds < 1 || rounds > MAX_KDF_ROUNDS) throw new KeyParseError(`the key's bcrypt rounds (${rounds}) are outside 1..${MAX_KDF_ROUNDS}`);
  const derived = Buffer.alloc(info.keyLen + info.ivLen);
  try {
    if (loadBcryptPbkdf()(passphrase, passphrase.length, salt, salt.length, derived, derived.length, rounds) !== 0) {
      throw new KeyParseError('the key derivation failed');
    }
    const key = derived.subarray(0, info.keyLen);
    const iv = derived.subarray(info.keyLen);
    const decipher = createDecipheriv(info.node, key, iv) as ReturnType<typeof createDecipheriv> & {
      setAuthTag?: (t: Buffer) => void;
    };
    decipher.setAutoPadding(false);
    if (info.tagLen > 0) decipher.setAuthTag!(tag!);
    const head = decipher.update(sealed);
    let tail: Buffer;
    try {
      tail = decipher.final();
    } catch {
      head.fill(0);
      // GCM authenticates: a failure here means the passphrase (or the file) is wrong.
      throw new KeyParseError('wrong passphrase for the private key');
    }
    const plain = Buffer.concat([head, tail]);
    head.fill(0);
    tail.fill(0);
    return plain;
  } finally {
    derived.fill(0);
  }
}

/**
 * Parses and fully checks an OpenSSH ed25519 private key. Throws KeyParseError (message safe to
 * show) for anything that is not exactly one well-formed ed25519 key whose private half matches its
 * public half. The returned `seed` is a fresh Buffer the caller must zero.
 */
export function parseOpenSshEd25519(text: Buffer, passphrase?: Buffer): ParsedEd25519Key {
  const container = dearmor(text);
  let section: Buffer | undefined;
  try {
    if (container.length < MAGIC.length || !container.subarray(0, MAGIC.length).equals(MAGIC)) {
      throw new KeyParseError('the private key is not an openssh-key-v1 container');
    }
    const r = new WireReader(container.subarray(MAGIC.length));
    const cipherName = r.string().toString('latin1');
    const kdfName = r.string().toString('latin1');
    const kdfOptions = r.string();
    const nkeys = r.uint32();
    if (nkeys !== 1) throw new KeyParseError('the key file must hold exactly one key');
    const outerPublic = r.string();
    const sealed = r.string();
    const encrypted = cipherName !== 'none';
    if (encrypted) {
      const tagLen = CIPHERS[cipherName]?.tagLen ?? 0;
      const tag = tagLen > 0 ? r.bytes(tagLen) : undefined;
      section = decryptSection(cipherName, kdfName, kdfOptions, sealed, tag, passphrase);
    } else {
      if (kdfName !== 'none') throw new KeyParseError('the private key names a KDF but no cipher');
      section = Buffer.from(sealed);
    }

    const s = new WireReader(section);
    const check1 = s.uint32();
    const check2 = s.uint32();
    // The two check words are equal in every correctly decrypted key: a mismatch is the wrong passphrase.
    if (check1 !== check2) throw new KeyParseError(encrypted ? 'wrong passphrase for the private key' : 'the private key is corrupt');
    const type = s.string().toString('latin1');
    if (type !== 'ssh-ed25519') {
      throw new KeyParseError(`only ed25519 keys are supported (this key is "${type.slice(0, 40)}"); generate one with \`ssh-keygen -t ed25519\``);
    }
    const pub = s.string();
    const priv = s.string();
    if (pub.length !== 32 || priv.length !== 64) throw new KeyParseError('the ed25519 key has the wrong length');
    if (!priv.subarray(32).equals(pub)) throw new KeyParseError('the private key is corrupt (its halves do not match)');
    const comment = s.string().toString('utf8');
    // Padding is 1, 2, 3, … up to the cipher block size; anything else means a damaged file.
    const pad = s.rest();
    for (let i = 0; i < pad.length; i++) if (pad[i] !== i + 1) throw new KeyParseError('the private key is corrupt (bad padding)');

    const blob = ed25519KeyBlob(pub);
    if (!outerPublic.equals(blob)) throw new KeyParseError('the private key is corrupt (public key mismatch)');

    const seed = Buffer.from(priv.subarray(0, 32));
    // Prove the seed really generates the stated public key, so a tampered file cannot make us
    // advertise one key and sign with another.
    const derivedPub = ed25519PublicFromPrivate(ed25519PrivateKeyObject(seed));
    if (!derivedPub.equals(pub)) {
      seed.fill(0);
      throw new KeyParseError('the private key is corrupt (seed does not match its public key)');
    }
    return { seed, publicKey: Buffer.from(pub), comment, encrypted };
  } catch (err) {
    if (err instanceof WireError) throw new KeyParseError('the private key is malformed (truncated or damaged)');
    throw err;
  } finally {
    container.fill(0);
    section?.fill(0);
  }
}
