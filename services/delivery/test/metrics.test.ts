import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { consumers, topics } from '@herald/bus';

import {
  call,
  createWorkspace,
  eventually,
  requiredEnv,
  histogramsOf,
  metricValue,
  samplesOf,
  scrapeMetrics,
  seedAudience,
  SERVER_API,
  startSendingHarness,
  type RunningProcess,
  type SendingHarness,
} from '@herald/testkit';
import { Kafka, logLevel } from 'kafkajs';

// Every process serves Prometheus metrics on its own port; scraped over HTTP after driving the
// behaviour through the public API, parsed with a real exposition parser.

let harness: SendingHarness;
const kafka = new Kafka({ clientId: 'metrics-test', brokers: requiredEnv('KAFKA_BROKERS').split(','), logLevel: logLevel.NOTHING });

before(async () => {
  harness = await startSendingHarness({ deliveryEnv: { PUSH_MAX_ATTEMPTS: '3' } });
});
after(() => harness.stop());

function processNamed(name: string): RunningProcess {
  const found = [...harness.stack.gateways, ...harness.stack.services].find((running) => running.name === name);
  assert.ok(found, `no ${name} in the stack`);
  return found;
}

test('each process serves HTTP or gRPC durations per route or method with status, and runtime metrics', async () => {
  const workspace = await createWorkspace();
  const site = await call(harness.stack.gatewayUrl, `${SERVER_API}/site`, { key: workspace.apiKey });
  assert.equal(site.status, 200);
  const unknown = await call(harness.stack.gatewayUrl, `${SERVER_API}/notifications/ntf_00000000000000000000000000000000`, { key: workspace.apiKey });
  assert.equal(unknown.status, 404);

  const gateway = await scrapeMetrics(processNamed('gateway').metricsUrl);
  const siteSeries = histogramsOf(gateway, 'http_server_request_duration', { http_route: '/api/v1/server/site', http_request_method: 'GET', http_response_status_code: '200' });
  assert.equal(siteSeries.length, 1);
  assert.equal(siteSeries[0]?.count, 1);
  const buckets = ['0.005', '0.01', '0.025', '0.05', '0.075', '0.1', '0.25', '0.5', '0.75', '1', '2.5', '5', '7.5', '10', '+Inf'];
  assert.deepEqual(new Set(Object.keys(siteSeries[0]?.buckets ?? {})), new Set(buckets));
  assert.equal(siteSeries[0]?.buckets['+Inf'], 1);
  // The route's template, never the concrete path (which holds an id).
  const notFound = histogramsOf(gateway, 'http_server_request_duration', { http_route: '/api/v1/server/notifications/:notificationId', http_response_status_code: '404' });
  assert.equal(notFound[0]?.count, 1);
  assert.ok(!histogramsOf(gateway, 'http_server_request_duration').some((series) => series.labels.http_route?.includes('ntf_')));
  assert.equal(gateway.nodejs_eventloop_delay_p99?.type, 'gauge');
  assert.equal(gateway.v8js_memory_heap_used?.type, 'gauge');

  const campaign = await scrapeMetrics(processNamed('campaign').metricsUrl);
  const getNotification = histogramsOf(campaign, 'rpc_server_call_duration', { rpc_system: 'grpc', rpc_method: 'GetNotification' });
  assert.equal(getNotification.length, 1);
  assert.equal(getNotification[0]?.labels.rpc_service, 'herald.campaign.v1.CampaignService');
  assert.equal(getNotification[0]?.labels.rpc_grpc_status_code, '5');
  assert.equal(getNotification[0]?.count, 1);
});

