import { randomUUID } from 'node:crypto';

import type { IncomingMessage } from '@herald/bus';
import { withTransaction, type Pool } from '@herald/db';
import { DeliveryJob } from '@herald/proto/herald/delivery/v1/delivery';
import { retryWhileUnreachable } from '@herald/workloop';

import { sortAttempts } from './outcomes.js';
import { personalizer } from './personalize.js';
import type { Sender } from './sender.js';
import * as store from './store.js';
import type { VapidKeyCache } from './vapid.js';

export interface JobDeps {
  pool: Pool;
  sender: Sender;
  vapidKeys: VapidKeyCache;
  maxAttempts: number;
  /** The longest one push may take; a job's recipients are leased a little longer. */
  pushTimeoutMs: number;
}

/** How long a worker keeps trying to record pushes it made while the database is unreachable. */
export const RECORD_PATIENCE_MS = 5 * 60_000;

/** Thrown after the rest of a job is done: the bus retries the job, which takes these recipients over once their lease ends (or finds them done). */
export class RecipientsHeldElsewhere extends Error {
  constructor(count: number) {
    super(`${count} recipients of the job are being pushed by another worker; retrying after its lease`);
    this.name = 'RecipientsHeldElsewhere';
  }
}

/**
 * Handles one delivery job (a batch of recipients of one notification): leases the recipients,
 * pushes to each with no transaction open, then records every outcome, schedules retries and
 * reports results in one transaction (for what it still holds) before the Kafka offset moves on.
 */
export function deliveryJobs({ pool, sender, vapidKeys, maxAttempts, pushTimeoutMs }: JobDeps) {
  return async (message: IncomingMessage): Promise<void> => {
    const job = DeliveryJob.decode(message.value);
    const token = randomUUID();
    const { claimed, heldElsewhere } = await store.claim(
      pool,
      { notificationId: job.notificationId, workspaceId: job.workspaceId, subscriberIds: job.targets.map((target) => target.subscriberId) },
      token,
      pushTimeoutMs + 5_000,
    );
    if (claimed.size === 0) {
      if (heldElsewhere > 0) throw new RecipientsHeldElsewhere(heldElsewhere);
      return;
    }
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
    const personalize = job.personalized ? personalizer(job.payload) : undefined;
    const recipients: store.Recipient[] = job.targets
      .filter((target) => claimed.has(target.subscriberId))
      .map(({ subscriberId, endpoint, p256dh, auth, ...profile }) => ({
        subscriberId,
        endpoint,
        p256dh,
        auth,
        attemptsBefore: 0,
        ...(personalize && { payload: personalize({ subscriberId, endpoint, p256dh, auth, ...profile }) }),
      }));
    const attempts = await Promise.all(
      recipients.map((recipient) =>
        sender.attempt({ ...push, ...recipient }, vapid),
      ),
    );
    const sorted = sortAttempts(recipients, attempts, maxAttempts);
    // The pushes are out: a database restart now must delay their record, not cause them again.
    await retryWhileUnreachable(() => withTransaction(pool, async (tx) => {
      // Only what this worker still holds is recorded; the rest is another's now.
      const held = await store.recordOutcomes(tx, job.notificationId, store.outcomesOf(sorted.finals, sorted.again), token);
      const mine = <T extends { subscriberId: string }>(list: T[]) => list.filter((item) => held.has(item.subscriberId));
      const finals = mine(sorted.finals);
      await store.scheduleRetries(tx, push, mine(sorted.again));
      await store.enqueueResult(tx, job.notificationId, job.workspaceId, finals);
      await store.enqueueDeadLetters(tx, push, recipients, mine(sorted.exhausted));
    }), RECORD_PATIENCE_MS, () => message.heartbeat());
    if (heldElsewhere > 0) throw new RecipientsHeldElsewhere(heldElsewhere);
  };
}
