import type { IncomingMessage } from '@herald/bus';
import { withTransaction, type Pool } from '@herald/db';
import { DeliveryJob } from '@herald/proto/herald/delivery/v1/delivery';

import { sortAttempts } from './outcomes.js';
import type { Sender } from './sender.js';
import * as store from './store.js';
import type { VapidKeyCache } from './vapid.js';

export interface JobDeps {
  pool: Pool;
  sender: Sender;
  vapidKeys: VapidKeyCache;
  maxAttempts: number;
}

/**
 * Handles one delivery job (a batch of recipients of one notification): claims the recipients,
 * pushes to each, then records every outcome, schedules retries and reports results in one
 * transaction before the Kafka offset moves on.
 */
export function deliveryJobs({ pool, sender, vapidKeys, maxAttempts }: JobDeps) {
  return async (message: IncomingMessage): Promise<void> => {
    const job = DeliveryJob.decode(message.value);
    const claimed = await store.claim(
      pool,
      job.notificationId,
      job.workspaceId,
      job.targets.map((target) => target.subscriberId),
    );
    if (claimed.size === 0) return;
    const vapid = await vapidKeys.get(job.siteId);
    const push: store.PushContext = {
      notificationId: job.notificationId,
      workspaceId: job.workspaceId,
      siteId: job.siteId,
      payload: job.payload,
      ttlSeconds: job.ttlSeconds,
      urgency: job.urgency,
      topic: job.topic,
    };
    const recipients: store.Recipient[] = job.targets
      .filter((target) => claimed.has(target.subscriberId))
      .map((target) => ({ ...target, attemptsBefore: 0 }));
    const attempts = await Promise.all(
      recipients.map((recipient) =>
        sender.attempt({ ...recipient, payload: job.payload, ttlSeconds: job.ttlSeconds, urgency: job.urgency, topic: job.topic }, vapid),
      ),
    );
    const { finals, exhausted, again } = sortAttempts(recipients, attempts, maxAttempts);
    await withTransaction(pool, async (tx) => {
      await store.recordFinal(tx, job.notificationId, finals);
      await store.scheduleRetries(tx, push, again);
      await store.enqueueResult(tx, job.notificationId, job.workspaceId, finals);
      await store.enqueueDeadLetters(tx, push, recipients, exhausted);
    });
  };
}
