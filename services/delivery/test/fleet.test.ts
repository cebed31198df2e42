import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';

import { consumers, topics } from '@herald/bus';
import { AudienceEvent } from '@herald/proto/herald/audience/v1/events';
import { DeliveryJob } from '@herald/proto/herald/delivery/v1/delivery';
import { call, eventually, requiredEnv, seedAudience, SERVER_API, startSendingHarness, waitForConsumed, type Audience, type SendingHarness } from '@herald/testkit';
import { Kafka, logLevel, type Consumer } from 'kafkajs';

// The delivery fleet through Herald's public surfaces: what the push service answers decides
// each recipient's fate (delivered, expired, failed, retried with backoff, dead-lettered), a
// redelivered batch never pushes twice, and a worker killed mid-batch loses nothing.

let harness: SendingHarness;
const kafka = new Kafka({ clientId: 'fleet-test', brokers: requiredEnv('KAFKA_BROKERS').split(','), logLevel: logLevel.NOTHING });
const readers: Consumer[] = [];

before(async () => {
  harness = await startSendingHarness({ deliveryEnv: { PUSH_MAX_ATTEMPTS: '3', PUSH_RETRY_BASE_MS: '100' } });
});
after(async () => {
  await Promise.all(readers.map((reader) => reader.disconnect()));
  await harness.stop();
});

/** The list's entry, which the test requires to exist. */
function at<T>(list: T[], index: number): T {
  const entry = list[index];
  assert.ok(entry !== undefined, `no entry ${index}`);
  return entry;
}

/** Everything that arrives on one of the stack's topics from now on. */
async function record(topic: string): Promise<Array<{ key: string; value: Buffer; headers: Record<string, string> }>> {
  const seen: Array<{ key: string; value: Buffer; headers: Record<string, string> }> = [];
  const consumer = kafka.consumer({ groupId: `fleet-test-${randomUUID()}` });
  readers.push(consumer);
  await consumer.connect();
  await consumer.subscribe({ topic: harness.stack.topicPrefix + topic, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      const headers = Object.fromEntries(Object.entries(message.headers ?? {}).map(([name, value]) => [name, String(value)]));
      seen.push({ key: message.key?.toString() ?? '', value: message.value ?? Buffer.alloc(0), headers });
    },
  });
  return seen;
}

/**
 * The first delivery job of a send, as the fan-out made it (same id and key), with real keys:
 * were a replay of it not recognised, its pushes would reach the peer.
 */
function firstJobOf(campaignId: string, audience: Audience): { key: string; value: Buffer } {
  const jobId = `${campaignId}:0`;
  const job = DeliveryJob.encode({
    jobId,
    notificationId: campaignId,
    workspaceId: audience.workspace.workspaceId,
    siteId: audience.workspace.siteId,
    payload: Buffer.from('{}'),
    ttlSeconds: 60,
    urgency: 'normal',
    topic: 'replayed',
    targets: audience.subscribers.map((subscriber) => ({ subscriberId: subscriber.id, endpoint: subscriber.endpoint, ...subscriber.keys, externalId: '', customDataJson: '' })),
    personalized: false,
  }).finish();
  return { key: jobId, value: Buffer.from(job) };
}

async function sendAndSettle(apiKey: string, body: Record<string, unknown>) {
  const sent = await call<{ campaignId: string; sent: number }>(harness.stack.gatewayUrl, `${SERVER_API}/send`, { method: 'POST', key: apiKey, body });
  assert.equal(sent.status, 200, JSON.stringify(sent.body));
  const settled = await eventually(
    'notification completed',
    () => call<{ status: string; counts: Record<string, number> }>(harness.stack.gatewayUrl, `${SERVER_API}/notifications/${sent.body.campaignId}`, { key: apiKey }),
    (reply) => reply.body.status === 'completed',
    30_000,
  );
  return { campaignId: sent.body.campaignId, sent: sent.body.sent, counts: settled.body.counts };
}

test('404 and 410 expire the subscriber, emit an unsubscription, and it is never sent to again', async () => {
  const events = await record(topics.audienceEvents.name);
  const audience = await seedAudience(harness, 3);
  const [gone, missing, kept] = [at(audience.subscribers, 0), at(audience.subscribers, 1), at(audience.subscribers, 2)];
  harness.peer.respondWith(gone.endpoint, { status: 410 });
  harness.peer.respondWith(missing.endpoint, { status: 404 });
  const first = await sendAndSettle(audience.workspace.apiKey, { title: 'a', body: 'b' });
  assert.deepEqual(first.counts, { targeted: 3, queued: 3, delivered: 1, failed: 0, expired: 2, pending: 0 });
  for (const subscriber of [gone, missing]) {
    const read = await eventually(
      'expired',
      () => call<{ status: string }>(harness.stack.gatewayUrl, `${SERVER_API}/subscribers/${subscriber.id}`, { key: audience.workspace.apiKey }),
      (reply) => reply.body.status === 'expired',
    );
    assert.equal(read.status, 200);
  }
  const unsubscribed = await eventually(
    'two unsubscription events',
    async () =>
      events
        .map((event) => AudienceEvent.decode(event.value))
        .filter((event) => event.workspaceId === audience.workspace.workspaceId && event.kind?.$case === 'unsubscribed'),
    (list) => list.length >= 2,
  );
  assert.deepEqual(
    unsubscribed.map((event) => (event.kind?.$case === 'unsubscribed' ? [event.kind.value.subscriberId, event.kind.value.reason] : [])).sort(),
    [[gone.id, 'expired'], [missing.id, 'expired']].sort(),
  );
  const second = await sendAndSettle(audience.workspace.apiKey, { title: 'again', body: 'b' });
  assert.equal(second.sent, 1);
  assert.equal(harness.peer.attemptCount(gone.endpoint), 1);
  assert.equal(harness.peer.attemptCount(missing.endpoint), 1);
  assert.equal(harness.peer.attemptCount(kept.endpoint), 2);
});

