/**
 * Subscriber facts the gateway validates and the audience service enforces again: statuses and
 * the size limits of what a caller may attach to a subscriber.
 */

export const SUBSCRIBER_STATUSES = ['active', 'unsubscribed', 'expired', 'bounced'] as const;
export type SubscriberStatus = (typeof SUBSCRIBER_STATUSES)[number];

export const SUBSCRIBER_LIMITS = {
  /** Tags per subscriber. */
  tags: 50,
  /** Characters per tag. Tags hold no commas: GET /subscribers takes them comma-separated. */
  tagLength: 64,
  externalIdLength: 256,
  /** customData, serialized as JSON, in bytes. */
  customDataBytes: 8_192,
  /** A push endpoint URL, in characters. */
  endpointLength: 2_048,
  /** browser, os, language, timezone, in characters. */
  deviceFieldLength: 100,
} as const;

/** The origin of a push endpoint (e.g. https://fcm.googleapis.com): the endpoint itself is a capability URL. */
export function pushServiceOrigin(endpoint: string): string {
  try {
    return new URL(endpoint).origin;
  } catch {
    return '';
  }
}
