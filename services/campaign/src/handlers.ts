import { createHash, randomUUID } from 'node:crypto';

import { withTransaction, type Queryable } from '@herald/db';
import { HeraldError } from '@herald/errors';
import { implementService, type PromiseClient } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import type { StreamTargetsResponse, Targeting } from '@herald/proto/herald/audience/v1/audience';
import {
  CampaignServiceService,
  type Notification,
  type NotificationContent,
  type SendRequest,
  type SendResponse,
} from '@herald/proto/herald/campaign/v1/campaign';
import { allowances } from './allowance.js';
import { campaignManagement, type CampaignDeps } from './campaigns.js';
import { deliveryJobs, type DeliveryJobs } from './fanout.js';
import { assertFits } from './payload.js';
import { limitExceeded } from './starts.js';
import * as store from './store.js';

/** A concurrent request with the same idempotency key committed first. */
class DuplicateSend extends Error {}

/** The fingerprint a replayed Idempotency-Key must match: the content and the targeting. */
function requestHash(request: Pick<SendRequest, 'content' | 'targeting'>): string {
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

/** Whom a send goes to: how many, and the targets themselves when they fit one delivery job. */
interface Reach {
  targeted: number;
  batch?: StreamTargetsResponse;
}

export function campaignHandlers(deps: CampaignDeps, { batchSize, ttlSeconds }: { batchSize: number; ttlSeconds: number }) {
  const { pool, audience, logger } = deps;
  const allowanceOf = allowances(deps.account);

  /**
   * Who a notification reaches. A targeting by ids alone (a flow's push to its subscriber, a
   * question to a person, a /send to a few) is read whole when it fits one delivery job, so the
   * send's own transaction writes that job: no campaign event, fan-out consumer or second read of
   * the audience per small send. Tags and segments may match any number: counted, then fanned out.
   */
  async function reach(workspaceId: string, targeting: Targeting, withProfile: boolean): Promise<Reach> {
    const ids = targeting.subscriberIds.length + targeting.externalIds.length;
    if (ids > 0 && ids <= batchSize && targeting.tags.length === 0 && targeting.segmentId === '') {
      const batches: StreamTargetsResponse[] = [];
      for await (const batch of audience.streamTargets({ workspaceId, targeting, batchSize, after: '', withProfile })) {
        if (batch.targets.length > 0) batches.push(batch);
        // More than one job (an external id with many devices): leaving cancels the stream.
        if (batches.length > 1) break;
      }
      const [only] = batches;
      if (batches.length <= 1) return { targeted: only?.targets.length ?? 0, ...(only && { batch: only }) };
    }
    return { targeted: Number((await audience.countTargets({ workspaceId, targeting })).count) };
  }

  /** Stores the started notification with its fan-out queued: its one job when it has the targets, else the fan-out event. */
  async function queue(tx: Queryable, n: store.StartedNotification, jobs: DeliveryJobs, { targeted, batch }: Reach): Promise<void> {
    await store.insertStartedCampaign(tx, { ...n, targeted, ...(batch && { fannedOut: { queued: batch.targets.length, cursor: batch.cursor } }) });
    if (batch) await store.enqueueDeliveryJob(tx, jobs.job(0, batch.targets));
    else await store.enqueueNotificationQueued(tx, n);
  }

  async function replay(request: SendRequest, record: store.SendRecord): Promise<SendResponse> {
    if (record.request_hash !== requestHash(request)) {
      throw new HeraldError('conflict', 'This idempotency key was already used with a different request.', {
        title: 'Idempotency key reused',
        hint: 'Use a new idempotency key for a different notification.',
      });
    }
    const limit = await allowanceOf(request.workspaceId);
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
          const existing = await store.findSendRecord(pool, request.workspaceId, request.keyId, key);
          if (existing) return replay(request, existing);
        }
        const notificationId = `ntf_${randomUUID().replaceAll('-', '')}`;
        assertFits(notificationId, content);
        const targeting = request.targeting ?? { subscriberIds: [], externalIds: [], tags: [], segmentId: '', verifiedOnly: false, memberIds: [] };
        const notification: store.StartedNotification = { id: notificationId, kind: 'send', workspaceId: request.workspaceId, siteId: request.siteId, content, targeting };
        const jobs = deliveryJobs(notification, ttlSeconds);
        const reached = await reach(request.workspaceId, targeting, jobs.personalized);
        const targeted = reached.targeted;
        if (targeted === 0) throw new HeraldError('invalid_request', 'No subscribers found matching criteria', { title: 'No subscribers found matching criteria' });
        const limit = await allowanceOf(request.workspaceId);

        let used: number;
        try {
          used = await withTransaction(pool, async (tx) => {
            // The key first: a concurrent request with the same key waits here for this one.
            if (key) {
              const claimed = await store.claimIdempotencyKey(tx, {
                workspaceId: request.workspaceId,
                keyId: request.keyId,
                key,
                requestHash: requestHash(request),
                notificationId,
                sent: targeted,
              });
              if (!claimed) throw new DuplicateSend();
            }
            await queue(tx, notification, jobs, reached);
            // Last: the workspace's usage row stays locked until the commit, and every concurrent
            // send of the workspace waits for that lock.
            const total = await store.reserveAllowance(tx, request.workspaceId, targeted, limit);
            if (total === undefined) throw limitExceeded(limit);
            return total;
          });
        } catch (err) {
          if (!(err instanceof DuplicateSend)) throw err;
          const record = await store.findSendRecord(pool, request.workspaceId, request.keyId, key);
          if (!record) throw new Error('idempotency record vanished after a conflict');
          return replay(request, record);
        }
        logger.info({ notificationId, targeted }, 'notification queued');
        return { notificationId, sent: String(targeted), remaining: String(limit - used), limit: String(limit), duplicate: false };
      },

      async queueQuestion(request) {
        const content = request.content;
        if (!content) throw new HeraldError('invalid_request', 'content is required');
        // The decision service's keys (question, channel, target), kept apart from API keys' own (key id '').
        const key = request.idempotencyKey;
        const first = key ? await store.findSendRecord(pool, request.workspaceId, '', key) : undefined;
        if (first) return { notificationId: first.notification_id, targeted: first.sent };
        const notificationId = `ntf_${randomUUID().replaceAll('-', '')}`;
        assertFits(notificationId, content);
        // A question reaches approver devices only (verified external ids), whatever the caller
        // asked: the marketing audience and anonymous subscribers never get one.
        const targeting = { ...(request.targeting ?? { subscriberIds: [], externalIds: [], tags: [], segmentId: '', memberIds: [] }), verifiedOnly: true };
        const notification: store.StartedNotification = { id: notificationId, kind: 'question', workspaceId: request.workspaceId, siteId: request.siteId, content, targeting };
        const jobs = deliveryJobs(notification, ttlSeconds);
        const reached = await reach(request.workspaceId, targeting, jobs.personalized);
        const targeted = reached.targeted;
        if (targeted === 0) return { notificationId: '', targeted: '0' };
        // A question to a person is not a marketing send: no allowance is reserved for it.
        try {
          await withTransaction(pool, async (tx) => {
            // The key first: a concurrent call with the same key waits here for this one, then replays it.
            if (key && !(await store.claimIdempotencyKey(tx, { workspaceId: request.workspaceId, keyId: '', key, requestHash: requestHash(request), notificationId, sent: targeted }))) {
              throw new DuplicateSend();
            }
            await queue(tx, notification, jobs, reached);
          });
        } catch (err) {
          if (!(err instanceof DuplicateSend)) throw err;
          const record = await store.findSendRecord(pool, request.workspaceId, '', key);
          if (!record) throw new Error('idempotency record vanished after a conflict');
          return { notificationId: record.notification_id, targeted: record.sent };
        }
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
