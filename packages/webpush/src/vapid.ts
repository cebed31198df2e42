/**
 * RFC 8292 VAPID: `Authorization: vapid t=<JWT>, k=<public key>`.
 *
 * A JWT is signed once per (key pair, subject, push-service origin) and reused until it is close to
 * expiry; signing per message is the main cost of naive senders. The cache is bounded (LRU).
 */
import { createECDH, createPrivateKey, KeyObject, sign } from 'node:crypto';

import { fromBase64Url, toBase64Url } from './base64url.js';

export interface VapidKeys {
  /** The application server's P-256 public key: 65-byte uncompressed point, base64url. */
  publicKey: string;
  /** The matching private key: the 32-byte scalar, base64url. */
  privateKey: string;
  /** `mailto:` or `https:` contact for the push service operator (the JWT's `sub`). */
  subject: string;
}

export interface VapidSignerOptions {
  /** JWT lifetime in seconds; at most 24 h (RFC 8292 section 2). Default 12 h. */
  expiresInSeconds?: number;
  /** Re-sign when less than this remains. Default 1 h. */
  renewBeforeSeconds?: number;
  /** Most (key, origin) tokens kept; least recently used are dropped. Default 10,000. */
  maxEntries?: number;
  /** Clock in milliseconds (tests inject one). Default `Date.now`. */
  now?: () => number;
}

const MAX_EXPIRY_SECONDS = 24 * 60 * 60;
/** base64url('{"typ":"JWT","alg":"ES256"}') */
const JWT_HEADER = toBase64Url(Buffer.from(JSON.stringify({ typ: 'JWT', alg: 'ES256' })));

interface Token {
  header: string;
  /** Milliseconds after which the token is re-signed. */
  renewAt: number;
}

export class VapidSigner {
  readonly #expiresIn: number;
  readonly #renewBefore: number;
  readonly #maxEntries: number;
  readonly #now: () => number;
  readonly #tokens = new Map<string, Token>();
  readonly #keys = new Map<string, KeyObject>();

  constructor(options: VapidSignerOptions = {}) {
    const expiresIn = options.expiresInSeconds ?? 12 * 60 * 60;
    const renewBefore = options.renewBeforeSeconds ?? 60 * 60;
    if (!Number.isInteger(expiresIn) || expiresIn <= 0 || expiresIn > MAX_EXPIRY_SECONDS) {
      throw new RangeError(`expiresInSeconds must be an integer in 1..${MAX_EXPIRY_SECONDS}`);
    }
    if (!Number.isInteger(renewBefore) || renewBefore < 0 || renewBefore >= expiresIn) {
      throw new RangeError('renewBeforeSeconds must be an integer in 0..expiresInSeconds-1');
    }
    const maxEntries = options.maxEntries ?? 10_000;
    if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new RangeError('maxEntries must be a positive integer');
    this.#expiresIn = expiresIn;
    this.#renewBefore = renewBefore;
    this.#maxEntries = maxEntries;
    this.#now = options.now ?? Date.now;
  }

  /** Tokens currently cached. */
  get size(): number {
    return this.#tokens.size;
  }

  /**
   * The `Authorization` header value for requests to `origin` (e.g. `https://fcm.googleapis.com`; the
   * push service's origin, not the full endpoint URL: see `originOf`).
   */
  authorization(keys: VapidKeys, origin: string): string {
    const id = `${origin}\n${keys.subject}\n${keys.publicKey}\n${keys.privateKey}`;
    const now = this.#now();
    const cached = this.#tokens.get(id);
    if (cached !== undefined && now < cached.renewAt) {
      // keep LRU order
      this.#tokens.delete(id);
      this.#tokens.set(id, cached);
      return cached.header;
    }
    const token = this.#sign(keys, origin, now);
    this.#tokens.delete(id);
    this.#tokens.set(id, token);
    evict(this.#tokens, this.#maxEntries);
    return token.header;
  }

  #sign(keys: VapidKeys, origin: string, now: number): Token {
    checkOrigin(origin);
    checkSubject(keys.subject);
    const key = this.#keyObject(keys);
    const exp = Math.floor(now / 1000) + this.#expiresIn;
    const claims = toBase64Url(Buffer.from(JSON.stringify({ aud: origin, exp, sub: keys.subject })));
    const input = `${JWT_HEADER}.${claims}`;
    const signature = sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });
    return {
      header: `vapid t=${input}.${toBase64Url(signature)}, k=${keys.publicKey}`,
      renewAt: (exp - this.#renewBefore) * 1000,
    };
  }

  #keyObject(keys: VapidKeys): KeyObject {
    const id = `${keys.publicKey}\n${keys.privateKey}`;
    let key = this.#keys.get(id);
    if (key === undefined) {
      key = vapidPrivateKey(keys.publicKey, keys.privateKey);
      this.#keys.set(id, key);
      evict(this.#keys, this.#maxEntries);
    }
    return key;
  }
}

function evict<K, V>(map: Map<K, V>, max: number): void {
  while (map.size > max) {
    const oldest = map.keys().next();
    if (oldest.done === true) return;
    map.delete(oldest.value);
  }
}

/** Builds the signing KeyObject from the raw keys (via JWK) after checking they belong together. */
export function vapidPrivateKey(publicKey: string, privateKey: string): KeyObject {
  const pub = fromBase64Url(publicKey);
  if (pub.length !== 65 || pub[0] !== 0x04) {
    throw new TypeError(`VAPID public key must be a 65-byte uncompressed P-256 point (base64url); got ${pub.length} bytes`);
  }
  const d = fromBase64Url(privateKey);
  if (d.length !== 32) throw new TypeError(`VAPID private key must be a 32-byte scalar (base64url); got ${d.length} bytes`);
  const ecdh = createECDH('prime256v1');
  try {
    ecdh.setPrivateKey(d);
  } catch (err) {
    throw new TypeError('VAPID private key is not a valid P-256 scalar', { cause: err });
  }
  if (!ecdh.getPublicKey().equals(pub)) throw new TypeError('VAPID private key does not match the public key');
  return createPrivateKey({
    format: 'jwk',
    key: {
      kty: 'EC',
      crv: 'P-256',
      x: toBase64Url(pub.subarray(1, 33)),
      y: toBase64Url(pub.subarray(33, 65)),
      d: toBase64Url(d),
    },
  });
}

function checkOrigin(origin: string): void {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    throw new TypeError(`VAPID audience must be an origin such as "https://fcm.googleapis.com"; got "${origin}"`);
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.origin !== origin) {
    throw new TypeError(
      `VAPID audience must be the push service's origin (scheme://host[:port], no path or trailing slash), ` +
        `e.g. "${url.origin}"; got "${origin}"`,
    );
  }
}

function checkSubject(subject: string): void {
  if (typeof subject !== 'string' || !/^(mailto:.+|https:\/\/.+)$/.test(subject)) {
    throw new TypeError(`VAPID subject must be a mailto: or https: URI; got "${String(subject)}"`);
  }
}

/** The origin of a push endpoint URL: what VAPID's `aud` and the client's connection pool are keyed by. */
export function originOf(endpoint: string): string {
  return new URL(endpoint).origin;
}

/** A new VAPID key pair, base64url: 65-byte public point and 32-byte private scalar. */
export function generateVapidKeys(): { publicKey: string; privateKey: string } {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  const d = ecdh.getPrivateKey();
  const scalar = d.length === 32 ? d : Buffer.concat([Buffer.alloc(32 - d.length), d]); // keep leading zeros
  return { publicKey: toBase64Url(ecdh.getPublicKey()), privateKey: toBase64Url(scalar) };
}