test('pushes are counted by outcome and push-service origin, and timed', async () => {
  const audience = await seedAudience(harness, 4);
  const [gone, slowed, , failing] = audience.subscribers;
  assert.ok(gone && slowed && failing);
  harness.peer.respondWith(gone.endpoint, { status: 410 });
  harness.peer.respondWith(slowed.endpoint, { status: 429, retryAfter: 1, times: 1 });
  harness.peer.respondWith(failing.endpoint, { status: 400 });
  const sent = await call<{ campaignId: string }>(harness.stack.gatewayUrl, `${SERVER_API}/send`, { method: 'POST', key: audience.workspace.apiKey, body: { title: 'a', body: 'b' } });
  assert.equal(sent.status, 200);
  const settled = await eventually(
    'notification completed',
    () => call<{ status: string; counts: Record<string, number> }>(harness.stack.gatewayUrl, `${SERVER_API}/notifications/${sent.body.campaignId}`, { key: audience.workspace.apiKey }),
    (reply) => reply.body.status === 'completed',
    30_000,
  );
  assert.deepEqual(settled.body.counts, { targeted: 4, queued: 4, delivered: 2, failed: 1, expired: 1, pending: 0 });

  const origin = new URL(gone.endpoint).origin;
  const delivery = await scrapeMetrics(processNamed('delivery').metricsUrl);
  assert.equal(delivery.herald_delivery_pushes_total?.type, 'counter');
  const counted = Object.fromEntries(samplesOf(delivery, 'herald_delivery_pushes_total').map((series) => [`${series.labels.outcome} ${series.labels.origin}`, series.value]));
  assert.deepEqual(counted, { [`accepted ${origin}`]: 2, [`expired ${origin}`]: 1, [`retry ${origin}`]: 1, [`failed ${origin}`]: 1 });
  assert.equal(harness.peer.attempts().length, 5);
  const timed = histogramsOf(delivery, 'herald_delivery_push_duration', { origin });
  assert.equal(timed[0]?.count, 5);
  assert.equal(timed[0]?.buckets['60'], 5);
  assert.equal(metricValue(delivery, 'herald_delivery_push_in_flight', { origin }), 0);

  // The 429's retry came off the work loop, after the Retry-After it asked for.
  const retried = histogramsOf(delivery, 'herald_workloop_lateness', { loop: 'push retries' });
  assert.equal(retried.length, 1);
  assert.equal(retried[0]?.count, 1);
  // Nothing left due in any loop of the fleet.
  assert.deepEqual(samplesOf(delivery, 'herald_workloop_due').map((series) => [series.labels.loop, series.value]), [['push retries', 0]]);
  // One delivery job for four recipients, handled once; every partition it fetched from is caught up.
  assert.equal(metricValue(delivery, 'herald_kafka_messages_total', { group: consumers.delivery.group, topic: topics.deliveryJobs.name, outcome: 'handled' }), 1);
  const lags = samplesOf(delivery, 'herald_kafka_consumer_lag', { group: consumers.delivery.group, topic: topics.deliveryJobs.name });
  assert.ok(lags.length >= 1, 'the partition of the job is reported');
  assert.deepEqual(lags.map((series) => series.value), lags.map(() => 0));
  // The results went out through the delivery schema's outbox, which is empty again.
  assert.equal(metricValue(delivery, 'herald_outbox_rows', { schema: 'delivery' }), 0);
  assert.equal(metricValue(delivery, 'herald_outbox_oldest_age', { schema: 'delivery' }), 0);

  // The send completed once (its last push settled after the 429's retry, a second or more after it was made).
  const campaign = await scrapeMetrics(processNamed('campaign').metricsUrl);
  const completed = histogramsOf(campaign, 'herald_notification_completion', { kind: 'send' });
  assert.equal(completed.length, 1);
  assert.equal(completed[0]?.count, 1);
  assert.equal(completed[0]?.buckets['0.5'], 0);
  assert.equal(completed[0]?.buckets['+Inf'], 1);
});

test('a message its consumer cannot handle is counted as dead-lettered, once, after its attempts', async () => {
  const producer = kafka.producer();
  await producer.connect();
  try {
    // Not a DeliveryResult: the audience service's consumer of the results fails on it every time.
    await producer.send({ topic: harness.stack.topicPrefix + topics.deliveryResults.name, messages: [{ key: 'poison', value: Buffer.from([0xff, 0xff, 0xff]) }] });
  } finally {
    await producer.disconnect();
  }
  const labels = { group: consumers.audienceExpiry.group, topic: topics.deliveryResults.name };
  const metricsUrl = processNamed('audience').metricsUrl;
  const before = await scrapeMetrics(metricsUrl);
  const handledBefore = metricValue(before, 'herald_kafka_messages_total', { ...labels, outcome: 'handled' });
  const audience = await eventually('dead-lettered', () => scrapeMetrics(metricsUrl), (metrics) => metricValue(metrics, 'herald_kafka_messages_total', { ...labels, outcome: 'dead_lettered' }) > 0);
  assert.equal(metricValue(audience, 'herald_kafka_messages_total', { ...labels, outcome: 'dead_lettered' }), 1);
  assert.equal(metricValue(audience, 'herald_kafka_messages_total', { ...labels, outcome: 'handled' }), handledBefore);
});
