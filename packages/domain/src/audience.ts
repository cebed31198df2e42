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

/** Bounds of a segment's filter (/segments), checked at the gateway and again by the audience service. */
export const SEGMENT_LIMITS = {
  nameLength: 200,
  /** Tags in each of tags.all, tags.any and tags.none. */
  tagsPerList: 20,
  /** Values in each of status, browser, os and country. */
  valuesPerList: 20,
  /** customData keys compared. */
  customDataKeys: 10,
  customDataKeyLength: 64,
  /** A compared string value, in characters. */
  customDataValueLength: 256,
} as const;

/** An ISO 8601 / RFC 3339 instant with a time and an offset, as segments take created before/after. */
export const INSTANT_PATTERN = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?(Z|[+-]\\d{2}:\\d{2})$';

/** ISO 3166-1 alpha-2, as a segment's country filter takes it. */
export const COUNTRY_CODE_PATTERN = '^[A-Z]{2}$';

/** The origin of a push endpoint (e.g. https://fcm.googleapis.com): the endpoint itself is a capability URL. */
export function pushServiceOrigin(endpoint: string): string {
  try {
    return new URL(endpoint).origin;
  } catch {
    return '';
  }
}
