import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';

import { topics } from '@herald/bus';
import type { PromiseClient } from '@herald/grpc';
import type { AudienceServiceClient } from '@herald/proto/herald/audience/v1/audience';
import { AudienceEvent } from '@herald/proto/herald/audience/v1/events';
import { DeliveryResult } from '@herald/proto/herald/delivery/v1/delivery';
import { connectDatabase, pushSubscription, requiredEnv, waitForQuiet } from '@herald/testkit';
import { Kafka, logLevel, type Consumer, type Producer } from 'kafkajs';

import { startAudience, type AudienceService } from './helpers.js';

// The audience service's events on herald.audience.events (through its outbox) and its consumer
// of herald.delivery.results, in a Kafka namespace and a database of its own.

let service: AudienceService;
let client: PromiseClient<AudienceServiceClient>;
let consumer: Consumer;
let producer: Producer;
/** This file's own reader of herald.audience.events. */
const READER = 'test-audience-reader';
const received: AudienceEvent[] = [];

before(async () => {
  service = await startAudience({ ownDatabase: true });
  client = service.client;
  const kafka = new Kafka({ brokers: requiredEnv('KAFKA_BROKERS').split(','), logLevel: logLevel.NOTHING });
  // In the service's namespace, so waitForQuiet can tell when it has read everything.
  consumer = kafka.consumer({ groupId: `${service.topicPrefix}${READER}` });
  await consumer.connect();
  // The topic is this file's own, so reading it from the start misses nothing.
  await consumer.subscribe({ topic: service.topicPrefix + topics.audienceEvents.name, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      if (message.value) received.push(AudienceEvent.decode(message.value));
    },
  });
  producer = kafka.producer();
  await producer.connect();
});

after(async () => {
  await Promise.all([consumer.disconnect(), producer.disconnect()]);
  await service.stop();
});

const workspace = (): { workspaceId: string; siteId: string } => ({ workspaceId: `ws_${randomUUID()}`, siteId: `site_${randomUUID()}` });

