import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { topics } from '@herald/bus';
import { AudienceEvent } from '@herald/proto/herald/audience/v1/events';
import {
  call,
  createWorkspace,
  eventually,
  infraComponent as infra,
  metricValue,
  requiredEnv,
  samplesOf,
  scrapeMetrics,
  seedAudience,
  SERVER_API,
  startSendingHarness,
  type Audience,
  type InfraComponent,
  type RunningProcess,
  type SendingHarness,
} from '@herald/testkit';
import { Kafka, logLevel, type Consumer } from 'kafkajs';

// PostgreSQL, Redis and Kafka restarted in turn (deploy/infra.sh, as an operator would) while a
// small load runs: sends, subscriptions, and a caller waiting on a question. Every Herald process
// keeps running; while a server is down, what needs it answers 503 `unavailable` within the
// deadline and nothing else fails; once it is back the API serves again within seconds; every
// accepted send is delivered to each recipient exactly once and every accepted subscription is
// announced exactly once. This file stops the shared servers, so scripts/test.sh runs it alone,
// after every other test file (*.disruptive.test.js).

let harness: SendingHarness;
let audience: Audience;
let reader: Consumer;
/** Subscribed events read from the stack's herald.audience.events, by subscriber id. */
const announced = new Map<string, number>();

interface Outcome {
  what: 'send' | 'subscribe';
  status: number;
  code: string | undefined;
  ms: number;
  /** The campaign or subscriber id of an accepted request. */
  id: string | undefined;
}
const outcomes: Outcome[] = [];

before(async () => {
  harness = await startSendingHarness({ decisions: true });
  audience = await seedAudience(harness, 3);
  const kafka = new Kafka({ clientId: 'restart-test', brokers: requiredEnv('KAFKA_BROKERS').split(','), logLevel: logLevel.NOTHING });
  reader = kafka.consumer({ groupId: `${harness.stack.topicPrefix}restart-test-reader` });
  await reader.connect();
  await reader.subscribe({ topic: harness.stack.topicPrefix + topics.audienceEvents.name, fromBeginning: true });
  await reader.run({
    eachMessage: async ({ message }) => {
      const event = AudienceEvent.decode(message.value ?? Buffer.alloc(0));
      if (event.kind?.$case === 'subscribed') announced.set(event.kind.value.subscriberId, (announced.get(event.kind.value.subscriberId) ?? 0) + 1);
    },
  });
});
after(async () => {
  await reader?.disconnect().catch(() => undefined);
  await harness?.stop();
});

async function timed(what: Outcome['what'], request: () => Promise<{ status: number; body: Record<string, unknown> }>, idOf: (body: Record<string, unknown>) => unknown): Promise<void> {
  const started = Date.now();
  const { status, body } = await request();
  const accepted = status === 200 || status === 201;
  outcomes.push({ what, status, code: (body.code as string | undefined) ?? undefined, ms: Date.now() - started, id: accepted ? String(idOf(body)) : undefined });
}

/** A send and a new subscription every 200 ms until stopped (at most 600 rounds). */
function startLoad(): { stop(): Promise<void> } {
  let running = true;
  const done = (async () => {
    for (let round = 0; running && round < 600; round += 1) {
      const subscription = harness.peer.createSubscription({ applicationServerKey: audience.vapidPublicKey });
      await Promise.all([
        timed(
          'send',
          () => call(harness.stack.gatewayUrl, `${SERVER_API}/send`, { method: 'POST', key: audience.workspace.apiKey, body: { title: `round ${round}`, body: 'load' } }),
          (body) => body.campaignId,
        ),
        timed(
          'subscribe',
          () =>
            call(harness.stack.gatewayUrl, '/api/v1/subscribe', {
              method: 'POST',
              key: audience.workspace.siteKey,
              headers: { origin: 'https://shop.example.test' },
              body: { endpoint: subscription.endpoint, keys: subscription.keys, externalId: `load-${round}`, tags: [] },
            }),
          (body) => body.subscriberId,
        ),
      ]);
      await sleep(200);
    }
  })();
  return {
    async stop() {
      running = false;
      await done;
    },
  };
}

