/**
 * RFC 8291 message encryption with the RFC 8188 `aes128gcm` content coding, single record.
 *
 * Body layout (what goes on the wire, and what `encrypt` returns):
 *
 *   salt (16) | rs (4, big-endian, 4096) | idlen (1, = 65) | keyid = sender's ephemeral public key (65) | record
 *   record = AES-128-GCM(CEK, NONCE, plaintext | 0x02 | padding zeros) including the 16-byte tag
 *
 * Size limits, precisely. A push service only has to accept a request body of 4096 bytes (RFC 8030 section
 * 7.2), and that is the whole encrypted body, header included. Header 86 + padding delimiter 1 + tag 16 = 103
 * bytes of overhead, so at most 3993 bytes of plaintext (RFC 8291 section 4), and a 3993-byte payload yields
 * exactly a 4096-byte body. The record-size field `rs` = 4096 is a separate, looser bound (the record alone
 * must not exceed rs; our record is at most 4096 - 86 = 4010 bytes), so the body limit is the binding one.
 */
import { createCipheriv, createECDH, createHmac, createSecretKey, ECDH, randomFillSync } from 'node:crypto';

import { fromBase64Url } from './base64url.js';
import { InvalidSubscriptionError, PayloadTooLargeError } from './errors.js';

/** The `rs` header field: the record size (RFC 8188). */
export const RECORD_SIZE = 4096;
/** salt 16 + rs 4 + idlen 1 + keyid 65. */
export const HEADER_BYTES = 86;
/** AEAD_AES_128_GCM authentication tag. */
export const TAG_BYTES = 16;
/** The largest request body every push service must accept (RFC 8030 section 7.2). */
export const MAX_BODY_BYTES = 4096;
/** The largest plaintext that fits: 4096 - 86 - 1 (delimiter) - 16 (tag) = 3993 (RFC 8291 section 4). */
export const MAX_PAYLOAD_BYTES = MAX_BODY_BYTES - HEADER_BYTES - 1 - TAG_BYTES;

export interface PushSubscriptionKeys {
  /** The user agent's P-256 public key: 65-byte uncompressed point, base64url (or the raw bytes). */
  p256dh: string | Buffer;
  /** The 16-byte authentication secret, base64url (or the raw bytes). */
  auth: string | Buffer;
}

export interface EncryptOptions {
  /** Zero bytes appended after the delimiter to hide the payload's length; counts against the limit. */
  padding?: number;
}

/** The encrypted body's length for a payload of `payloadBytes` (plus optional padding). */
export function encryptedSize(payloadBytes: number, padding = 0): number {
  return HEADER_BYTES + payloadBytes + 1 + padding + TAG_BYTES;
}

/**
 * Whether a payload fits a push message. Use it to answer 400/413 before queuing.
 * Strings are measured in UTF-8 bytes.
 */
export function payloadFits(payload: Buffer | Uint8Array | string | number, padding = 0): boolean {
  const size =
    typeof payload === 'number'
      ? payload
      : typeof payload === 'string'
        ? Buffer.byteLength(payload, 'utf8')
        : payload.byteLength;
  return Number.isInteger(size) && size >= 0 && Number.isInteger(padding) && padding >= 0 && size + padding <= MAX_PAYLOAD_BYTES;
}

function decodeKeys(subscription: PushSubscriptionKeys): { uaPublic: Buffer; auth: Buffer } {
  if (subscription === null || typeof subscription !== 'object') {
    throw new InvalidSubscriptionError('p256dh', 'subscription keys must be an object {p256dh, auth}');
  }
  const { p256dh, auth } = subscription;
  if (typeof p256dh !== 'string' && !Buffer.isBuffer(p256dh)) {
    throw new InvalidSubscriptionError('p256dh', 'p256dh must be a base64url string');
  }
  if (typeof auth !== 'string' && !Buffer.isBuffer(auth)) {
    throw new InvalidSubscriptionError('auth', 'auth must be a base64url string');
  }
  const uaPublic = fromBase64Url(p256dh);
  if (uaPublic.length !== 65 || uaPublic[0] !== 0x04) {
    throw new InvalidSubscriptionError(
      'p256dh',
      `p256dh must be a 65-byte uncompressed P-256 point starting with 0x04; got ${uaPublic.length} bytes` +
        (uaPublic.length > 0 ? ` starting with 0x${uaPublic[0]!.toString(16).padStart(2, '0')}` : ''),
    );
  }
  const authBytes = fromBase64Url(auth);
  if (authBytes.length !== 16) {
    throw new InvalidSubscriptionError('auth', `auth must be 16 bytes; got ${authBytes.length}`);
  }
  return { uaPublic, auth: authBytes };
}

/**
 * Checks a subscription's keys (lengths, prefix, and that p256dh is on the curve) without encrypting,
 * e.g. when a browser registers. Throws InvalidSubscriptionError.
 */
export function validateSubscriptionKeys(subscription: PushSubscriptionKeys): void {
  const { uaPublic } = decodeKeys(subscription);
  try {
    ECDH.convertKey(uaPublic, 'prime256v1', undefined, undefined, 'compressed');
  } catch (err) {
    throw notOnCurve(err);
  }
}

function notOnCurve(cause: unknown): InvalidSubscriptionError {
  const e = new InvalidSubscriptionError('p256dh', 'p256dh is not a valid point on the P-256 curve');
  (e as { cause?: unknown }).cause = cause;
  return e;
}

// --- hot-path state, all module-private and used synchronously ------------------------------------------

