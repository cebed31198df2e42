import { withTransaction, type Pool } from '@herald/db';
import type { Logger } from '@herald/logging';

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
}

const BATCH = 200;

/**
 * Sends due retries. Rows are locked for the batch (SKIP LOCKED, so replicas share the work);
 * each is delivered, rescheduled, or, after the last attempt, failed and dead-lettered, in the
 * same transaction that releases it.
 */
export function startRetryWorker({ pool, sender, vapidKeys, logger, maxAttempts, pollMs }: RetryWorkerDeps): { stop(): Promise<void> } {
  let stopping = false;
  let timer: NodeJS.Timeout | undefined;
  let wake: (() => void) | undefined;

  const runBatch = async (): Promise<number> =>
    withTransaction(pool, async (tx) => {
      const due = await store.lockDueRetries(tx, BATCH);
      const byNotification = new Map<string, store.RetryRow[]>();
      for (const row of due) byNotification.set(row.notification_id, [...(byNotification.get(row.notification_id) ?? []), row]);
      for (const [notificationId, rows] of byNotification) {
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
        }));
        const attempts = await Promise.all(
          recipients.map((recipient) =>
            sender.attempt({ ...recipient, payload: first.payload, ttlSeconds: first.ttl_seconds, urgency: first.urgency, topic: first.topic }, vapid),
          ),
        );
        const { finals, exhausted, again } = sortAttempts(recipients, attempts, maxAttempts);
        await store.deleteRetries(tx, notificationId, finals.map((final) => final.subscriberId));
        await store.recordFinal(tx, notificationId, finals);
        await store.scheduleRetries(tx, push, again);
        await store.enqueueResult(tx, notificationId, push.workspaceId, finals);
        await store.enqueueDeadLetters(tx, push, recipients, exhausted);
      }
      return due.length;
    });

  const loop = async (): Promise<void> => {
    while (!stopping) {
      let handled = 0;
      try {
        handled = await runBatch();
      } catch (err) {
        logger.warn({ err }, 'retry batch failed');
      }
      if (handled === BATCH) continue;
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, pollMs);
      });
    }
  };
  const running = loop();
  return {
    async stop() {
      stopping = true;
      if (timer) clearTimeout(timer);
      wake?.();
      await running;
    },
  };
}
