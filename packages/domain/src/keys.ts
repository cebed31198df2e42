import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * API key format. A full key is `pk_<id>.<secret>` (the older `pk_<id>.sk_<secret>` is accepted
 * too); a site key is the public `pk_<id>` alone. Ids are 16 characters of lowercase base32
 * (80 bits), secrets 43 characters of base64url (256 bits).
 */

const ID_LENGTH = 16;
const idPattern = /^[a-z2-7]{16}$/;
const secretPattern = /^[A-Za-z0-9_-]{43}$/;
const base32Alphabet = 'abcdefghijklmnopqrstuvwxyz234567';

export function randomId(length = ID_LENGTH): string {
  const bytes = randomBytes(length);
  let id = '';
  for (const byte of bytes) id += base32Alphabet[byte & 31];
  return id;
}

export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

export function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/** Constant-time comparison of a presented secret with a stored hash. */
export function secretMatches(secret: string, storedHash: Buffer): boolean {
  const presented = hashSecret(secret);
  return storedHash.length === presented.length && timingSafeEqual(presented, storedHash);
}

/** Whether `value` has the shape of a key id (the `<id>` of `pk_<id>`). */
export function isKeyId(value: string): boolean {
  return idPattern.test(value);
}

export function formatFullKey(id: string, secret: string): string {
  return `pk_${id}.${secret}`;
}

export type ParsedKey =
  | { kind: 'full'; id: string; secret: string }
  | { kind: 'site'; id: string }
  | { kind: 'malformed' };

export function parseKey(token: string): ParsedKey {
  if (!token.startsWith('pk_')) return { kind: 'malformed' };
  const dot = token.indexOf('.');
  if (dot === -1) {
    const id = token.slice(3);
    return idPattern.test(id) ? { kind: 'site', id } : { kind: 'malformed' };
  }
  const id = token.slice(3, dot);
  let secret = token.slice(dot + 1);
  if (secret.startsWith('sk_')) secret = secret.slice(3);
  if (!idPattern.test(id) || !secretPattern.test(secret)) return { kind: 'malformed' };
  return { kind: 'full', id, secret };
}
