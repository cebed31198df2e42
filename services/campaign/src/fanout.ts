import { createHash } from 'node:crypto';

import { topics, type Bus, type IncomingMessage, type OutgoingMessage } from '@herald/bus';
import type { Pool } from '@herald/db';
import { hasSubscriberPlaceholders } from '@herald/domain';
import type { PromiseClient } from '@herald/grpc';
import { HeraldError } from '@herald/errors';
import type { Logger } from '@herald/logging';
import type { AudienceServiceClient, Target } from '@herald/proto/herald/audience/v1/audience';
import type { NotificationContent } from '@herald/proto/herald/campaign/v1/campaign';
import { CampaignEvent } from '@herald/proto/herald/campaign/v1/events';
import { DeliveryJob } from '@herald/proto/herald/delivery/v1/delivery';

import { recordCompletions } from './metrics.js';
import { notificationPayload } from './payload.js';
import * as store from './store.js';

/** Jobs written to Kafka per round trip. */
const JOBS_PER_PUBLISH = 8;

/** RFC 8030 Topic (<= 32 base64url characters): the same for every push of one notification. */
function pushTopic(notificationId: string): string {
  return createHash('sha256').update(notificationId).digest().subarray(0, 24).toString('base64url');
}

/** A delivery job as the fleet reads it: its Kafka key and message. */
export interface EncodedJob {
  key: string;
  value: Buffer;
}

export interface DeliveryJobs {
  /** Whether the fleet fills per-subscriber placeholders: the targets must then come with their profiles. */
  personalized: boolean;
  job(sequence: number, targets: Target[]): EncodedJob;
}

/**
 * The delivery jobs of one notification, numbered by `sequence` (the job id is
 * `<notification>:<sequence>`): the payload, push topic and whether the fleet personalizes it are
 * the same for every job, so they are worked out once.
 */
