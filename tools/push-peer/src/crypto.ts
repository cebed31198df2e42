/**
 * The receiving side of Web Push cryptography, written from the RFC text (not shared with any sender):
 *
 * - RFC 8188 `aes128gcm` content coding, restricted by RFC 8291 section 4 to a single record whose
 *   `keyid` is the sender's 65-octet uncompressed P-256 public key;
 * - RFC 8291 section 3.4 key derivation, spelled out as the HMAC-SHA-256 steps the RFC lists;
 * - RFC 8292 `vapid` authentication: an ES256 JWS (RFC 7515, raw r||s signature per RFC 7518
 *   section 3.4) verified with the `k` public key, and its `aud`, `exp` and `sub` claims.
 */
import { createDecipheriv, createECDH, createHmac, createPublicKey, createSecretKey, verify, type ECDH, type KeyObject } from 'node:crypto';

const BASE64URL = /^[A-Za-z0-9_-]*$/;

/** Encodes bytes as unpadded base64url (RFC 4648 section 5, as RFC 7515 uses it). */
export function base64url(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64url');
}

/**
 * Decodes strict, canonical, unpadded base64url; `undefined` for anything else (padding, `+`/`/`,
 * whitespace, a dangling sixth bit group, non-zero trailing bits).
 */
export function decodeBase64url(text: string): Buffer | undefined {
  if (!BASE64URL.test(text) || text.length % 4 === 1) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : undefined;
}

/** Accepts base64url text or raw bytes, for options that take keys either way. */
export function bytesOf(value: string | Uint8Array, what: string, length: number): Buffer {
  const bytes = typeof value === 'string' ? decodeBase64url(value) : Buffer.from(value);
  if (bytes === undefined) throw new TypeError(`${what} is not canonical unpadded base64url`);
  if (bytes.length !== length) throw new TypeError(`${what} must be ${length} octets, got ${bytes.length}`);
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// RFC 8291 + RFC 8188: decrypting a push message

/** A P-256 private scalar as exactly 32 octets (ECDH.getPrivateKey drops leading zero octets). */
export function privateScalar(ecdh: ECDH): Buffer {
  const raw = ecdh.getPrivateKey();
  return raw.length >= 32 ? raw : Buffer.concat([Buffer.alloc(32 - raw.length), raw]);
}

/** What the user agent keeps for one subscription. */
export interface ReceiverKeys {
  /** An ECDH object holding the subscription's private key (reused; `computeSecret` is stateless). */
  readonly ecdh: ECDH;
  /** ua_public: the 65-octet uncompressed point published as `p256dh`. */
  readonly publicKey: Buffer;
  /** The 16-octet authentication secret published as `auth`. */
  readonly authSecret: Buffer;
}

/** Builds receiver keys from a 32-octet private scalar (the public key is derived from it). */
export function receiverKeys(privateKey: Uint8Array, authSecret: Uint8Array): ReceiverKeys {
  const ecdh = createECDH('prime256v1');
  ecdh.setPrivateKey(Buffer.from(privateKey));
  return { ecdh, publicKey: ecdh.getPublicKey(), authSecret: Buffer.from(authSecret) };
}

/** Why a body failed; `code` is stable (tests assert it), `message` explains. */
export class PushPeerError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'PushPeerError';
  }
}

/** RFC 8188 section 2.1 header: salt(16) || rs(4) || idlen(1) || keyid(idlen). */
export interface Aes128gcmHeader {
  readonly salt: Buffer;
  readonly rs: number;
  /** The sender's (application server's) ephemeral ECDH public key, as_public. */
  readonly senderPublicKey: Buffer;
  /** The single record: ciphertext followed by the 16-octet tag. */
  readonly record: Buffer;
}

const HEADER_LENGTH = 16 + 4 + 1 + 65;
const TAG_LENGTH = 16;

function bodyError(code: string, message: string): PushPeerError {
  return new PushPeerError(400, code, message);
}

/**
 * Parses and checks the `aes128gcm` header and the single-record shape without any cryptography,
 * so count mode can afford it for every message.
 */
