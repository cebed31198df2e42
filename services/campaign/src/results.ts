import { EVENT_ID_HEADER, handleOnce, type IncomingMessage } from '@herald/bus';
import type { Pool } from '@herald/db';
import { DeliveryResult } from '@herald/proto/herald/delivery/v1/delivery';

import { recordCompletions, type Completed } from './metrics.js';
import * as store from './store.js';

/** Folds the fleet's results into each notification's counters and last reported state, once per event. */
export function deliveryResults(pool: Pool) {
  return async (message: IncomingMessage): Promise<void> => {
    const result = DeliveryResult.decode(message.value);
    const eventId = message.headers[EVENT_ID_HEADER] ?? result.eventId;
    let completed: Completed[] = [];
    await handleOnce(pool, store.SCHEMA, 'delivery-results', eventId, async (tx) => {
      completed = await store.applyDeliveryResult(tx, {
        notificationId: result.notificationId,
        delivered: result.delivered,
        failed: result.failed,
        expired: result.expired,
        lastStatusCode: result.lastStatusCode,
        lastOutcome: result.lastOutcome,
        reportedAt: result.reportedAt,
      });
    });
    recordCompletions(completed);
  };
}
