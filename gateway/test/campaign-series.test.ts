import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { consumers } from '@herald/bus';
import { call, errorBody, eventually, SERVER_API, seedAudience, startSendingHarness, waitForQuiet, type Audience, type SendingHarness } from '@herald/testkit';

// GET /campaigns/{id}/stats/series: the campaign's counters per minute, hour or day. A campaign goes
// through the delivery fleet to the strict push peer; the recipients' reports (impressions, clicks,
// dismissals) are made with each push's token; the buckets add up to exactly what was counted.

let harness: SendingHarness;
before(async () => {
  harness = await startSendingHarness();
});
after(() => harness.stop());

const SITE_ORIGIN = 'https://shop.example.test';
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
type Bucket = { at: string; sent: number; delivered: number; clicked: number; dismissed: number };
type Series = { bucket: string; start: string; end: string; data: Bucket[] };

const floor = (at: number, size: number) => Math.floor(at / size) * size;
const iso = (at: number) => new Date(at).toISOString();

const series = (audience: Audience, campaignId: string, query: string) =>
  call<Series & Record<string, unknown>>(harness.stack.gatewayUrl, `${SERVER_API}/campaigns/${campaignId}/stats/series?${query}`, { key: audience.workspace.apiKey });

/** The counters of every bucket added up. */
function totals(data: Bucket[]) {
  const sum = { sent: 0, delivered: 0, clicked: 0, dismissed: 0 };
  for (const bucket of data) {
    sum.sent += bucket.sent;
    sum.delivered += bucket.delivered;
    sum.clicked += bucket.clicked;
    sum.dismissed += bucket.dismissed;
  }
  return sum;
}

/** Sends a campaign to the audience and reports, with the pushes' tokens, 3 impressions, 2 clicks and 1 dismissal. */
async function sendAndReport(audience: Audience): Promise<string> {
  const key = audience.workspace.apiKey;
  const created = await call<{ id: string }>(harness.stack.gatewayUrl, `${SERVER_API}/campaigns`, { method: 'POST', key, body: { name: 'Launch', title: 'New', body: 'Out now' } });
  assert.equal(created.status, 201);
  const campaignId = created.body.id;
  assert.equal((await call(harness.stack.gatewayUrl, `${SERVER_API}/campaigns/${campaignId}/send`, { method: 'POST', key })).status, 200);
  const pushes = await eventually(
    'every subscriber got the campaign',
    async () => harness.peer.received().map((message) => harness.openPush(message)).filter((opened) => opened.payload.notificationId === campaignId),
    (found) => found.length === audience.subscribers.length,
  );
  const tokens = pushes.map((push) => push.token);
  const reports = [
    ...[0, 1, 2, 0].map((index) => ({ type: 'impression', token: tokens[index] })),
    ...[0, 1].map((index) => ({ type: 'click', token: tokens[index] })),
    { type: 'dismiss', token: tokens[3] },
  ];
  for (const body of reports) {
    assert.equal((await call(harness.stack.gatewayUrl, '/api/v1/events', { method: 'POST', body, headers: { origin: SITE_ORIGIN } })).status, 202);
  }
  await waitForQuiet(harness.stack.topicPrefix, [consumers.campaignResults, consumers.campaignEngagement]);
  return campaignId;
}

test('the buckets hold every minute, hour and day of the window and add up to the counters; reports repeated change nothing', async () => {
  const audience = await seedAudience(harness, 4);
  const started = Date.now();
  const campaignId = await sendAndReport(audience);
  const finished = Date.now();
  const expected = { sent: 4, delivered: 3, clicked: 2, dismissed: 1 };

  const firstMinute = floor(started, MINUTE);
  const minutes = await series(audience, campaignId, `bucket=minute&from=${iso(started)}&to=${iso(firstMinute + 30 * MINUTE)}`);
  assert.equal(minutes.status, 200);
  assert.deepEqual([minutes.body.bucket, minutes.body.start, minutes.body.end], ['minute', iso(firstMinute), iso(firstMinute + 30 * MINUTE)]);
  assert.deepEqual(minutes.body.data.map((bucket) => bucket.at), Array.from({ length: 30 }, (_, index) => iso(firstMinute + index * MINUTE)));
  assert.deepEqual(totals(minutes.body.data), expected);
  // Each count is in the minute it happened in: between the send and the last report.
  for (const bucket of minutes.body.data) {
    if (bucket.sent + bucket.delivered + bucket.clicked + bucket.dismissed === 0) continue;
    assert.ok(Date.parse(bucket.at) >= firstMinute && Date.parse(bucket.at) <= floor(finished, MINUTE), bucket.at);
  }

  const firstHour = floor(started, HOUR);
  const hours = await series(audience, campaignId, `bucket=hour&from=${iso(firstHour)}&to=${iso(firstHour + 3 * HOUR)}`);
  assert.deepEqual(hours.body.data.map((bucket) => bucket.at), [0, 1, 2].map((index) => iso(firstHour + index * HOUR)));
  assert.deepEqual(totals(hours.body.data), expected);
  assert.deepEqual(hours.body.data[2], { at: iso(firstHour + 2 * HOUR), sent: 0, delivered: 0, clicked: 0, dismissed: 0 });

  // Without from and to: from the campaign's creation (its day) until now.
  const days = await series(audience, campaignId, 'bucket=day');
  assert.equal(days.body.start, iso(floor(started, DAY)));
  assert.ok(Date.parse(days.body.end) >= finished);
  assert.equal(days.body.data[0]?.at, iso(floor(started, DAY)));
  assert.deepEqual(totals(days.body.data), expected);

  // The same reports again are counted once: the buckets do not move.
  const pushes = harness.peer.received().map((message) => harness.openPush(message)).filter((opened) => opened.payload.notificationId === campaignId);
  for (const push of pushes) {
    assert.equal((await call(harness.stack.gatewayUrl, '/api/v1/events', { method: 'POST', body: { type: 'click', token: push.token }, headers: { origin: SITE_ORIGIN } })).status, 202);
  }
  await waitForQuiet(harness.stack.topicPrefix, [consumers.campaignEngagement]);
  const again = await series(audience, campaignId, `bucket=hour&from=${iso(firstHour)}&to=${iso(firstHour + 3 * HOUR)}`);
  assert.deepEqual(totals(again.body.data), { ...expected, clicked: 4 });
});

