// The strict checks of a push request, in the order README.md gives: VAPID (RFC 8292), the
// RFC 8030 headers, the aes128gcm body header (RFC 8291). Each failure is a PushPeerError with
// the status and code a sender sees.
import { base64url, parseAes128gcm, parseVapidAuthorization, PushPeerError, verifyVapid, type Aes128gcmHeader, type VapidClaims } from './crypto.js';
import type { Exchange } from './exchange.js';
import type { PeerMode, Urgency } from './types.js';

const URGENCIES: ReadonlySet<string> = new Set<Urgency>(['very-low', 'low', 'normal', 'high']);
const TOPIC = /^[A-Za-z0-9_-]{1,32}$/;
const TTL = /^[0-9]+$/;

/** The RFC 8030 headers of a push request, checked. */
export interface PushHeaders {
  readonly ttl: number;
  readonly urgency: Urgency | undefined;
  readonly topic: string | undefined;
}

export function checkPushHeaders(ex: Exchange, maxBody: number): PushHeaders {
  const ttlHeader = ex.header('ttl');
  if (ttlHeader === undefined) throw new PushPeerError(400, 'missing_ttl', 'the TTL header is required (RFC 8030 section 5.2)');
  if (!TTL.test(ttlHeader)) throw new PushPeerError(400, 'bad_ttl', `TTL must be a non-negative integer of seconds, got ${JSON.stringify(ttlHeader.slice(0, 40))}`);
  const urgency = ex.header('urgency');
  if (urgency !== undefined && !URGENCIES.has(urgency)) {
    throw new PushPeerError(400, 'bad_urgency', `Urgency must be very-low, low, normal or high (RFC 8030 section 5.3), got ${JSON.stringify(urgency.slice(0, 40))}`);
  }
  const topic = ex.header('topic');
  if (topic !== undefined && !TOPIC.test(topic)) {
    throw new PushPeerError(400, 'bad_topic', `Topic must be 1-32 characters of the base64url alphabet (RFC 8030 section 5.4), got ${JSON.stringify(topic.slice(0, 40))}`);
  }
  const encoding = ex.header('content-encoding');
  if (encoding === undefined || encoding.trim().toLowerCase() !== 'aes128gcm') {
    throw new PushPeerError(
      415,
      'unsupported_content_encoding',
      `Content-Encoding must be aes128gcm (RFC 8291 section 4), got ${encoding === undefined ? 'none' : JSON.stringify(encoding.slice(0, 40))}`,
    );
  }
  const declaredLength = ex.header('content-length');
  if (declaredLength !== undefined && Number(declaredLength) > maxBody) throw new PushPeerError(413, 'payload_too_large', `Content-Length ${declaredLength} exceeds ${maxBody} octets`);
  return { ttl: Number(ttlHeader), urgency: urgency as Urgency | undefined, topic };
}

/** The aes128gcm header of a body, whose ECDH key must not be the VAPID key (RFC 8292 section 3.2). */
export function checkBodyHeader(bytes: Buffer, claims: VapidClaims): Aes128gcmHeader {
  const header = parseAes128gcm(bytes);
  if (base64url(header.senderPublicKey) === claims.publicKey) {
    throw new PushPeerError(400, 'same_key_for_ecdh_and_vapid', 'the aes128gcm keyid equals the VAPID key; RFC 8292 section 3.2 requires different keys');
  }
  return header;
}

interface CachedVapid {
  readonly claims: VapidClaims;
  readonly expMs: number;
}

/** Verifies every VAPID token in verify mode; in count mode a token verified once is trusted until it expires. */
export class VapidVerifier {
  private cache = new Map<string, CachedVapid>();

  constructor(
    private readonly mode: PeerMode,
    private readonly audience: () => string,
  ) {}

  verify(authorization: string | undefined): VapidClaims {
    const nowMs = Date.now();
    const caching = this.mode === 'count' && authorization !== undefined;
    if (caching) {
      const cached = this.cache.get(authorization);
      if (cached && cached.expMs > nowMs) return cached.claims;
    }
    const claims = verifyVapid(parseVapidAuthorization(authorization), this.audience(), nowMs);
    if (caching) {
      if (this.cache.size >= 10_000) this.cache.clear();
      this.cache.set(authorization, { claims, expMs: claims.exp * 1000 });
    }
    return claims;
  }

  clear(): void {
    this.cache = new Map();
  }
}
