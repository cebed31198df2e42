import { createHash, randomUUID } from 'node:crypto';

import { withTransaction, type Pool } from '@herald/db';
import { HeraldError } from '@herald/errors';
import { implementService, type PromiseClient } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import type { AudienceServiceClient } from '@herald/proto/herald/audience/v1/audience';
import {
  CampaignServiceService,
  type Notification,
  type NotificationContent,
  type SendRequest,
  type SendResponse,
} from '@herald/proto/herald/campaign/v1/campaign';
import { campaignManagement, type CampaignDeps } from './campaigns.js';
import { assertFits } from './payload.js';
import { limitExceeded } from './starts.js';
import * as store from './store.js';

/** A concurrent request with the same idempotency key committed first. */
class DuplicateSend extends Error {}

/** The fingerprint a replayed Idempotency-Key must match: the content and the targeting. */
function requestHash(request: SendRequest): string {
  return createHash('sha256').update(JSON.stringify([request.content, request.targeting])).digest('hex');
}

/** /notifications/{id} keeps its three states: queued (not started), sending (started, not finished), completed. */
function notificationStatus(status: store.CampaignStatus): string {
  if (status === 'draft' || status === 'scheduled') return 'queued';
  return status === 'completed' ? 'completed' : 'sending';
}

function toNotification(row: store.CampaignRow): Notification {
  return {
    id: row.id,
    status: notificationStatus(row.status),
    content: { title: row.title, body: row.body, url: row.url ?? '', iconUrl: row.icon_url ?? '', imageUrl: row.image_url ?? '', actions: [], answerUrl: '' },
    createdAt: row.created_at.toISOString(),
    completedAt: row.completed_at?.toISOString() ?? '',
    targeted: row.targeted,
    queued: row.queued,
    delivered: row.delivered,
    failed: row.failed,
    expired: row.expired,
    lastStatusCode: row.last_status_code ?? 0,
    lastOutcome: row.last_outcome ?? '',
    lastReportedAt: row.last_reported_at?.toISOString() ?? '',
  };
}

export function campaignHandlers(deps: CampaignDeps) {
  const { pool, audience, logger } = deps;

  async function replay(request: SendRequest, record: store.SendRecord): Promise<SendResponse> {
    if (record.request_hash !== requestHash(request)) {
      throw new HeraldError('conflict', 'This idempotency key was already used with a different request.', {
        title: 'Idempotency key reused',
        hint: 'Use a new idempotency key for a different notification.',
      });
    }
    const limit = Number(request.monthlyAllowance);
    const used = await store.usedThisMonth(pool, request.workspaceId);
    return { notificationId: record.notification_id, sent: record.sent, remaining: String(Math.max(0, limit - used)), limit: String(limit), duplicate: true };
  }

  return implementService(
    CampaignServiceService,
    {
      async send(request) {
        const content = request.content;
        if (!content) throw new HeraldError('invalid_request', 'content is required');
        const key = request.idempotencyKey;
        if (key) {
          const existing = await store.findSendRecord(pool, request.workspaceId, key);
          if (existing) return replay(request, existing);
        }
        const notificationId = `ntf_${randomUUID().replaceAll('-', '')}`;
        assertFits(notificationId, content);
        const targeting = request.targeting ?? { subscriberIds: [], externalIds: [], tags: [], segmentId: '' };
        const { count } = await audience.countTargets({ workspaceId: request.workspaceId, targeting });
        const targeted = Number(count);
        if (targeted === 0) throw new HeraldError('invalid_request', 'No subscribers found matching criteria', { title: 'No subscribers found matching criteria' });
        const limit = Number(request.monthlyAllowance);

        let used: number;
        try {
          used = await withTransaction(pool, async (tx) => {
            // The key first: a concurrent request with the same key waits here for this one.
            if (key) {
              const claimed = await store.claimIdempotencyKey(tx, {
                workspaceId: request.workspaceId,
                key,
                requestHash: requestHash(request),
                notificationId,
                sent: targeted,
              });
              if (!claimed) throw new DuplicateSend();
            }
            const total = await store.reserveAllowance(tx, request.workspaceId, targeted, limit);
            if (total === undefined) throw limitExceeded(limit);
            await store.insertStartedCampaign(tx, { id: notificationId, kind: 'send', workspaceId: request.workspaceId, siteId: request.siteId, content, targeting, targeted });
            await store.enqueueNotificationQueued(tx, { id: notificationId, workspaceId: request.workspaceId, siteId: request.siteId, content, targeting });
            return total;
          });
        } catch (err) {
          if (!(err instanceof DuplicateSend)) throw err;
          const record = await store.findSendRecord(pool, request.workspaceId, key);
          if (!record) throw new Error('idempotency record vanished after a conflict');
          return replay(request, record);
        }
        logger.info({ notificationId, targeted }, 'notification queued');
        return { notificationId, sent: String(targeted), remaining: String(limit - used), limit: String(limit), duplicate: false };
      },

      async queueQuestion(request) {
        const content = request.content;
        if (!content) throw new HeraldError('invalid_request', 'content is required');
        const notificationId = `ntf_${randomUUID().replaceAll('-', '')}`;
        assertFits(notificationId, content);
        const targeting = request.targeting ?? { subscriberIds: [], externalIds: [], tags: [], segmentId: '' };
        const targeted = Number((await audience.countTargets({ workspaceId: request.workspaceId, targeting })).count);
        if (targeted === 0) return { notificationId: '', targeted: '0' };
        // A question to a person is not a marketing send: no allowance is reserved for it.
        await withTransaction(pool, async (tx) => {
          const notification = { id: notificationId, workspaceId: request.workspaceId, siteId: request.siteId, content, targeting };
          await store.insertStartedCampaign(tx, { ...notification, kind: 'question', targeted });
          await store.enqueueNotificationQueued(tx, notification);
        });
        logger.info({ notificationId, targeted }, 'question notification queued');
        return { notificationId, targeted: String(targeted) };
      },

      async getNotification({ workspaceId, notificationId }) {
        const row = await store.findNotification(pool, workspaceId, notificationId);
        if (!row) throw new HeraldError('not_found', `No notification ${notificationId}.`);
        return { notification: toNotification(row) };
      },
      ...campaignManagement(deps),
    },
    logger,
  );
}