test("a bad window or bucket is a 400 naming the field; another workspace's campaign is a 404", async () => {
  const audience = await seedAudience(harness, 1);
  const created = await call<{ id: string; createdAt: string }>(harness.stack.gatewayUrl, `${SERVER_API}/campaigns`, {
    method: 'POST',
    key: audience.workspace.apiKey,
    body: { name: 'Draft', title: 'New', body: 'Soon' },
  });
  const campaignId = created.body.id;
  const now = Date.now();
  const cases: Array<[string, { field: string; in: string; problem: string }]> = [
    ['bucket=week', { field: 'bucket', in: 'querystring', problem: 'must be equal to one of the allowed values' }],
    ['bucket=hour&from=yesterday', { field: 'from', in: 'querystring', problem: 'must be an ISO 8601 date-time' }],
    ['bucket=hour&limit=5', { field: 'limit', in: 'querystring', problem: 'is not allowed' }],
    [`bucket=hour&from=${iso(now)}&to=${iso(now - HOUR)}`, { field: 'to', in: 'querystring', problem: 'must be after from' }],
    [
      `bucket=minute&from=${iso(floor(now, MINUTE) - 1_441 * MINUTE)}&to=${iso(floor(now, MINUTE))}`,
      { field: 'from', in: 'querystring', problem: 'is 1441 minutes before to; at most 1440 buckets are answered' },
    ],
  ];
  for (const [query, problem] of cases) {
    const response = await series(audience, campaignId, query);
    assert.equal(response.status, 400, query);
    assert.equal(response.body.code, 'invalid_request', query);
    assert.deepEqual(response.body.fields, [problem], query);
  }
  // 1,440 buckets is the most, and answered.
  const most = await series(audience, campaignId, `bucket=minute&from=${iso(floor(now, MINUTE) - 1_440 * MINUTE)}&to=${iso(floor(now, MINUTE))}`);
  assert.equal(most.status, 200);
  assert.equal(most.body.data.length, 1_440);
  assert.deepEqual(totals(most.body.data), { sent: 0, delivered: 0, clicked: 0, dismissed: 0 });
  // Without a bucket: hours.
  const hourly = await series(audience, campaignId, `from=${iso(floor(now, HOUR) - 2 * HOUR)}&to=${iso(floor(now, HOUR))}`);
  assert.deepEqual([hourly.status, hourly.body.bucket, hourly.body.data.length], [200, 'hour', 2]);
  // Without from: from the campaign's creation, every minute until now.
  const since = (await series(audience, campaignId, 'bucket=minute')).body;
  assert.equal(since.start, iso(floor(Date.parse(created.body.createdAt), MINUTE)));
  assert.equal(since.data.length, Math.ceil((Date.parse(since.end) - Date.parse(since.start)) / MINUTE));

  const other = await seedAudience(harness, 1);
  const foreign = await series(other, campaignId, 'bucket=hour');
  assert.deepEqual([foreign.status, foreign.body], [404, errorBody('not_found', 404, 'Not found', `No campaign ${campaignId}.`, 'Check the path and the identifier.')]);
  const missing = await series(audience, 'cmp_missing', 'bucket=hour');
  assert.deepEqual([missing.status, missing.body], [404, errorBody('not_found', 404, 'Not found', 'No campaign cmp_missing.', 'Check the path and the identifier.')]);
});