test('429 is retried after its Retry-After, then delivered', async () => {
  const audience = await seedAudience(harness, 1);
  const subscriber = at(audience.subscribers, 0);
  harness.peer.respondWith(subscriber.endpoint, { status: 429, retryAfter: 1, times: 1 });
  const result = await sendAndSettle(audience.workspace.apiKey, { title: 'slow down', body: 'b' });
  assert.deepEqual(result.counts, { targeted: 1, queued: 1, delivered: 1, failed: 0, expired: 0, pending: 0 });
  const attempts = harness.peer.attempts(subscriber.endpoint);
  assert.deepEqual(attempts.map((attempt) => attempt.status), [429, 201]);
  const gap = at(attempts, 1).at - at(attempts, 0).at;
  assert.ok(gap >= 1_000, `retried after ${gap} ms`);
});

test('5xx is retried with backoff; after the last attempt the push is failed and dead-lettered', async () => {
  const deadLetters = await record(topics.deliveryJobs.deadLetter);
  const audience = await seedAudience(harness, 1);
  const subscriber = at(audience.subscribers, 0);
  harness.peer.respondWith(subscriber.endpoint, { status: 500 });
  const result = await sendAndSettle(audience.workspace.apiKey, { title: 'doomed', body: 'b' });
  assert.deepEqual(result.counts, { targeted: 1, queued: 1, delivered: 0, failed: 1, expired: 0, pending: 0 });
  assert.deepEqual(harness.peer.attempts(subscriber.endpoint).map((attempt) => attempt.status), [500, 500, 500]);
  const letters = await eventually(
    'a dead letter',
    async () => deadLetters.filter((letter) => letter.key === result.campaignId),
    (list) => list.length >= 1,
  );
  assert.equal(letters.length, 1);
  const letter = at(letters, 0);
  // The dead letter is a job of that one recipient, as the fleet would take it again; the outcome is in the headers.
  const parked = DeliveryJob.decode(letter.value);
  assert.deepEqual(
    { jobId: parked.jobId, notificationId: parked.notificationId, workspaceId: parked.workspaceId, siteId: parked.siteId, targets: parked.targets, personalized: parked.personalized },
    {
      jobId: `${result.campaignId}:${subscriber.id}`,
      notificationId: result.campaignId,
      workspaceId: audience.workspace.workspaceId,
      siteId: audience.workspace.siteId,
      targets: [{ subscriberId: subscriber.id, endpoint: subscriber.endpoint, ...subscriber.keys, externalId: '', customDataJson: '' }],
      personalized: false,
    },
  );
  assert.equal(letter.headers['herald-dlq-source'], 'delivery');
  assert.equal(letter.headers['herald-dlq-reason'], 'push failed after 3 attempts (last status 500)');
  const recipients = await call<{ data: unknown[] }>(harness.stack.gatewayUrl, `${SERVER_API}/notifications/${result.campaignId}/recipients`, {
    key: audience.workspace.apiKey,
  });
  assert.deepEqual(recipients.body.data, [
    { subscriberId: subscriber.id, status: 'failed', attempts: 3, lastStatusCode: 500, updatedAt: (recipients.body.data[0] as { updatedAt: string }).updatedAt },
  ]);
});

test('400 and 413 fail at once, without retrying', async () => {
  const audience = await seedAudience(harness, 2);
  const [bad, large] = [at(audience.subscribers, 0), at(audience.subscribers, 1)];
  harness.peer.respondWith(bad.endpoint, { status: 400 });
  harness.peer.respondWith(large.endpoint, { status: 413 });
  const result = await sendAndSettle(audience.workspace.apiKey, { title: 'no', body: 'b' });
  assert.deepEqual(result.counts, { targeted: 2, queued: 2, delivered: 0, failed: 2, expired: 0, pending: 0 });
  assert.equal(harness.peer.attemptCount(bad.endpoint), 1);
  assert.equal(harness.peer.attemptCount(large.endpoint), 1);
});

