import { EVENT_ID_HEADER, handleOnce, type IncomingMessage } from '@herald/bus';
import type { Pool } from '@herald/db';
import type { Logger } from '@herald/logging';
import { AudienceEvent } from '@herald/proto/herald/audience/v1/events';
import { EngagementEvent } from '@herald/proto/herald/engagement/v1/events';

import * as store from './store.js';

/**
 * Audience events start runs: a subscription starts the active `subscription` flows of the
 * workspace for that subscriber; an unsubscription (or an expiry, a bounce, a deletion) first ends
 * the subscriber's runs in flight (no further sends), then starts the `unsubscription` flows. Each
 * event has its effect once (`handleOnce` by event id), and a run once per (flow, subscriber, event).
 */
export function audienceTriggers(pool: Pool, logger: Logger) {
  return async (message: IncomingMessage): Promise<void> => {
    const event = AudienceEvent.decode(message.value);
    const eventId = message.headers[EVENT_ID_HEADER] ?? event.eventId;
    const { workspaceId } = event;
    await handleOnce(pool, store.SCHEMA, 'audience-triggers', eventId, async (tx) => {
      const kind = event.kind;
      if (kind?.$case === 'subscribed') {
        const { subscriberId } = kind.value;
        const started = await store.startRuns(tx, { workspaceId, triggerType: 'subscription', subscriberId, eventId });
        if (started > 0) logger.info({ workspaceId, subscriberId, started }, 'subscription started flow runs');
      } else if (kind?.$case === 'unsubscribed') {
        const { subscriberId, reason } = kind.value;
        const cancelled = await store.cancelRuns(tx, workspaceId, subscriberId, `the subscriber left (${reason || 'unsubscribed'})`);
        const started = await store.startRuns(tx, { workspaceId, triggerType: 'unsubscription', subscriberId, eventId });
        if (cancelled + started > 0) logger.info({ workspaceId, subscriberId, cancelled, started }, 'unsubscription ended and started flow runs');
      }
    });
  };
}

const ENGAGEMENT_TRIGGERS: Readonly<Record<string, store.TriggerType>> = {
  impression: 'notification_impression',
  click: 'notification_click',
  dismiss: 'notification_dismiss',
};

/**
 * Engagement events start runs: an impression, click or dismiss of a push starts the active flows
 * with that trigger, those limited to a campaign only for that campaign's pushes (a campaign's
 * pushes carry its id as their notification id). A report repeated by the browser has the same
 * event id, so it starts nothing more.
 */
export function engagementTriggers(pool: Pool, logger: Logger) {
  return async (message: IncomingMessage): Promise<void> => {
    const event = EngagementEvent.decode(message.value);
    const triggerType = ENGAGEMENT_TRIGGERS[event.kind];
    if (!triggerType) return;
    const eventId = message.headers[EVENT_ID_HEADER] ?? event.eventId;
    const { workspaceId, subscriberId, notificationId } = event;
    await handleOnce(pool, store.SCHEMA, 'engagement-triggers', eventId, async (tx) => {
      const started = await store.startRuns(tx, { workspaceId, triggerType, subscriberId, eventId, campaignId: notificationId });
      if (started > 0) logger.info({ workspaceId, subscriberId, notificationId, triggerType, started }, 'engagement started flow runs');
    });
  };
}
