import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';

import { topics } from '@herald/bus';
import type { PromiseClient } from '@herald/grpc';
import type { AudienceServiceClient } from '@herald/proto/herald/audience/v1/audience';
import { AccountEvent } from '@herald/proto/herald/account/v1/events';
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

test("a MemberRemoved deletes that member's devices in its workspace once, however often it is delivered", async () => {
  const { workspaceId, siteId } = workspace();
  const elsewhere = workspace();
  const device = (where: { workspaceId: string; siteId: string }, memberId: string) =>
    client.subscribe({ ...where, ...pushSubscription(), externalId: '', tags: [], browser: '', os: '', language: '', timezone: '', country: '', externalIdVerified: false, memberId });
  const [phone, laptop, bobs, carols, audience] = [
    await device({ workspaceId, siteId }, 'mem_alice'),
    await device({ workspaceId, siteId }, 'mem_alice'),
    await device({ workspaceId, siteId }, 'mem_bob'),
    await device({ workspaceId, siteId }, 'mem_carol'),
    await device({ workspaceId, siteId }, ''),
  ];
  // The same member id in another workspace: not the removed member's device.
  const foreign = await device(elsewhere, 'mem_alice');
  await eventsFor(workspaceId, 5);

  const accountEvent = (eventId: string, kind: AccountEvent['kind']) => ({
    topic: service.topicPrefix + topics.accountEvents.name,
    // One key: the messages keep their order on one partition.
    messages: [
      {
        key: workspaceId,
        value: Buffer.from(AccountEvent.encode({ eventId, occurredAt: new Date().toISOString(), workspaceId, kind }).finish()),
        headers: { 'herald-event-id': eventId },
      },
    ],
  });
  const removal = randomUUID();
  await producer.send(accountEvent(removal, { $case: 'memberRemoved', value: { memberId: 'mem_alice' } }));
  await producer.send(accountEvent(removal, { $case: 'memberRemoved', value: { memberId: 'mem_alice' } }));
  // Another kind of account event is not this consumer's.
  await producer.send(accountEvent(randomUUID(), { $case: 'keyRevoked', value: { keyId: 'key_1' } }));
  // A later removal: once its event is out, both copies of the first have been handled.
  await producer.send(accountEvent(randomUUID(), { $case: 'memberRemoved', value: { memberId: 'mem_carol' } }));

  const events = (await eventsFor(workspaceId, 8)).slice(5);
  const deleted = (subscriberId: string) => ({ $case: 'unsubscribed', value: { subscriberId, externalId: '', reason: 'deleted' } });
  // Alice's two devices go in one statement, in no particular order.
  const byId = (ids: string[]) => ids.sort().map(deleted);
  const subscriberOf = (event: AudienceEvent | undefined) => (event?.kind?.$case === 'unsubscribed' ? event.kind.value.subscriberId : '');
  assert.deepEqual(
    [...byId(events.slice(0, 2).map(subscriberOf)), events[2]?.kind],
    [...byId([phone.subscriberId, laptop.subscriberId]), deleted(carols.subscriberId)],
  );
  const devicesOf = async (where: { workspaceId: string }, memberId: string) =>
    (await client.listSubscribers({ workspaceId: where.workspaceId, limit: 10, cursor: '', status: '', tags: [], externalId: '', memberId })).subscribers.map((s) => s.id);
  assert.deepEqual(await devicesOf({ workspaceId }, 'mem_alice'), []);
  assert.deepEqual(await devicesOf({ workspaceId }, 'mem_carol'), []);
  assert.deepEqual(await devicesOf({ workspaceId }, 'mem_bob'), [bobs.subscriberId]);
  assert.deepEqual(await devicesOf({ workspaceId }, ''), [audience.subscriberId]);
  assert.deepEqual(await devicesOf(elsewhere, 'mem_alice'), [foreign.subscriberId]);
  await waitForQuiet(service.topicPrefix, [{ group: READER, topics: [topics.audienceEvents] }], { databaseUrl: service.databaseUrl });
  assert.equal(received.filter((event) => event.workspaceId === workspaceId).length, 8);
  const db = await connectDatabase(service.databaseUrl);
  try {
    const { rows } = await db.query(`SELECT consumer FROM audience.processed_events WHERE event_id = $1`, [removal]);
    assert.deepEqual(rows, [{ consumer: 'herald-audience-members' }]);
  } finally {
    await db.end();
  }
});
