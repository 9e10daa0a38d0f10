/**
 * Password hashing with scrypt (node:crypto), OWASP parameters by default: N=2^17, r=8, p=1, 32-byte
 * salt, 64-byte key. The encoded form keeps the parameters so the cost can be raised later:
 *   scrypt$<N>$<r>$<p>$<salt b64>$<hash b64>
 */
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';

function scrypt(password: string, salt: Buffer, keylen: number, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => scryptCb(password, salt, keylen, opts, (err, key) => (err ? reject(err) : resolve(key))));
}

const R = 8;
const P = 1;
const KEYLEN = 64;

export async function hashPassword(password: string, cost: number): Promise<string> {
  const salt = randomBytes(32);
  const key = await scrypt(password, salt, KEYLEN, { N: cost, r: R, p: P, maxmem: 256 * cost * R + 1024 * 1024 });
  return `scrypt$${cost}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`;
}

/** Constant-time check; false for a malformed hash rather than a throw. */
export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  const parts = encoded.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  const salt = Buffer.from(parts[4]!, 'base64');
  const expected = Buffer.from(parts[5]!, 'base64');
  const key = await scrypt(password, salt, expected.length, { N, r, p, maxmem: 256 * N * r + 1024 * 1024 });
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** A hash of a random password with the same cost, for equal timing when the account is unknown. */
let dummy: Promise<string> | null = null;
export function dummyHash(cost: number): Promise<string> {
  dummy ??= hashPassword(randomBytes(16).toString('hex'), cost);
  return dummy;
}
