import { ENGAGEMENT_TOKEN_FIELD_BYTES, fillSubscriberPlaceholders, type SubscriberProfile } from '@herald/domain';
import type { Target } from '@herald/proto/herald/audience/v1/audience';
import { MAX_PAYLOAD_BYTES } from '@herald/webpush';

/** The payload fields content placeholders can stand in (the action URL's values are URI-encoded). */
const TEXT_FIELDS = ['title', 'body'] as const;

/**
 * Fills a personalized job's per-subscriber placeholders for each recipient. The payload is
 * parsed once per job; each recipient costs a few string replaces and one JSON.stringify. A
 * recipient whose filled payload would not fit one push message (values that grew when escaped
 * or encoded) gets the fallbacks instead, which the campaign service sized when it accepted the
 * content.
 */
export function personalizer(payload: Uint8Array): (target: Target) => Buffer {
  const notification = JSON.parse(Buffer.from(payload).toString()) as Record<string, unknown>;
  const fill = (profile: SubscriberProfile | undefined): Buffer => {
    const filled: Record<string, unknown> = { ...notification };
    for (const field of TEXT_FIELDS) if (typeof filled[field] === 'string') filled[field] = fillSubscriberPlaceholders(filled[field], profile);
    if (typeof filled.url === 'string') filled.url = fillSubscriberPlaceholders(filled.url, profile, encodeURIComponent);
    return Buffer.from(JSON.stringify(filled));
  };
  const fallbacks = fill(undefined);
  return (target) => {
    const filled = fill({ id: target.subscriberId, externalId: target.externalId, customData: customDataOf(target.customDataJson) });
    return filled.length + ENGAGEMENT_TOKEN_FIELD_BYTES <= MAX_PAYLOAD_BYTES ? filled : fallbacks;
  };
}

function customDataOf(json: string): Record<string, unknown> {
  if (json === '') return {};
  const parsed: unknown = JSON.parse(json);
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
}