export function parseAes128gcm(body: Buffer): Aes128gcmHeader {
  if (body.length < 21) throw bodyError('truncated_header', `body of ${body.length} octets is shorter than the 21-octet aes128gcm header`);
  const idlen = body[20]!;
  if (idlen !== 65) {
    throw bodyError('bad_keyid', `keyid must be the 65-octet uncompressed sender public key (RFC 8291 section 4), idlen is ${idlen}`);
  }
  if (body.length < HEADER_LENGTH) throw bodyError('truncated_header', `body of ${body.length} octets ends inside the 86-octet header`);
  const senderPublicKey = body.subarray(21, HEADER_LENGTH);
  if (senderPublicKey[0] !== 0x04) throw bodyError('bad_keyid', 'keyid is not an uncompressed point (first octet is not 0x04)');
  const rs = body.readUInt32BE(16);
  const record = body.subarray(HEADER_LENGTH);
  if (record.length < TAG_LENGTH + 1) {
    throw bodyError('truncated_record', `record of ${record.length} octets cannot hold a padding delimiter and a 16-octet tag`);
  }
  if (rs < 18) throw bodyError('bad_record_size', `rs ${rs} is below the RFC 8188 minimum of 18`);
  // RFC 8291 section 4: one record, and rs MUST be greater than plaintext + delimiter + padding + tag.
  if (record.length >= rs) {
    throw bodyError('not_single_record', `record of ${record.length} octets is not smaller than rs ${rs}: a push message is exactly one record and rs must exceed its length`);
  }
  return { salt: body.subarray(0, 16), rs, senderPublicKey, record };
}

/** Keyed through a KeyObject: Node 24 brand-checks a raw key on every call, several times the HMAC's own cost. */
const hmac = (key: Uint8Array, data: Uint8Array): Buffer => createHmac('sha256', createSecretKey(key)).update(data).digest();
const WEBPUSH_INFO = Buffer.from('WebPush: info\0', 'latin1');
const CEK_INFO = Buffer.from('Content-Encoding: aes128gcm\0\x01', 'latin1');
const NONCE_INFO = Buffer.from('Content-Encoding: nonce\0\x01', 'latin1');
const ONE = Buffer.from([0x01]);

/** The RFC 8291 section 3.4 derivation, step by step; exported for tests against Appendix A. */
export function deriveKeys(
  ecdhSecret: Uint8Array,
  authSecret: Uint8Array,
  uaPublic: Uint8Array,
  asPublic: Uint8Array,
  salt: Uint8Array,
): { prkKey: Buffer; ikm: Buffer; prk: Buffer; cek: Buffer; nonce: Buffer } {
  // HKDF-Extract(salt=auth_secret, IKM=ecdh_secret)
  const prkKey = hmac(authSecret, ecdhSecret);
  // HKDF-Expand(PRK_key, key_info, L_key=32): key_info = "WebPush: info" || 0x00 || ua_public || as_public
  const ikm = hmac(prkKey, Buffer.concat([WEBPUSH_INFO, uaPublic, asPublic, ONE]));
  // HKDF-Extract(salt, IKM)
  const prk = hmac(salt, ikm);
  // HKDF-Expand(PRK, cek_info, L_cek=16) and HKDF-Expand(PRK, nonce_info, L_nonce=12)
  const cek = hmac(prk, CEK_INFO).subarray(0, 16);
  const nonce = hmac(prk, NONCE_INFO).subarray(0, 12);
  return { prkKey, ikm, prk, cek, nonce };
}

export interface Decrypted {
  readonly plaintext: Buffer;
  readonly rs: number;
  /** Octets of 0x00 padding after the 0x02 delimiter. */
  readonly paddingLength: number;
  readonly senderPublicKey: Buffer;
}

