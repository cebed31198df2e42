import { consumers, EVENT_ID_HEADER, handleOnce, type Bus, type Subscription } from '@herald/bus';
import type { Pool } from '@herald/db';
import type { Logger } from '@herald/logging';
import { AccountEvent } from '@herald/proto/herald/account/v1/events';

import { deleteMemberDevices, SCHEMA } from './store.js';

const CONSUMER = consumers.audienceMembers;

/**
 * A member removed from their workspace (MemberRemoved on herald.account.events): their devices
 * are deleted as DELETE /me/devices deletes one (Unsubscribed, reason "deleted"), once per event
 * id however often Kafka redelivers it. The topic's other events are not this consumer's.
 */
export function consumeMemberRemovals(bus: Bus, pool: Pool, logger: Logger): Promise<Subscription> {
  return bus.subscribe({
    consumer: CONSUMER,
    handle: async (message) => {
      const event = AccountEvent.decode(message.value);
      if (event.kind?.$case !== 'memberRemoved') return;
      const { memberId } = event.kind.value;
      const eventId = message.headers[EVENT_ID_HEADER] ?? event.eventId;
      await handleOnce(pool, SCHEMA, CONSUMER.group, eventId, async (tx) => {
        const deleted = await deleteMemberDevices(tx, event.workspaceId, memberId);
        logger.debug({ eventId, workspaceId: event.workspaceId, memberId, deleted }, 'deleted the devices of a removed member');
      });
    },
  });
}