function assertEveryProcessRunning(): void {
  for (const running of [...harness.stack.gateways, ...harness.stack.services]) {
    assert.equal(running.child.exitCode, null, `a process exited:\n${running.output().slice(-2_000)}`);
    assert.equal(running.child.signalCode, null);
  }
}

/** Each accepted send completes with every recipient delivered, and the push service got each recipient's push once. */
async function assertSentExactlyOnce(campaignIds: string[]): Promise<void> {
  for (const campaignId of campaignIds) {
    const settled = await eventually(
      `${campaignId} completed`,
      () => call<{ status: string; counts: Record<string, number> }>(harness.stack.gatewayUrl, `${SERVER_API}/notifications/${campaignId}`, { key: audience.workspace.apiKey }),
      (reply) => reply.status === 200 && reply.body.status === 'completed',
      120_000,
    );
    // Queued, not targeted: a subscription accepted between the send's count and its fan-out is sent to as well.
    const { queued, delivered } = settled.body.counts as { queued: number; delivered: number };
    assert.equal(delivered, queued, `${campaignId}: ${JSON.stringify(settled.body.counts)}`);
    const endpoints = harness.peer
      .received(undefined, { includeReplaced: true })
      .filter((message) => (JSON.parse(message.plaintext.toString()) as { notificationId: string }).notificationId === campaignId)
      .map((message) => message.endpoint);
    assert.equal(endpoints.length, queued, `${campaignId}: ${endpoints.length} pushes for ${queued} recipients`);
    assert.equal(new Set(endpoints).size, endpoints.length, `${campaignId}: a recipient got it twice`);
  }
}

async function assertAnnouncedExactlyOnce(subscriberIds: string[]): Promise<void> {
  await eventually('every accepted subscription announced', async () => subscriberIds.filter((id) => announced.get(id) !== 1), (missing) => missing.length === 0, 120_000);
  for (const [id, count] of announced) assert.equal(count, 1, `subscriber ${id} announced ${count} times`);
}

/**
 * With the load running: a caller starts waiting on a question, the server stops for 3 s (the
 * question is answered meanwhile unless it needs that server), starts again, and the API is probed
 * until a send is accepted. Returns how long after the start the API and the waiter answered.
 */
async function restartUnderLoad(component: InfraComponent, whileDown: () => Promise<void>): Promise<{ recoveredMs: number; answerMs: number }> {
  await sleep(1_500);
  // A caller waiting on a question across the restart (an ask needs PostgreSQL, so it starts before).
  const { apiKey } = await createWorkspace();
  const asked = await call<{ correlationId: string; liveUrl: string }>(harness.stack.gatewayUrl, `${SERVER_API}/ask`, { method: 'POST', key: apiKey, body: { question: 'Proceed?', wait: false } });
  assert.equal(asked.status, 200, JSON.stringify(asked.body));
  const waited = call<{ answered: boolean; value?: string; code?: string }>(harness.stack.gatewayUrl, `${SERVER_API}/ask/${asked.body.correlationId}?wait=50`, { key: apiKey });
  const token = asked.body.liveUrl.slice(asked.body.liveUrl.indexOf('/a/') + 3);
  const answer = () => call(harness.stack.gatewayUrl, `/api/v1/answer/${token}`, { method: 'POST', body: { answer: 'yes' } });
  await sleep(300);

  // Slow pushes while the server stops: some are in flight when it goes, so their outcome must be
  // recorded once it is back rather than the push made again.
  harness.peer.respondWith({ delayMs: 1_000 });
  await infra('stop', component);
  await sleep(3_000);
  await whileDown();
  harness.peer.respondWith(null);
  // Answered while Redis is down, the wake-up cannot be published; the waiter must still learn of it.
  if (component !== 'postgres') assert.equal((await answer()).status, 200);
  await infra('start', component);
  const back = Date.now();
  if (component === 'postgres') assert.equal((await answer()).status, 200);

  const probe = await eventually(
    'a send accepted again',
    () => call(harness.stack.gatewayUrl, `${SERVER_API}/send`, { method: 'POST', key: audience.workspace.apiKey, body: { title: 'probe', body: 'after the restart' } }),
    (reply) => reply.status === 200,
    20_000,
  );
  outcomes.push({ what: 'send', status: 200, code: undefined, ms: 0, id: String(probe.body.campaignId) });
  const recoveredMs = Date.now() - back;
  const waitedFor = await waited;
  assert.equal(waitedFor.status, 200, JSON.stringify(waitedFor.body));
  assert.deepEqual([waitedFor.body.answered, waitedFor.body.value], [true, 'yes']);
  const answerMs = Date.now() - back;
  // Woken, not released by its 50 s time-out.
  assert.ok(answerMs < 15_000, `the waiter answered ${answerMs} ms after ${component} was back`);
  await sleep(1_500);
  return { recoveredMs, answerMs };
}

