import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  call,
  createWorkspace,
  eventually,
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

// Every process serves Prometheus metrics on its own port; scraped over HTTP after driving the
// behaviour through the public API, parsed with a real exposition parser.

let harness: SendingHarness;

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
});