export function deliveryJobs(n: { id: string; workspaceId: string; siteId: string; content: NotificationContent }, ttlSeconds: number): DeliveryJobs {
  const payload = notificationPayload(n.id, n.content);
  // Per-subscriber placeholders: the targets come with their profiles and the fleet fills them.
  const personalized = hasSubscriberPlaceholders(n.content.title, n.content.body, n.content.url);
  const topic = pushTopic(n.id);
  return {
    personalized,
    job(sequence, targets) {
      const jobId = `${n.id}:${sequence}`;
      const value = DeliveryJob.encode({
        jobId,
        notificationId: n.id,
        workspaceId: n.workspaceId,
        siteId: n.siteId,
        payload,
        ttlSeconds,
        urgency: 'normal',
        topic,
        targets,
        personalized,
      }).finish();
      return { key: jobId, value: Buffer.from(value) };
    },
  };
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
 * One step of a throttled fan-out: `recipients` queued, then the next step `intervalMs` later, so
 * that at most `perMinute` are queued in any minute. Steps are about a second apart (fewer, longer
 * ones below 60 a minute) and a whole number of batches when larger than one.
 */
export function throttleStep(perMinute: number, batchSize: number): { recipients: number; intervalMs: number } {
  let recipients = Math.ceil(perMinute / 60);
  if (recipients > batchSize) recipients = Math.ceil(recipients / batchSize) * batchSize;
  return { recipients, intervalMs: Math.ceil((60_000 * recipients) / perMinute) };
}

/**
 * The stream of targets, ended (not failed) when the campaign's segment is deleted mid fan-out:
 * those queued so far are its audience. Stopping early still cancels the stream.
 */
async function* endingWhenSegmentGone<T>(stream: AsyncIterable<T>, segmentId: string, onGone: () => void): AsyncGenerator<T> {
  try {
    yield* stream;
  } catch (err) {
    if (!(segmentId && err instanceof HeraldError && err.code === 'not_found')) throw err;
    onGone();
  }
}

/**
 * Fans a started campaign out to the delivery fleet: streams the matching subscribers from the
 * audience service (gRPC flow control holds the scan back while Kafka is slow) and writes one
 * delivery job per batch, awaiting Kafka's acknowledgement before asking for more. Progress is
 * saved after every write, so a redelivered event resumes where it stopped; a batch written
 * twice is harmless, the fleet dedupes per (notification, subscriber).
 *
 * Before each write it checks that the campaign may still send: a pause or delete stops the
 * fan-out there (jobs not yet written are not written; resume continues from the saved cursor).
 * A throttled campaign queues one step and leaves the next to the timer loop.
 */
export function fanout({ pool, bus, audience, logger, batchSize, ttlSeconds }: FanoutDeps) {
  return async (message: IncomingMessage): Promise<void> => {
    const event = CampaignEvent.decode(message.value);
    if (event.kind?.$case !== 'notificationQueued') return;
    const queued = event.kind.value;
    const notification = await store.findNotification(pool, event.workspaceId, queued.notificationId);
    if (!notification || !queued.content || notification.deleted_at || !store.RUNNING.includes(notification.status)) return;
    if (notification.fanout_done) {
      recordCompletions(await store.finishFanout(pool, queued.notificationId));
      return;
    }

    const started = Date.now();
    const step = notification.throttle_per_minute ? throttleStep(notification.throttle_per_minute, batchSize) : undefined;
    const jobs = deliveryJobs({ id: queued.notificationId, workspaceId: event.workspaceId, siteId: queued.siteId, content: queued.content }, ttlSeconds);
    let sequence = notification.fanout_batches;
    const targeting = queued.targeting ?? { subscriberIds: [], externalIds: [], tags: [], segmentId: '', verifiedOnly: false, memberIds: [] };
    const stream = audience.streamTargets({
      workspaceId: event.workspaceId,
      targeting,
      batchSize: Math.min(batchSize, step?.recipients ?? batchSize),
      after: notification.fanout_cursor,
      withProfile: jobs.personalized,
    });
    const targets = endingWhenSegmentGone(stream, targeting.segmentId, () =>
      logger.warn({ notificationId: queued.notificationId, segmentId: targeting.segmentId }, 'fan-out ends early: its segment was deleted'),
    );
    // Jobs go to Kafka a few at a time (one round trip), then the resume point is saved.
    let pending: OutgoingMessage[] = [];
    let pendingRecipients = 0;
    let stepRecipients = 0;
    let cursor = notification.fanout_cursor;
    /** Writes the pending jobs; false when the campaign was paused or deleted (nothing written). */
    const flush = async (): Promise<boolean> => {
      if (pending.length === 0) return true;
      if (!(await store.fanoutMayContinue(pool, queued.notificationId))) return false;
      await bus.publish(pending);
      await store.recordFanoutBatches(pool, queued.notificationId, pending.length, pendingRecipients, cursor);
      pending = [];
      pendingRecipients = 0;
      await message.heartbeat();
      return true;
    };
    for await (const batch of targets) {
      if (batch.targets.length === 0) continue;
      pending.push({ topic: topics.deliveryJobs.name, ...jobs.job(sequence, batch.targets) });
      pendingRecipients += batch.targets.length;
      stepRecipients += batch.targets.length;
      cursor = batch.cursor;
      sequence += 1;
      if (step && stepRecipients >= step.recipients) {
        // Leaving the loop cancels the stream; the next step starts from the saved cursor.
        if (await flush()) await store.scheduleNextStep(pool, queued.notificationId, new Date(started + step.intervalMs));
        return;
      }
      if (pending.length >= JOBS_PER_PUBLISH && !(await flush())) return stopped(queued.notificationId);
    }
    if (!(await flush())) return stopped(queued.notificationId);
    recordCompletions(await store.finishFanout(pool, queued.notificationId));
    logger.info({ notificationId: queued.notificationId, batches: sequence, ms: Date.now() - started }, 'fan-out finished');
  };

  function stopped(notificationId: string): void {
    logger.info({ notificationId }, 'fan-out stopped: the campaign was paused or deleted');
  }
}
