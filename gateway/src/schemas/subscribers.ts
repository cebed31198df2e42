import { SUBSCRIBER_LIMITS } from '@herald/domain';
import { Type } from '@sinclair/typebox';

import { Nullable } from './common.js';

/** Subscriber and push-subscription fields, shared by the server API and the browser SDK's endpoints. */

export const Tag = Type.String({ minLength: 1, maxLength: SUBSCRIBER_LIMITS.tagLength, pattern: '^[^,]*$', description: 'No commas' });
export const TagList = Type.Array(Tag, { maxItems: SUBSCRIBER_LIMITS.tags });
export const ExternalId = Type.String({ minLength: 1, maxLength: SUBSCRIBER_LIMITS.externalIdLength, description: "The caller's own user id" });

const Base64Url = Type.String({ minLength: 1, maxLength: 200, description: 'base64url' });
/** A PushSubscription.toJSON(), as properties to build body schemas from. */
export const PushSubscription = {
  endpoint: Type.String({ minLength: 1, maxLength: SUBSCRIBER_LIMITS.endpointLength, description: "The push service's https endpoint" }),
  keys: Type.Object({ p256dh: Base64Url, auth: Base64Url }, { additionalProperties: false }),
  // PushSubscription.toJSON() carries it; accepted and ignored.
  expirationTime: Type.Optional(Nullable(Type.Number())),
};
const DeviceField = Type.Optional(Type.String({ maxLength: SUBSCRIBER_LIMITS.deviceFieldLength }));
/** What the page may say about the browser, kept with the subscriber. */
export const DeviceFields = { browser: DeviceField, os: DeviceField, language: DeviceField, timezone: DeviceField };