async function eventsFor(workspaceId: string, count: number): Promise<AudienceEvent[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const events = received.filter((event) => event.workspaceId === workspaceId);
    if (events.length >= count) return events;
    if (Date.now() > deadline) throw new Error(`expected ${count} events for ${workspaceId}, got ${JSON.stringify(events.map((e) => e.kind))}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test('Subscribed and Unsubscribed reach herald.audience.events in order, once per change', async () => {
  const { workspaceId, siteId } = workspace();
  const push = pushSubscription();
  const subscribe = () => client.subscribe({ workspaceId, siteId, ...push, externalId: 'user-1', tags: [], browser: '', os: '', language: '', timezone: '', country: '', externalIdVerified: false, memberId: '' });

  const first = await subscribe();
  assert.equal(first.created, true);
  // The same endpoint again: no new subscriber and no event.
  assert.deepEqual(await subscribe(), { subscriberId: first.subscriberId, created: false });
  assert.deepEqual(await client.unsubscribe({ workspaceId, endpoint: push.endpoint }), { subscriberId: first.subscriberId });
  // Unsubscribing twice changes nothing more.
  await client.unsubscribe({ workspaceId, endpoint: push.endpoint });
  // Subscribing again reactivates the same subscriber.
  assert.deepEqual(await subscribe(), { subscriberId: first.subscriberId, created: false });
  await client.expireSubscriptions({ workspaceId, subscriberIds: [first.subscriberId], status: 'bounced' });
  await client.deleteSubscriber({ workspaceId, subscriberId: first.subscriberId, memberId: '' });

  const events = await eventsFor(workspaceId, 5);
  const subscriber = { subscriberId: first.subscriberId, externalId: 'user-1' };
  assert.deepEqual(
    events.map((event) => event.kind),
    [
      { $case: 'subscribed', value: subscriber },
      { $case: 'unsubscribed', value: { ...subscriber, reason: 'unsubscribed' } },
      { $case: 'subscribed', value: subscriber },
      { $case: 'unsubscribed', value: { ...subscriber, reason: 'bounced' } },
      { $case: 'unsubscribed', value: { ...subscriber, reason: 'deleted' } },
    ],
  );
  for (const event of events) {
    assert.equal(event.siteId, siteId);
    assert.ok(Date.parse(event.occurredAt) > Date.now() - 60_000);
  }
  assert.equal(new Set(events.map((event) => event.eventId)).size, 5);
  // Every event of the outbox published, and all of them read: a sixth would be here by now.
  await waitForQuiet(service.topicPrefix, [{ group: READER, topics: [topics.audienceEvents] }], { databaseUrl: service.databaseUrl });
  assert.equal(received.filter((event) => event.workspaceId === workspaceId).length, 5);
});

test('a delivery result expires its gone subscribers once, however often it is delivered', async () => {
  const { workspaceId, siteId } = workspace();
  const subscribe = (externalId: string) =>
    client.subscribe({ workspaceId, siteId, ...pushSubscription(), externalId, tags: [], browser: '', os: '', language: '', timezone: '', country: '', externalIdVerified: false, memberId: '' });
  const [gone, kept, later] = [await subscribe('a'), await subscribe('b'), await subscribe('c')];
  await eventsFor(workspaceId, 3);

  const result = (eventId: string, expired: string[]) => ({
    topic: service.topicPrefix + topics.deliveryResults.name,
    // One key: the three messages keep their order on one partition.
    messages: [
      {
        key: 'notification-1',
        value: Buffer.from(
          DeliveryResult.encode({
            eventId,
            notificationId: 'notification-1',
            workspaceId,
            delivered: 1,
            failed: 0,
            expired: expired.length,
            expiredSubscriberIds: expired,
            lastStatusCode: 410,
            lastOutcome: 'expired',
            reportedAt: new Date().toISOString(),
          }).finish(),
        ),
        headers: { 'herald-event-id': eventId },
      },
    ],
  });
  const duplicated = randomUUID();
  await producer.send(result(duplicated, [gone.subscriberId, 'sub_of_nobody']));
  await producer.send(result(duplicated, [gone.subscriberId, 'sub_of_nobody']));
  // A later result: once its event is out, both copies of the first have been handled.
  await producer.send(result(randomUUID(), [later.subscriberId]));

  const events = (await eventsFor(workspaceId, 5)).slice(3);
  assert.deepEqual(
    events.map((event) => event.kind),
    [
      { $case: 'unsubscribed', value: { subscriberId: gone.subscriberId, externalId: 'a', reason: 'expired' } },
      { $case: 'unsubscribed', value: { subscriberId: later.subscriberId, externalId: 'c', reason: 'expired' } },
    ],
  );
  const status = async (subscriberId: string) => (await client.getSubscriber({ workspaceId, subscriberId })).subscriber?.status;
  assert.equal(await status(gone.subscriberId), 'expired');
  assert.equal(await status(kept.subscriberId), 'active');
  assert.equal(await status(later.subscriberId), 'expired');
  const db = await connectDatabase(service.databaseUrl);
  try {
    const { rows } = await db.query(`SELECT consumer FROM audience.processed_events WHERE event_id = $1`, [duplicated]);
    assert.deepEqual(rows, [{ consumer: 'herald-audience' }]);
  } finally {
    await db.end();
  }
});

test('a subscription change moves the subscriber, and a duplicate of the new endpoint is merged away', async () => {
  const { workspaceId, siteId } = workspace();
  const [old, fresh, next] = [pushSubscription(), pushSubscription(), pushSubscription()];
  const subscribe = (push: typeof old, externalId: string, tags: string[], externalIdVerified = false) =>
    client.subscribe({ workspaceId, siteId, ...push, externalId, tags, browser: 'Firefox', os: '', language: '', timezone: '', country: '', externalIdVerified, memberId: '' });
  // A proven external id: the move keeps it verified (the same browser, a new endpoint).
  const original = await subscribe(old, 'user-1', ['vip'], true);
  // The page subscribed the replacement before the change arrived.
  const duplicate = await subscribe(fresh, '', ['news']);
  const changed = await client.changeSubscription({ workspaceId, siteId, oldEndpoint: old.endpoint, endpoint: fresh.endpoint, keys: fresh.keys });
  assert.deepEqual(changed, { subscriberId: original.subscriberId });
  const { subscriber } = await client.getSubscriber({ workspaceId, subscriberId: original.subscriberId });
  assert.equal(subscriber?.status, 'active');
  assert.deepEqual(subscriber?.tags, ['vip', 'news']);
  assert.equal(subscriber?.externalId, 'user-1');
  assert.equal(subscriber?.externalIdVerified, true);
  await assert.rejects(client.getSubscriber({ workspaceId, subscriberId: duplicate.subscriberId }), { code: 'not_found' });
  // The new endpoint now belongs to the original subscriber; the old one is unknown. Subscribing
  // again without an external id keeps the proven one; with an unproven one it is no longer verified.
  assert.deepEqual(await subscribe(fresh, '', []), { subscriberId: original.subscriberId, created: false });
  assert.equal((await client.getSubscriber({ workspaceId, subscriberId: original.subscriberId })).subscriber?.externalIdVerified, true);
  await subscribe(fresh, 'user-1', []);
  assert.equal((await client.getSubscriber({ workspaceId, subscriberId: original.subscriberId })).subscriber?.externalIdVerified, false);
  await assert.rejects(client.changeSubscription({ workspaceId, siteId, oldEndpoint: old.endpoint, endpoint: next.endpoint, keys: next.keys }), {
    code: 'not_found',
  });

  const events = await eventsFor(workspaceId, 3);
  assert.deepEqual(
    events.map((event) => event.kind),
    [
      { $case: 'subscribed', value: { subscriberId: original.subscriberId, externalId: 'user-1' } },
      { $case: 'subscribed', value: { subscriberId: duplicate.subscriberId, externalId: '' } },
      { $case: 'unsubscribed', value: { subscriberId: duplicate.subscriberId, externalId: '', reason: 'deleted' } },
    ],
  );
});
