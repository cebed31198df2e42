import { consumers, EVENT_ID_HEADER, handleOnce, type Bus, type Subscription } from '@herald/bus';
import type { Pool } from '@herald/db';
import type { Logger } from '@herald/logging';
import { DeliveryResult } from '@herald/proto/herald/delivery/v1/delivery';

import { expireSubscribers, SCHEMA } from './store.js';

const CONSUMER = consumers.audienceExpiry;

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Push services answered 404/410 for some subscriptions of a notification: those subscribers
 * expire exactly as ExpireSubscriptions does (status `expired`, Unsubscribed reason "expired"),
 * once per event id however often Kafka redelivers the result.
 */
export function consumeDeliveryResults(bus: Bus, pool: Pool, logger: Logger): Promise<Subscription> {
  return bus.subscribe({
    consumer: CONSUMER,
    handle: async (message) => {
      const result = DeliveryResult.decode(message.value);
      if (result.expiredSubscriberIds.length === 0) return;
      const eventId = message.headers[EVENT_ID_HEADER] ?? result.eventId;
      // Thrown, so after the retries the message is parked on the dead-letter topic.
      if (!uuidPattern.test(eventId)) throw new Error(`delivery result without a valid ${EVENT_ID_HEADER} (${JSON.stringify(eventId)})`);
      await handleOnce(pool, SCHEMA, CONSUMER.group, eventId, async (tx) => {
        const changed = await expireSubscribers(tx, result.workspaceId, result.expiredSubscriberIds, 'expired');
        logger.debug({ eventId, workspaceId: result.workspaceId, changed }, 'expired subscriptions from a delivery result');
      });
    },
  });
}
