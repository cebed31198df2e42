import { createHash, createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';

/**
 * Engagement tokens: the credential a service worker sends with an impression, click or dismiss
 * (POST {origin}/api/v1/events). The delivery fleet signs one per (notification, subscriber) into
 * each push; the gateway verifies it without a lookup. Bound to the workspace, site, notification
 * and subscriber it names (changing any of them breaks the MAC) and valid for
 * ENGAGEMENT_TOKEN_LIFETIME_SECONDS after the push.
 *
 *   <base64url("<workspace> <site> <notification> <subscriber> <issued, unix seconds>")>.<MAC>
 *
 * where MAC is HMAC-SHA256(ENGAGEMENT_TOKEN_SECRET, "herald.engagement." + first part), base64url,
 * cut to 128 bits.
 */

export const ENGAGEMENT_KINDS = ['impression', 'click', 'dismiss'] as const;
export type EngagementKind = (typeof ENGAGEMENT_KINDS)[number];

/** Clicks on a notification can come long after it arrived; a month covers a tray left alone. */
const ENGAGEMENT_TOKEN_LIFETIME_SECONDS = 30 * 24 * 3_600;

/** Ids a token can carry (every Herald id fits: `ws_…`, `site_…`, `cmp_…`, subscriber ids). */
const ID = /^[A-Za-z0-9_-]{1,64}$/;
const MAC_CHARS = 22;
/** The longest token: four 64-character ids and a timestamp, encoded, a dot and the MAC. */
export const MAX_ENGAGEMENT_TOKEN_LENGTH = Math.ceil(((64 + 1) * 4 + 10) / 3) * 4 + 1 + MAC_CHARS;

export interface EngagementSubject {
  workspaceId: string;
  siteId: string;
  notificationId: string;
  subscriberId: string;
}

export class EngagementTokens {
  /** A KeyObject, not the string: Node 24 brand-checks a raw key on every HMAC (about 15 µs each). */
  private readonly key: KeyObject;

  constructor(secret: string) {
    if (Buffer.byteLength(secret) < 32) throw new Error('ENGAGEMENT_TOKEN_SECRET must be at least 32 bytes');
    this.key = createSecretKey(secret, 'utf8');
  }

  private mac(body: string): string {
    return createHmac('sha256', this.key).update(`herald.engagement.${body}`).digest('base64url').slice(0, MAC_CHARS);
  }

  sign(subject: EngagementSubject, issuedAtMs = Date.now()): string {
    const ids = [subject.workspaceId, subject.siteId, subject.notificationId, subject.subscriberId];
    if (!ids.every((id) => ID.test(id))) throw new Error('engagement token ids must be 1 to 64 of [A-Za-z0-9_-]');
    const body = Buffer.from(`${ids.join(' ')} ${Math.floor(issuedAtMs / 1_000)}`).toString('base64url');
    return `${body}.${this.mac(body)}`;
  }

  /** What a token names, or undefined when it is not one this deployment signed, or too old. */
  verify(token: string, nowMs = Date.now()): EngagementSubject | undefined {
    if (token.length > MAX_ENGAGEMENT_TOKEN_LENGTH) return undefined;
    const dot = token.indexOf('.');
    if (dot <= 0) return undefined;
    const body = token.slice(0, dot);
    // Compared as text: base64url's unused low bits would otherwise let several spellings pass.
    const given = Buffer.from(token.slice(dot + 1));
    const expected = Buffer.from(this.mac(body));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    const [workspaceId, siteId, notificationId, subscriberId, issued, ...rest] = Buffer.from(body, 'base64url').toString().split(' ');
    if (!workspaceId || !siteId || !notificationId || !subscriberId || !issued || rest.length > 0) return undefined;
    const age = nowMs / 1_000 - Number(issued);
    if (!(age >= -300 && age <= ENGAGEMENT_TOKEN_LIFETIME_SECONDS)) return undefined;
    return { workspaceId, siteId, notificationId, subscriberId };
  }
}

/**
 * The event id of a report: the same for every report of one (notification, subscriber, kind), so
 * consumers that handle each event id once count a repeated report once. UUID-shaped (the
 * processed-events tables key on uuid).
 */
export function engagementEventId(notificationId: string, subscriberId: string, kind: EngagementKind): string {
  const hex = createHash('sha256').update(`${notificationId} ${subscriberId} ${kind}`).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/** `payload` (a JSON object) with the token added as its last field, `"token"`. */
export function withEngagementToken(payload: Uint8Array, token: string): Buffer {
  const json = Buffer.from(payload);
  const close = json.lastIndexOf('}');
  if (close < 0) throw new Error('a push payload is a JSON object');
  return Buffer.concat([json.subarray(0, close), Buffer.from(`${close > 1 ? ',' : ''}"token":"${token}"}`)]);
}

/** Bytes the token adds to a payload at most: what content must leave room for. */
export const ENGAGEMENT_TOKEN_FIELD_BYTES = `,"token":""`.length + MAX_ENGAGEMENT_TOKEN_LENGTH;