/** Decrypts one push message body (RFC 8291 section 3.4 + RFC 8188), or throws a 400 PushPeerError. */
export function decryptPushMessage(body: Buffer, keys: ReceiverKeys, parsed: Aes128gcmHeader = parseAes128gcm(body)): Decrypted {
  let ecdhSecret: Buffer;
  try {
    ecdhSecret = keys.ecdh.computeSecret(parsed.senderPublicKey);
  } catch {
    throw bodyError('bad_sender_key', 'keyid is not a point on P-256');
  }
  const { cek, nonce } = deriveKeys(ecdhSecret, keys.authSecret, keys.publicKey, parsed.senderPublicKey, parsed.salt);
  // Record sequence number 0: the nonce is used as derived.
  const { record } = parsed;
  let padded: Buffer;
  try {
    const decipher = createDecipheriv('aes-128-gcm', createSecretKey(cek), nonce);
    decipher.setAuthTag(record.subarray(record.length - TAG_LENGTH));
    padded = Buffer.concat([decipher.update(record.subarray(0, record.length - TAG_LENGTH)), decipher.final()]);
  } catch {
    throw bodyError('decryption_failed', 'AEAD_AES_128_GCM authentication failed (wrong keys, auth secret, salt, or corrupted body)');
  }
  // RFC 8188 section 2: data || delimiter || 0x00*; the last (here: only) record uses delimiter 0x02.
  let end = padded.length - 1;
  while (end >= 0 && padded[end] === 0) end--;
  if (end < 0) throw bodyError('bad_padding', 'record has no padding delimiter');
  if (padded[end] !== 0x02) {
    throw bodyError(
      'bad_padding',
      padded[end] === 0x01
        ? 'padding delimiter 0x01 marks a non-final record, but a push message is a single record (expected 0x02)'
        : `padding delimiter is 0x${padded[end]!.toString(16).padStart(2, '0')}, expected 0x02`,
    );
  }
  return { plaintext: padded.subarray(0, end), rs: parsed.rs, paddingLength: padded.length - 1 - end, senderPublicKey: parsed.senderPublicKey };
}

// ---------------------------------------------------------------------------------------------
// RFC 8292: vapid authentication

export interface VapidCredentials {
  /** The JWT (`t`). */
  readonly token: string;
  /** The base64url public key (`k`). */
  readonly k: string;
}

export interface VapidClaims {
  readonly aud: string;
  readonly exp: number;
  readonly sub: string;
  /** `k`, base64url of the 65-octet uncompressed P-256 key that verified the signature. */
  readonly publicKey: string;
}

const unauthorized = (code: string, message: string) => new PushPeerError(401, code, message);
const forbidden = (code: string, message: string) => new PushPeerError(403, code, message);

/**
 * Parses `Authorization: vapid t=<JWT>, k=<key>` (RFC 8292 section 3, RFC 7235 auth-params).
 * No `vapid` scheme at all is "authentication absent" (401); a `vapid` header lacking `t` or `k`, or
 * repeating one, is invalid (403).
 */
