import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Notification } from '@herald/proto/herald/campaign/v1/campaign';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { ErrorResponse, IdempotencyHeaders, idempotencyKeyOf, orNull, PageOf, withErrors } from '../schemas/common.js';
import { NotificationRecord, RecipientRecord, SendBody, SendResult } from '../schemas/notifications.js';

/** POST /send, GET /notifications/{id} and its recipients. */

/**
 * A send counts its audience and reserves that many from the monthly allowance before it answers. For an
 * audience of millions on a cold cache that can take longer than the gateway's default gRPC deadline
 * (a 1,000,000-subscriber send once took over 5 s right after a vacuum), so it gets longer.
 */
const SEND_DEADLINE_MS = 30_000;

function notificationRecord(notification: Notification) {
  const content = notification.content;
  const counts = {
    targeted: Number(notification.targeted),
    queued: Number(notification.queued),
    delivered: Number(notification.delivered),
    failed: Number(notification.failed),
    expired: Number(notification.expired),
  };
  return {
    id: notification.id,
    status: notification.status,
    title: content?.title ?? '',
    body: content?.body ?? '',
    url: orNull(content?.url ?? ''),
    iconUrl: orNull(content?.iconUrl ?? ''),
    imageUrl: orNull(content?.imageUrl ?? ''),
    createdAt: notification.createdAt,
    completedAt: orNull(notification.completedAt),
    counts: { ...counts, pending: Math.max(0, counts.queued - counts.delivered - counts.failed - counts.expired) },
    lastDelivery: notification.lastReportedAt
      ? { statusCode: notification.lastStatusCode, outcome: notification.lastOutcome, reportedAt: notification.lastReportedAt }
      : null,
  };
}

export const notificationRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.post(
      '/send',
      {
        config: { access: { scope: 'notifications:send', plan: 'api' } },
        schema: {
          tags: ['Notifications'],
          operationId: 'sendNotification',
          summary: "Send a push notification to the site's browser subscribers",
          body: SendBody,
          headers: IdempotencyHeaders,
          response: withErrors({ 200: SendResult, 409: ErrorResponse }),
        },
      },
      async (request) => {
        const principal = principalOf(request);
        const { idempotencyKey: bodyKey, subscriberIds = [], externalIds = [], tags = [], ...content } = request.body;
        const result = await clients.campaign.send({
          workspaceId: principal.workspaceId,
          siteId: principal.siteId,
          content: {
            title: content.title,
            body: content.body,
            url: content.url ?? '',
            iconUrl: content.iconUrl ?? '',
            imageUrl: content.imageUrl ?? '',
            actions: [],
            answerUrl: '',
          },
          targeting: { subscriberIds, externalIds, tags, segmentId: '', verifiedOnly: false, memberIds: [] },
          idempotencyKey: idempotencyKeyOf(request.headers['idempotency-key'], bodyKey) ?? '',
          monthlyAllowance: String(principal.plan?.monthlyNotificationAllowance ?? '0'),
          keyId: principal.keyId,
        }, { deadlineMs: SEND_DEADLINE_MS });
        return {
          success: true,
          status: 'queued' as const,
          campaignId: result.notificationId,
          sent: Number(result.sent),
          limits: { remaining: Number(result.remaining), limit: Number(result.limit) },
          duplicate: result.duplicate,
        };
      },
    );

    app.get(
      '/notifications/:notificationId',
      {
        config: { access: { scope: 'notifications:read' } },
        schema: { tags: ['Notifications'], operationId: 'getNotification', summary: 'Read a notification with its delivery counts', params: Type.Object({ notificationId: Type.String({ maxLength: 128 }) }), response: withErrors({ 200: NotificationRecord }) },
      },
      async (request) => {
        const { notification } = await clients.campaign.getNotification({
          workspaceId: principalOf(request).workspaceId,
          notificationId: request.params.notificationId,
        });
        if (!notification) throw new Error('campaign service returned no notification');
        return notificationRecord(notification);
      },
    );

    app.get(
      '/notifications/:notificationId/recipients',
      {
        config: { access: { scope: 'notifications:read' } },
        schema: {
          tags: ['Notifications'],
          operationId: 'listNotificationRecipients',
          summary: 'Page the per-recipient delivery states',
          params: Type.Object({ notificationId: Type.String({ maxLength: 128 }) }),
          querystring: Type.Object(
            {
              limit: Type.Integer({ minimum: 1, maximum: 100, default: 100 }),
              cursor: Type.Optional(Type.String({ maxLength: 256 })),
              status: Type.Optional(Type.Union(['sending', 'retrying', 'delivered', 'failed', 'expired'].map((value) => Type.Literal(value)))),
            },
            { additionalProperties: false },
          ),
          response: withErrors({
            200: PageOf(RecipientRecord),
          }),
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        const { notificationId } = request.params;
        // 404 for a notification of another workspace, before any recipient is read.
        await clients.campaign.getNotification({ workspaceId, notificationId });
        const page = await clients.delivery.listDeliveries({
          workspaceId,
          notificationId,
          limit: request.query.limit,
          cursor: request.query.cursor ?? '',
          status: request.query.status ?? '',
        });
        return {
          data: page.deliveries.map((delivery) => ({
            subscriberId: delivery.subscriberId,
            status: delivery.status,
            attempts: delivery.attempts,
            lastStatusCode: delivery.lastStatusCode === 0 ? null : delivery.lastStatusCode,
            updatedAt: delivery.updatedAt,
          })),
          hasMore: page.nextCursor !== '',
          nextCursor: orNull(page.nextCursor),
        };
      },
    );
  };
