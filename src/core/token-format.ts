/**
 * Token strings (DESIGN.md §6): custos_<type>_<40 base62 chars of randomness><6-char checksum>.
 * 40 base62 chars carry ~238 bits. The checksum is CRC32 of the part before it, base62-encoded and
 * zero-padded to 6, so secret scanners can recognise a real token offline without calling us.
 * Stored as HMAC-SHA-256(pepper, token) only; compared by hash lookup (no plaintext to compare).
 */
import { createHmac, randomInt } from 'node:crypto';
import { crc32 } from 'node:zlib';

export const TOKEN_TYPES = ['agent', 'ssh', 'ci'] as const;
export type TokenType = (typeof TOKEN_TYPES)[number];

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_LEN = 40;
const CHECK_LEN = 6;

function base62(n: number, width: number): string {
  let s = '';
  let v = n >>> 0;
  while (v > 0) {
    s = ALPHABET[v % 62]! + s;
    v = Math.floor(v / 62);
  }
  return s.padStart(width, '0');
}

export function mintToken(type: TokenType): string {
  let random = '';
  for (let i = 0; i < RANDOM_LEN; i++) random += ALPHABET[randomInt(62)];
  const body = `custos_${type}_${random}`;
  return body + base62(crc32(body), CHECK_LEN);
}

const SHAPE = /^custos_(agent|ssh|ci)_([0-9A-Za-z]{40})([0-9A-Za-z]{6})$/;

/** Parses and checks the shape and checksum; returns the type or null. Cheap: no database call. */
export function parseToken(token: string): TokenType | null {
  const m = SHAPE.exec(token);
  if (!m) return null;
  const body = token.slice(0, token.length - CHECK_LEN);
  return base62(crc32(body), CHECK_LEN) === m[3] ? (m[1] as TokenType) : null;
}

export function hashToken(token: string, pepper: Buffer): string {
  return createHmac('sha256', pepper).update(token).digest('hex');
}

/** What lists show: enough to recognise a token, far too little to use it. */
export function displayPrefix(token: string): string {
  const type = token.split('_')[1]!;
  return token.slice(0, `custos_${type}_`.length + 6);
}
