import { EVENT_ID_HEADER, handleOnce, type IncomingMessage } from '@herald/bus';
import type { Pool } from '@herald/db';
import { EngagementEvent } from '@herald/proto/herald/engagement/v1/events';

import * as store from './store.js';

/**
 * Folds the service workers' reports into each campaign's counters. The event id is the same for
 * every report of one (notification, subscriber, kind), so each is counted once however often the
 * browser retried it or Kafka redelivered it.
 */
export function engagementEvents(pool: Pool) {
  return async (message: IncomingMessage): Promise<void> => {
    const event = EngagementEvent.decode(message.value);
    const eventId = message.headers[EVENT_ID_HEADER] ?? event.eventId;
    await handleOnce(pool, store.SCHEMA, 'engagement', eventId, (tx) => store.countEngagement(tx, event.workspaceId, event.notificationId, event.kind, event.occurredAt));
  };
}