test('a delivery job delivered twice never pushes twice', async () => {
  const audience = await seedAudience(harness, 2);
  const result = await sendAndSettle(audience.workspace.apiKey, { title: 'once', body: 'b' });
  const producer = kafka.producer();
  await producer.connect();
  let replayed: { partition: number; offset: string };
  try {
    // The very job again, keyed as the fan-out keys it (so on the partition the original took).
    const [metadata] = await producer.send({ topic: harness.stack.topicPrefix + topics.deliveryJobs.name, messages: [firstJobOf(result.campaignId, audience)] });
    assert.ok(metadata?.baseOffset !== undefined);
    replayed = { partition: metadata.partition, offset: metadata.baseOffset };
  } finally {
    await producer.disconnect();
  }
  // The fleet has handled the replay once its group's committed offset is past it.
  await waitForConsumed(harness.stack.topicPrefix, consumers.delivery.group, topics.deliveryJobs.name, replayed);
  for (const subscriber of audience.subscribers) assert.equal(harness.peer.attemptCount(subscriber.endpoint), 1);
});

test('a job handled again while its first worker is still pushing waits for that worker instead of pushing over it', async () => {
  const audience = await seedAudience(harness, 3);
  // A second worker in the group: the partitions it holds are worked while the first one is busy.
  const second = await harness.stack.startService('delivery');
  await eventually('the second worker in the group', async () => second.output().includes('consumer joined its group'), Boolean, 30_000);
  harness.peer.respondWith({ delayMs: 2_000 });
  const sent = await call<{ campaignId: string }>(harness.stack.gatewayUrl, `${SERVER_API}/send`, { method: 'POST', key: audience.workspace.apiKey, body: { title: 'slow', body: 'b' } });
  assert.equal(sent.status, 200);
  await eventually('pushes in flight', async () => audience.subscribers.filter((s) => harness.peer.attemptCount(s.endpoint) > 0).length, (n) => n === 3);
  // The same job, as a rebalance would hand it to a second worker: put on every partition, so the
  // ones the first worker is not on take it concurrently, while it still waits on the pushes.
  const topic = harness.stack.topicPrefix + topics.deliveryJobs.name;
  const admin = kafka.admin();
  await admin.connect();
  const partitions = (await admin.fetchTopicOffsets(topic)).map((offsets) => offsets.partition);
  await admin.disconnect();
  const producer = kafka.producer();
  await producer.connect();
  let replayed: Array<{ partition: number; offset: string }>;
  try {
    const written = await producer.send({ topic, messages: partitions.map((partition) => ({ partition, ...firstJobOf(sent.body.campaignId, audience) })) });
    replayed = written.map((metadata) => ({ partition: metadata.partition, offset: metadata.baseOffset ?? '' }));
  } finally {
    await producer.disconnect();
  }
  assert.equal(replayed.length, partitions.length);
  for (const at of replayed) await waitForConsumed(harness.stack.topicPrefix, consumers.delivery.group, topics.deliveryJobs.name, at, 60_000);
  harness.peer.respondWith(null);
  await second.stop();
  for (const subscriber of audience.subscribers) assert.equal(harness.peer.attemptCount(subscriber.endpoint), 1, subscriber.endpoint);
  const settled = await call<{ counts: Record<string, number> }>(harness.stack.gatewayUrl, `${SERVER_API}/notifications/${sent.body.campaignId}`, { key: audience.workspace.apiKey });
  assert.deepEqual(settled.body.counts, { targeted: 3, queued: 3, delivered: 3, failed: 0, expired: 0, pending: 0 });
});

test('a delivery worker killed mid-batch: every subscription ends with exactly one accepted push', async () => {
  const audience = await seedAudience(harness, 20);
  // Slow answers keep the batch in flight long enough to kill the worker inside it.
  harness.peer.respondWith({ delayMs: 1_500 });
  const sent = await call<{ campaignId: string }>(harness.stack.gatewayUrl, `${SERVER_API}/send`, {
    method: 'POST',
    key: audience.workspace.apiKey,
    body: { title: 'survive', body: 'b' },
  });
  assert.equal(sent.status, 200);
  await eventually('pushes in flight', async () => audience.subscribers.filter((s) => harness.peer.attemptCount(s.endpoint) > 0).length, (n) => n > 0);
  const worker = harness.stack.services.find((service) => service.output().includes('delivery service serving') && service.child.exitCode === null);
  assert.ok(worker);
  worker.child.kill('SIGKILL');
  await worker.exited;
  harness.peer.respondWith(null);
  await harness.stack.startService('delivery');
  const settled = await eventually(
    'completed after the restart',
    () => call<{ status: string; counts: Record<string, number> }>(harness.stack.gatewayUrl, `${SERVER_API}/notifications/${sent.body.campaignId}`, { key: audience.workspace.apiKey }),
    (reply) => reply.body.status === 'completed',
    60_000,
  );
  assert.deepEqual(settled.body.counts, { targeted: 20, queued: 20, delivered: 20, failed: 0, expired: 0, pending: 0 });
  for (const subscriber of audience.subscribers) {
    // A push that was accepted before the kill and sent again carries the same Topic, so the
    // push service replaces it (RFC 8030 section 5.4): one push per subscription.
    assert.equal(harness.peer.received(subscriber.endpoint).length, 1, subscriber.endpoint);
  }
});