export function parseVapidAuthorization(header: string | undefined): VapidCredentials {
  if (header === undefined || header.trim() === '') throw unauthorized('missing_authorization', 'no Authorization header (RFC 8292 vapid required)');
  const match = /^\s*([A-Za-z0-9!#$%&'*+.^_`|~-]+)(?:\s+(.*))?$/s.exec(header);
  if (!match || match[1]!.toLowerCase() !== 'vapid') {
    throw unauthorized('not_vapid', `Authorization scheme is not "vapid" (got "${(match?.[1] ?? header).slice(0, 20)}")`);
  }
  const params = new Map<string, string>();
  for (const part of (match[2] ?? '').split(',')) {
    if (part.trim() === '') continue;
    const eq = /^\s*([A-Za-z0-9!#$%&'*+.^_`|~-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s"]*))\s*$/s.exec(part);
    if (!eq) throw forbidden('bad_authorization', `malformed vapid auth-param "${part.trim().slice(0, 40)}"`);
    const name = eq[1]!.toLowerCase();
    if (params.has(name)) throw forbidden('bad_authorization', `vapid parameter "${name}" appears twice`);
    params.set(name, eq[2] !== undefined ? eq[2].replace(/\\(.)/gs, '$1') : eq[3]!);
  }
  const token = params.get('t');
  const k = params.get('k');
  if (!token) throw forbidden('missing_token', 'vapid authentication has no "t" (JWT) parameter');
  if (!k) throw forbidden('missing_key', 'vapid authentication has no "k" (public key) parameter');
  return { token, k };
}

const publicKeys = new Map<string, KeyObject>();

/** The P-256 key for a base64url `k`, checked to be a 65-octet uncompressed point on the curve. */
export function vapidPublicKey(k: string): KeyObject {
  const cached = publicKeys.get(k);
  if (cached) return cached;
  const raw = decodeBase64url(k);
  if (!raw) throw forbidden('bad_key', '"k" is not canonical unpadded base64url');
  if (raw.length !== 65 || raw[0] !== 0x04) throw forbidden('bad_key', `"k" must be a 65-octet uncompressed P-256 point, got ${raw.length} octets`);
  let key: KeyObject;
  try {
    key = createPublicKey({
      key: { kty: 'EC', crv: 'P-256', x: base64url(raw.subarray(1, 33)), y: base64url(raw.subarray(33)) },
      format: 'jwk',
    });
  } catch {
    throw forbidden('bad_key', '"k" is not a point on P-256');
  }
  if (publicKeys.size >= 10_000) publicKeys.clear();
  publicKeys.set(k, key);
  return key;
}

function jsonSegment(segment: string, what: string): Record<string, unknown> {
  const raw = decodeBase64url(segment);
  if (!raw || raw.length === 0) throw forbidden('bad_jwt', `JWT ${what} is not canonical unpadded base64url`);
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch {
    throw forbidden('bad_jwt', `JWT ${what} is not JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw forbidden('bad_jwt', `JWT ${what} is not a JSON object`);
  return value as Record<string, unknown>;
}

const MAX_EXP_AHEAD_SECONDS = 24 * 60 * 60;

/**
 * Verifies the JWT against `k` and the claims against `audience` (the push resource's origin,
 * compared exactly) at `nowMs`. Throws a 403 PushPeerError naming the first problem.
 */
export function verifyVapid(credentials: VapidCredentials, audience: string, nowMs: number): VapidClaims {
  const key = vapidPublicKey(credentials.k);
  const parts = credentials.token.split('.');
  if (parts.length !== 3) throw forbidden('bad_jwt', `JWT must have 3 dot-separated parts, has ${parts.length}`);
  const [headerPart, payloadPart, signaturePart] = parts as [string, string, string];
  const header = jsonSegment(headerPart, 'header');
  if (header['alg'] !== 'ES256') throw forbidden('bad_alg', `JWT alg must be "ES256", got ${JSON.stringify(header['alg'])}`);
  if (header['typ'] !== undefined && header['typ'] !== 'JWT') throw forbidden('bad_typ', `JWT typ must be "JWT", got ${JSON.stringify(header['typ'])}`);
  if (header['crit'] !== undefined) throw forbidden('bad_jwt', 'JWT header has "crit" parameters this service does not understand');
  const signature = decodeBase64url(signaturePart);
  if (!signature || signature.length !== 64) {
    throw forbidden('bad_signature', `ES256 signature must be 64 octets (raw r||s), got ${signature ? signature.length : 'non-base64url'}`);
  }
  const signingInput = Buffer.from(`${headerPart}.${payloadPart}`, 'ascii');
  if (!verify('sha256', signingInput, { key, dsaEncoding: 'ieee-p1363' }, signature)) {
    throw forbidden('bad_signature', 'JWT signature does not verify with "k"');
  }
  const claims = jsonSegment(payloadPart, 'payload');
  const { aud, exp, sub } = claims;
  if (typeof aud !== 'string') throw forbidden('bad_aud', '"aud" claim missing or not a string');
  if (aud !== audience) throw forbidden('bad_aud', `"aud" is ${JSON.stringify(aud)}, expected the push resource origin ${JSON.stringify(audience)}`);
  if (typeof exp !== 'number' || !Number.isFinite(exp)) throw forbidden('bad_exp', '"exp" claim missing or not a number');
  if (exp * 1000 <= nowMs) throw forbidden('expired', `"exp" ${exp} is not in the future (now ${Math.floor(nowMs / 1000)})`);
  if (exp > Math.floor(nowMs / 1000) + MAX_EXP_AHEAD_SECONDS) {
    throw forbidden('exp_too_far', `"exp" ${exp} is more than 24 hours ahead (now ${Math.floor(nowMs / 1000)})`);
  }
  if (typeof sub !== 'string') throw forbidden('bad_sub', '"sub" claim missing or not a string');
  if (!isContactUri(sub)) throw forbidden('bad_sub', `"sub" must be a mailto: or https: URI, got ${JSON.stringify(sub.slice(0, 80))}`);
  return { aud, exp, sub, publicKey: credentials.k };
}

function isContactUri(sub: string): boolean {
  let url: URL;
  try {
    url = new URL(sub);
  } catch {
    return false;
  }
  if (url.protocol === 'mailto:') return url.pathname.length > 0;
  return url.protocol === 'https:' && url.hostname.length > 0;
}
