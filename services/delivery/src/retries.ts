import { withTransaction, type Pool } from '@herald/db';
import type { Logger } from '@herald/logging';
import { retryWhileUnreachable, startWorkLoop, type WorkLoop } from '@herald/workloop';

import { RECORD_PATIENCE_MS } from './jobs.js';
import { sortAttempts } from './outcomes.js';
import type { Sender } from './sender.js';
import * as store from './store.js';
import type { VapidKeyCache } from './vapid.js';

export interface RetryWorkerDeps {
  pool: Pool;
  sender: Sender;
  vapidKeys: VapidKeyCache;
  logger: Logger;
  maxAttempts: number;
  pollMs: number;
  /** The longest one push may take; a claim's lease is comfortably longer. */
  pushTimeoutMs: number;
}

const BATCH = 200;

/**
 * Sends due retries on @herald/workloop: a batch is leased (replicas share the work and never
 * wait on each other's locks), pushed with no transaction open, then each retry is delivered,
 * rescheduled, or after the last attempt failed and dead-lettered, in one transaction per
 * notification that applies only what this worker still holds. A worker that dies mid-batch
 * leaves its retries to another after the lease; the push service sees the same Topic again, so a
 * repeated push replaces rather than duplicates an undelivered one.
 */
export function startRetryWorker({ pool, sender, vapidKeys, logger, maxAttempts, pollMs, pushTimeoutMs }: RetryWorkerDeps): WorkLoop {
  const sendNotification = async (notificationId: string, rows: store.RetryRow[], token: string): Promise<void> => {
    const first = rows[0] as store.RetryRow;
    const push: store.PushContext = {
      notificationId,
      workspaceId: first.workspace_id,
      siteId: first.site_id,
      payload: first.payload,
      ttlSeconds: first.ttl_seconds,
      urgency: first.urgency,
      topic: first.topic,
    };
    const vapid = await vapidKeys.get(first.site_id);
    const recipients: store.Recipient[] = rows.map((row) => ({
      subscriberId: row.subscriber_id,
      endpoint: row.endpoint,
      p256dh: row.p256dh,
      auth: row.auth,
      attemptsBefore: row.attempts,
      // Each row keeps the payload its recipient was first sent (personalized or not).
      payload: row.payload,
    }));
    const attempts = await Promise.all(
      recipients.map((recipient) => sender.attempt({ ...push, ...recipient }, vapid)),
    );
    const sorted = sortAttempts(recipients, attempts, maxAttempts);
    await retryWhileUnreachable(() => withTransaction(pool, async (tx) => {
      const held = await store.stillClaimed(tx, notificationId, recipients.map((recipient) => recipient.subscriberId), token);
      const mine = <T extends { subscriberId: string }>(list: T[]) => list.filter((item) => held.has(item.subscriberId));
      const finals = mine(sorted.finals);
      await store.deleteRetries(tx, notificationId, finals.map((final) => final.subscriberId), token);
      const again = mine(sorted.again);
      await store.recordOutcomes(tx, notificationId, store.outcomesOf(finals, again), null);
      await store.scheduleRetries(tx, push, again, token);
      await store.enqueueResult(tx, notificationId, push.workspaceId, finals);
      await store.enqueueDeadLetters(tx, push, recipients, mine(sorted.exhausted));
    }), RECORD_PATIENCE_MS);
  };

  return startWorkLoop<store.RetryRow>({
    name: 'push retries',
    pool,
    logger,
    table: store.DUE_RETRIES,
    leaseMs: pushTimeoutMs * 2 + 30_000,
    batchSize: BATCH,
    concurrency: BATCH * 2,
    pollMs,
    channel: store.RETRIES_CHANNEL,
    work: async (rows, token) => {
      const byNotification = new Map<string, store.RetryRow[]>();
      for (const row of rows) byNotification.set(row.notification_id, [...(byNotification.get(row.notification_id) ?? []), row]);
      await Promise.all(
        [...byNotification].map(([notificationId, list]) =>
          sendNotification(notificationId, list, token).catch((err: unknown) => logger.warn({ err, notificationId }, 'retries not recorded; they are sent again after their lease')),
        ),
      );
    },
  });
}
