import type { NotificationContent } from '@herald/proto/herald/campaign/v1/campaign';

/**
 * What the service worker receives, decrypted: the notification as JSON. Built once per
 * notification and encrypted per recipient by the fleet.
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