function campaignService(): RunningProcess {
  const found = harness.stack.services.find((running) => running.name === 'campaign');
  assert.ok(found, 'no campaign service in the stack');
  return found;
}

/** Kafka gone 3 s under load: the sends accepted meanwhile wait in the campaign outbox, and its metrics say so. */
async function outboxPilesUp(): Promise<void> {
  const metrics = await scrapeMetrics(campaignService().metricsUrl);
  assert.ok(metricValue(metrics, 'herald_outbox_rows', { schema: 'campaign' }) > 0, 'outbox rows waiting while Kafka is down');
  assert.ok(metricValue(metrics, 'herald_outbox_oldest_age', { schema: 'campaign' }) >= 1, 'the oldest outbox row ages while Kafka is down');
}

/** Once Kafka is back and the load drained: nothing waits in the outbox, and no consumer group of the campaign service is behind. */
async function metricsBackToNormal(): Promise<void> {
  await eventually(
    'the campaign outbox empty and its consumers caught up',
    () => scrapeMetrics(campaignService().metricsUrl),
    (metrics) =>
      metricValue(metrics, 'herald_outbox_rows', { schema: 'campaign' }) === 0 &&
      metricValue(metrics, 'herald_outbox_oldest_age', { schema: 'campaign' }) === 0 &&
      samplesOf(metrics, 'herald_kafka_consumer_lag').every((series) => series.value === 0),
    60_000,
  );
}

for (const component of ['postgres', 'redis', 'kafka'] as const) {
  test(`${component} restarts under load: every process keeps running, the API serves again within seconds, each send and subscription applies once`, { timeout: 420_000 }, async () => {
    const first = outcomes.length;
    const load = startLoad();
    let observed: { recoveredMs: number; answerMs: number };
    try {
      observed = await restartUnderLoad(component, component === 'kafka' ? outboxPilesUp : async () => undefined);
    } finally {
      harness.peer.respondWith(null);
      await load.stop();
      // Whatever failed, the server is up again for what follows.
      await infra('start', component);
    }

    assertEveryProcessRunning();
    const window = outcomes.slice(first);
    const unexpected = window.filter((outcome) => !(outcome.status === 200 || outcome.status === 201 || (outcome.status === 503 && outcome.code === 'unavailable')));
    assert.deepEqual(unexpected, [], 'only success or 503 unavailable');
    const slow = window.filter((outcome) => outcome.ms > 7_000);
    assert.deepEqual(slow, [], 'every answer within the gRPC deadline (5 s) and a margin');
    if (component === 'postgres') assert.ok(window.some((outcome) => outcome.status === 503), 'requests needing PostgreSQL were refused while it was down');
    else assert.deepEqual(window.filter((outcome) => outcome.status === 503), [], `nothing needs ${component} to be accepted`);

    await assertSentExactlyOnce(window.flatMap((outcome) => (outcome.what === 'send' && outcome.id ? [outcome.id] : [])));
    await assertAnnouncedExactlyOnce(window.flatMap((outcome) => (outcome.what === 'subscribe' && outcome.id ? [outcome.id] : [])));
    assertEveryProcessRunning();
    if (component === 'kafka') await metricsBackToNormal();
    const accepted = window.filter((outcome) => outcome.id !== undefined).length;
    console.log(`# ${component}: ${window.length} requests (${accepted} accepted); API back ${observed.recoveredMs} ms and the waiter answered ${observed.answerMs} ms after the restart`);
  });
}