/** "WebPush: info" 0x00 | ua_public (65) | as_public (65) | 0x01 — the one-block HKDF-Expand input. */
const KEY_INFO = Buffer.alloc(14 + 65 + 65 + 1);
KEY_INFO.write('WebPush: info\0', 0, 'latin1');
KEY_INFO[144] = 0x01;
/** "Content-Encoding: aes128gcm" 0x00 | 0x01. */
const CEK_INFO = Buffer.from('Content-Encoding: aes128gcm\0\x01', 'latin1');
/** "Content-Encoding: nonce" 0x00 | 0x01. */
const NONCE_INFO = Buffer.from('Content-Encoding: nonce\0\x01', 'latin1');
/** The padding delimiter of the last record followed by as many zeros as any padding can need. */
const DELIMITER_AND_ZEROS = Buffer.alloc(1 + MAX_PAYLOAD_BYTES);
DELIMITER_AND_ZEROS[0] = 0x02;

/**
 * HMAC-SHA-256 keyed through a KeyObject: since Node 24 a raw Buffer key passes brand checks that
 * cost about 15 µs each (Buffer 17.5 µs, KeyObject 1.8 + 4.5 µs per HMAC), six times per message.
 */
const hmac = (key: Buffer, data: Buffer): Buffer => createHmac('sha256', createSecretKey(key)).update(data).digest();

/** Salts and ephemeral scalars come from a pooled CSPRNG buffer (one randomFill per 256 messages); each slice is used once. */
const RANDOM_POOL = Buffer.alloc(48 * 256);
let randomOffset = RANDOM_POOL.length;

function takeRandom(bytes: number): Buffer {
  if (randomOffset + bytes > RANDOM_POOL.length) {
    randomFillSync(RANDOM_POOL);
    randomOffset = 0;
  }
  randomOffset += bytes;
  return RANDOM_POOL.subarray(randomOffset - bytes, randomOffset);
}

/**
 * One ECDH object, re-keyed per message; all use is synchronous, so there is no sharing across
 * messages. The fresh private key is a CSPRNG scalar set with `setPrivateKey`, which refuses 0 and
 * values not below the curve's order (then another is drawn: a chance of about 2^-32). Node 24's
 * `generateKeys()` costs 52 µs where this costs 19 µs, with the same OpenSSL.
 */
const EPHEMERAL = createECDH('prime256v1');

function freshSenderKey(): Buffer {
  for (;;) {
    const scalar = takeRandom(32);
    try {
      EPHEMERAL.setPrivateKey(scalar);
      return EPHEMERAL.getPublicKey();
    } catch {
      // Not a valid scalar for P-256: draw again.
    } finally {
      scalar.fill(0);
    }
  }
}

/** Encrypts `payload` for one subscription. A fresh ephemeral key pair and a fresh random salt per call. */
export function encrypt(payload: Buffer | Uint8Array, subscription: PushSubscriptionKeys, options?: EncryptOptions): Buffer {
  const senderPublic = freshSenderKey();
  const salt = takeRandom(16);
  try {
    return encryptWith(payload, subscription, options?.padding ?? 0, salt, EPHEMERAL, senderPublic);
  } finally {
    salt.fill(0); // a salt is never handed out twice, even if this call threw
  }
}

/**
 * Internal and for test vectors only (not exported from the package): encrypts with a caller-chosen salt
 * and sender key pair. Reusing a salt/key pair across messages breaks the scheme.
 */
export function encryptWith(
  payload: Buffer | Uint8Array,
  subscription: PushSubscriptionKeys,
  padding: number,
  salt: Buffer,
  sender: ECDH,
  senderPublic: Buffer = sender.getPublicKey(),
): Buffer {
  if (!(payload instanceof Uint8Array)) throw new TypeError('payload must be a Buffer');
  if (!Number.isInteger(padding) || padding < 0) throw new RangeError('padding must be a non-negative integer');
  if (payload.byteLength + padding > MAX_PAYLOAD_BYTES) {
    throw new PayloadTooLargeError(payload.byteLength + padding, MAX_PAYLOAD_BYTES);
  }
  const { uaPublic, auth } = decodeKeys(subscription);

  let ecdhSecret: Buffer;
  try {
    ecdhSecret = sender.computeSecret(uaPublic);
  } catch (err) {
    throw notOnCurve(err);
  }
  const body = Buffer.allocUnsafe(encryptedSize(payload.byteLength, padding));
  if (salt.length !== 16) throw new TypeError('salt must be 16 bytes');
  salt.copy(body, 0, 0, 16);
  body.writeUInt32BE(RECORD_SIZE, 16);
  body[20] = 65;
  const asPublic = senderPublic;
  if (asPublic.length !== 65) throw new TypeError('sender public key must be a 65-byte uncompressed point');
  asPublic.copy(body, 21);

  // RFC 8291 section 3.4: PRK_key = HMAC(auth, ecdh); IKM = HMAC(PRK_key, key_info | 0x01)
  uaPublic.copy(KEY_INFO, 14);
  asPublic.copy(KEY_INFO, 79);
  const prkKey = hmac(auth, ecdhSecret);
  const ikm = hmac(prkKey, KEY_INFO);
  // RFC 8188 section 2.2/2.3: PRK = HMAC(salt, IKM); CEK and NONCE are one-block expansions of PRK.
  const prk = hmac(body.subarray(0, 16), ikm);
  const cek = hmac(prk, CEK_INFO).subarray(0, 16);
  const nonce = hmac(prk, NONCE_INFO).subarray(0, 12); // sequence number 0

  const cipher = createCipheriv('aes-128-gcm', createSecretKey(cek), nonce);
  let offset = HEADER_BYTES;
  offset += cipher.update(payload).copy(body, offset);
  offset += cipher.update(DELIMITER_AND_ZEROS.subarray(0, 1 + padding)).copy(body, offset);
  cipher.final();
  cipher.getAuthTag().copy(body, offset);
  return body;
}
