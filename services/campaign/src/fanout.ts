import { createHash } from 'node:crypto';

import { topics, type Bus, type IncomingMessage, type OutgoingMessage } from '@herald/bus';
import type { Pool } from '@herald/db';
import type { PromiseClient } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import type { AudienceServiceClient } from '@herald/proto/herald/audience/v1/audience';
import { CampaignEvent } from '@herald/proto/herald/campaign/v1/events';
import { DeliveryJob } from '@herald/proto/herald/delivery/v1/delivery';

import { notificationPayload } from './payload.js';
import * as store from './store.js';

/** Jobs written to Kafka per round trip. */
const JOBS_PER_PUBLISH = 8;

/** RFC 8030 Topic (<= 32 base64url characters): the same for every push of one notification. */
function pushTopic(notificationId: string): string {
  return createHash('sha256').update(notificationId).digest().subarray(0, 24).toString('base64url');
}

export interface FanoutDeps {
  pool: Pool;
  bus: Bus;
  audience: PromiseClient<AudienceServiceClient>;
  logger: Logger;
  batchSize: number;
  ttlSeconds: number;
}

/**
 * Fans a queued notification out to the delivery fleet: streams the matching subscribers from the
 * audience service (gRPC flow control holds the scan back while Kafka is slow) and writes one
 * delivery job per batch, awaiting Kafka's acknowledgement before asking for more. Progress is
 * saved after every batch, so a redelivered event resumes where it stopped; a batch written
 * twice is harmless, the fleet dedupes per (notification, subscriber).
 */
export function fanout({ pool, bus, audience, logger, batchSize, ttlSeconds }: FanoutDeps) {
  return async (message: IncomingMessage): Promise<void> => {
    const event = CampaignEvent.decode(message.value);
    if (event.kind?.$case !== 'notificationQueued') return;
    const queued = event.kind.value;
    const notification = await store.findNotification(pool, event.workspaceId, queued.notificationId);
    if (!notification || notification.fanout_done || !queued.content) return;

    const payload = notificationPayload(queued.notificationId, queued.content);
    const topic = pushTopic(queued.notificationId);
    let sequence = notification.fanout_batches;
    const started = Date.now();
    const targets = audience.streamTargets({
      workspaceId: event.workspaceId,
      targeting: queued.targeting ?? { subscriberIds: [], externalIds: [], tags: [], segmentId: '' },
      batchSize,
      after: notification.fanout_cursor,
    });
    // Jobs go to Kafka a few at a time (one round trip), then the resume point is saved.
    let pending: OutgoingMessage[] = [];
    let pendingRecipients = 0;
    let cursor = notification.fanout_cursor;
    const flush = async (): Promise<void> => {
      if (pending.length === 0) return;
      await bus.publish(pending);
      await store.recordFanoutBatches(pool, queued.notificationId, pending.length, pendingRecipients, cursor);
      pending = [];
      pendingRecipients = 0;
      await message.heartbeat();
    };
    for await (const batch of targets) {
      if (batch.targets.length === 0) continue;
      const jobId = `${queued.notificationId}:${sequence}`;
      const job = DeliveryJob.encode({
        jobId,
        notificationId: queued.notificationId,
        workspaceId: event.workspaceId,
        siteId: queued.siteId,
        payload,
        ttlSeconds,
        urgency: 'normal',
        topic,
        targets: batch.targets,
      }).finish();
      pending.push({ topic: topics.deliveryJobs.name, key: jobId, value: Buffer.from(job) });
      pendingRecipients += batch.targets.length;
      cursor = batch.cursor;
      sequence += 1;
      if (pending.length >= JOBS_PER_PUBLISH) await flush();
    }
    await flush();
    await store.finishFanout(pool, queued.notificationId);
    logger.info({ notificationId: queued.notificationId, batches: sequence, ms: Date.now() - started }, 'fan-out finished');
  };
}
