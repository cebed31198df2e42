import { atLongest, ENGAGEMENT_TOKEN_FIELD_BYTES } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import type { NotificationContent } from '@herald/proto/herald/campaign/v1/campaign';
import { MAX_PAYLOAD_BYTES } from '@herald/webpush';

/**
 * What the service worker receives, decrypted: the notification as JSON. Built once per
 * notification; the fleet adds each recipient's engagement token and encrypts it per recipient.
 */
export function notificationPayload(notificationId: string, content: NotificationContent): Buffer {
  return Buffer.from(
    JSON.stringify({
      notificationId,
      title: content.title,
      body: content.body,
      ...(content.url ? { url: content.url } : {}),
      ...(content.iconUrl ? { icon: content.iconUrl } : {}),
      ...(content.imageUrl ? { image: content.imageUrl } : {}),
      ...(content.actions.length > 0 ? { actions: content.actions } : {}),
      ...(content.answerUrl ? { answerUrl: content.answerUrl } : {}),
    }),
  );
}

/**
 * Refuses, before anything is stored, a notification too large for one encrypted push message
 * once the fleet has filled it for a recipient and added its engagement token (both counted at
 * their longest).
 */
export function assertFits(notificationId: string, content: NotificationContent): void {
  // Per-subscriber placeholders counted as filled with values of full length.
  const longest = { ...content, title: atLongest(content.title), body: atLongest(content.body), url: atLongest(content.url) };
  const payloadBytes = notificationPayload(notificationId, longest).length + ENGAGEMENT_TOKEN_FIELD_BYTES;
  if (payloadBytes > MAX_PAYLOAD_BYTES) {
    throw new HeraldError(
      'invalid_request',
      `The notification is ${payloadBytes} bytes as sent to browsers; at most ${MAX_PAYLOAD_BYTES} fit one encrypted push message.`,
      { title: 'Notification too large', extra: { fields: [{ field: 'body', in: 'body', problem: 'makes the notification too large' }] } },
    );
  }
}
