/**
 * Key pools: a few receiver key pairs shared by many subscriptions, so a million endpoints cost a
 * thousand key generations. Pool endpoint `<origin>/push/<index>` uses entry `index % pool.length`.
 * The pool is plain JSON so a parent process can hand it to the CLI peer (`--key-pool-file`).
 */
import { createECDH, randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';

import { base64url, bytesOf, privateScalar } from './crypto.js';

/** One receiver identity; all fields are unpadded base64url. */
export interface KeyPoolEntry {
  /** The 32-octet P-256 private scalar. */
  readonly privateKey: string;
  /** The 65-octet uncompressed public key (what a browser publishes as `keys.p256dh`). */
  readonly p256dh: string;
  /** The 16-octet authentication secret (`keys.auth`). */
  readonly auth: string;
}

/** What a browser's `PushSubscription.toJSON()` returns. */
export interface PushSubscriptionJSON {
  readonly endpoint: string;
  readonly expirationTime: null;
  readonly keys: { readonly p256dh: string; readonly auth: string };
}

/** A fresh receiver identity: a P-256 key pair and a 16-octet auth secret. */
export function generateKeyPoolEntry(): KeyPoolEntry {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return { privateKey: base64url(privateScalar(ecdh)), p256dh: base64url(ecdh.getPublicKey()), auth: base64url(randomBytes(16)) };
}

export function generateKeyPool(size: number): KeyPoolEntry[] {
  if (!Number.isInteger(size) || size < 1) throw new RangeError(`key pool size must be a positive integer, got ${size}`);
  return Array.from({ length: size }, generateKeyPoolEntry);
}

/** Checks every entry (lengths, and that p256dh really is the private key's public key). */
export function validateKeyPool(pool: unknown): KeyPoolEntry[] {
  const entries = Array.isArray(pool) ? pool : typeof pool === 'object' && pool !== null ? (pool as { keys?: unknown }).keys : undefined;
  if (!Array.isArray(entries) || entries.length === 0) throw new TypeError('key pool must be a non-empty array of {privateKey, p256dh, auth} (or {"keys": [...]})');
  return entries.map((entry: unknown, i) => {
    const e = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<string, unknown>;
    const { privateKey, p256dh, auth } = e;
    if (typeof privateKey !== 'string' || typeof p256dh !== 'string' || typeof auth !== 'string') {
      throw new TypeError(`key pool entry ${i} must have string privateKey, p256dh and auth`);
    }
    bytesOf(auth, `key pool entry ${i} auth`, 16);
    const ecdh = createECDH('prime256v1');
    ecdh.setPrivateKey(bytesOf(privateKey, `key pool entry ${i} privateKey`, 32));
    if (base64url(ecdh.getPublicKey()) !== p256dh) throw new TypeError(`key pool entry ${i}: p256dh is not the public key of privateKey`);
    return { privateKey, p256dh, auth };
  });
}

/** Writes `{"keys": [...]}` (mode 0600: it holds private keys, even if only test ones). */
export async function writeKeyPoolFile(path: string, pool: readonly KeyPoolEntry[]): Promise<void> {
  await writeFile(path, JSON.stringify({ keys: pool }), { mode: 0o600 });
}

export async function readKeyPoolFile(path: string): Promise<KeyPoolEntry[]> {
  return validateKeyPool(JSON.parse(await readFile(path, 'utf8')) as unknown);
}

/**
 * The subscription a pool-backed peer at `origin` serves at `index`: endpoint
 * `${origin}/push/${index}`, keys of `pool[index % pool.length]`. Needs only the public half of the
 * pool, so a parent can derive a million subscriptions locally.
 */
export function subscriptionFromPool(origin: string, pool: readonly Pick<KeyPoolEntry, 'p256dh' | 'auth'>[], index: number): PushSubscriptionJSON {
  if (!Number.isSafeInteger(index) || index < 0) throw new RangeError(`pool index must be a non-negative integer, got ${index}`);
  if (pool.length === 0) throw new RangeError('empty key pool');
  const entry = pool[index % pool.length]!;
  return { endpoint: `${origin}/push/${index}`, expirationTime: null, keys: { p256dh: entry.p256dh, auth: entry.auth } };
}
