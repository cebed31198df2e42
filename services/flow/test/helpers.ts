import assert from 'node:assert/strict';

import { createKafkaBus, EVENT_ID_HEADER, topics } from '@herald/bus';
import { createLogger } from '@herald/logging';
import { AudienceEvent } from '@herald/proto/herald/audience/v1/events';
import { call, infrastructureEnv, SERVER_API, type Audience, type SendingHarness, type Subscribed } from '@herald/testkit';

/** What the flow test files share: steps as a caller writes them, the /flows API, the peer's titles, audience events. */

export type Step = { stepType: string; config: Record<string, unknown> };
export const send = (title: string): Step => ({ stepType: 'send_notification', config: { notification: { title, body: `${title} body` } } });
export const delay = (seconds: number): Step => ({ stepType: 'delay', config: { delay: { value: seconds, unit: 'seconds' } } });
export const exit: Step = { stepType: 'exit', config: {} };

export interface FlowRecord {
  id: string;
  status: string;
  executionCount: number;
}
export interface RunRecord {
  id: string;
  flowId: string;
  subscriberId: string;
  triggerType: string;
  triggerEventId: string;
  state: string;
  currentStep: number | null;
  nextWakeUpAt: string | null;
  endReason: string | null;
  notificationIds: string[];
  finishedAt: string | null;
}

/** The server API of the harness's gateway, as the audience's workspace (the harness is started in a `before`). */
export function flowApi(harnessOf: () => SendingHarness) {
  const api = <T>(audience: Audience, path: string, options: { method?: string; body?: unknown } = {}) =>
    call<T & Record<string, unknown>>(harnessOf().stack.gatewayUrl, `${SERVER_API}${path}`, { key: audience.workspace.apiKey, ...options });
  return {
    api,
    /** A flow created (and, unless told otherwise, activated) in the audience's workspace. */
    async createFlow(audience: Audience, steps: Step[], { triggerType = 'subscription', activate = true } = {}): Promise<FlowRecord> {
      const created = await api<FlowRecord>(audience, '/flows', { method: 'POST', body: { name: 'Welcome', triggerType, steps } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      if (!activate) return created.body;
      const activated = await api<FlowRecord>(audience, `/flows/${created.body.id}/activate`, { method: 'POST' });
      assert.equal(activated.body.status, 'active');
      return activated.body;
    },
    runsOf: async (audience: Audience, flowId: string): Promise<RunRecord[]> => (await api<{ data: RunRecord[] }>(audience, `/flows/${flowId}/runs?limit=100`)).body.data,
    flowOf: async (audience: Audience, flowId: string): Promise<FlowRecord> => (await api<FlowRecord>(audience, `/flows/${flowId}`)).body,
    /** Titles the strict peer accepted for this browser, in arrival order. */
    titlesTo: (subscriber: Subscribed): string[] =>
      harnessOf().peer.received(subscriber.endpoint).map((message) => (JSON.parse(message.plaintext.toString()) as { title: string }).title),
  };
}

/** Publishes audience `subscribed` events to the stack's topic, as the audience service's relay does (same key: the workspace). */
export async function publishSubscribed(harness: SendingHarness, audience: Audience, events: Array<{ eventId: string; subscriberId: string }>): Promise<void> {
  const bus = createKafkaBus({ brokers: (infrastructureEnv().KAFKA_BROKERS ?? '').split(','), clientId: 'flow-test', logger: createLogger('flow-test'), topicPrefix: harness.stack.topicPrefix });
  try {
    await bus.publish(
      events.map(({ eventId, subscriberId }) => ({
        topic: topics.audienceEvents.name,
        key: audience.workspace.workspaceId,
        headers: { [EVENT_ID_HEADER]: eventId },
        value: Buffer.from(
          AudienceEvent.encode({
            eventId,
            occurredAt: new Date().toISOString(),
            workspaceId: audience.workspace.workspaceId,
            siteId: '',
            kind: { $case: 'subscribed', value: { subscriberId, externalId: '' } },
          }).finish(),
        ),
      })),
    );
  } finally {
    await bus.close();
  }
}
