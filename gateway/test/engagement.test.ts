import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request, type IncomingHttpHeaders } from 'node:http';
import { after, before, test } from 'node:test';

import { consumers } from '@herald/bus';
import { EngagementTokens } from '@herald/domain';
import { call, errorBody, eventually, SERVER_API, seedAudience, startSendingHarness, waitForQuiet, type Audience, type OpenedPush, type SendingHarness } from '@herald/testkit';

// Engagement reports (POST /api/v1/events) end to end: a campaign goes through the delivery fleet to
// the strict push peer, whose decrypted payloads carry each recipient's token; reports made with
// them land on Kafka and in the campaign's counters, each (notification, subscriber, kind) once.

let harness: SendingHarness;
before(async () => {
  harness = await startSendingHarness();
});
after(() => harness.stop());

const SITE_ORIGIN = 'https://shop.example.test';
type Stats = { totalSent: number; totalDelivered: number; totalClicked: number; totalFailed: number; deliveryRate: number; clickRate: number };

const report = (body: unknown, gatewayUrl = harness.stack.gatewayUrl, origin = SITE_ORIGIN) =>
  call(gatewayUrl, '/api/v1/events', { method: 'POST', body, headers: { origin } });

/** Sends a campaign to the whole audience and returns each subscriber's push, once all landed. */
async function sendCampaign(audience: Audience): Promise<{ campaignId: string; pushes: Map<string, OpenedPush> }> {
  const { workspace } = audience;
  const created = await call<{ id: string }>(harness.stack.gatewayUrl, `${SERVER_API}/campaigns`, {
    method: 'POST',
    key: workspace.apiKey,
    body: { name: 'Launch', title: 'New', body: 'Out now', actionUrl: 'https://shop.example.test/new' },
  });
  assert.equal(created.status, 201);
  const campaignId = created.body.id;
  assert.equal((await call(harness.stack.gatewayUrl, `${SERVER_API}/campaigns/${campaignId}/send`, { method: 'POST', key: workspace.apiKey })).status, 200);
  const messages = await eventually(
    'every subscriber got the campaign',
    async () => harness.peer.received().filter((message) => harness.openPush(message).payload.notificationId === campaignId),
    (found) => found.length === audience.subscribers.length,
  );
  const bySubscriber = new Map(messages.map((message) => {
    const opened = harness.openPush(message);
    return [opened.engagement.subscriberId, opened] as const;
  }));
  return { campaignId, pushes: bySubscriber };
}

/** A report sent from a chosen loopback address (the gateway limits per client IP). */
function reportFrom(localAddress: string, gatewayUrl: string, body: unknown): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const sent = request(`${gatewayUrl}/api/v1/events`, { method: 'POST', localAddress, headers: { 'content-type': 'application/json', origin: SITE_ORIGIN } }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text }));
    });
    sent.on('error', reject);
    sent.end(payload);
  });
}

const stats = (audience: Audience, campaignId: string) =>
  call<Stats>(harness.stack.gatewayUrl, `${SERVER_API}/campaigns/${campaignId}/stats`, { key: audience.workspace.apiKey });

test("reports made with each push's token are counted once per subscriber and kind; the stats agree exactly", async () => {
  const audience = await seedAudience(harness, 6);
  const { campaignId, pushes } = await sendCampaign(audience);
  const ids = audience.subscribers.map((subscriber) => subscriber.id);
  // Every push names its own subscriber and notification, in the workspace and site that sent it.
  assert.deepEqual([...pushes.keys()].sort(), [...ids].sort());
  for (const [subscriberId, push] of pushes) {
    assert.deepEqual(push.engagement, { workspaceId: audience.workspace.workspaceId, siteId: audience.workspace.siteId, notificationId: campaignId, subscriberId });
    assert.deepEqual(push.payload, { notificationId: campaignId, title: 'New', body: 'Out now', url: 'https://shop.example.test/new' });
  }
  const tokenOf = (index: number): string => pushes.get(ids[index] ?? '')?.token ?? '';

  // Impressions from five subscribers (one reported three times, as a retrying browser would),
  // clicks from three (one from an action button, one twice), a dismissal from one.
  const reports = [
    ...[0, 1, 2, 3, 4, 0, 0].map((index) => ({ type: 'impression', token: tokenOf(index) })),
    ...[0, 1, 2, 2].map((index) => ({ type: 'click', token: tokenOf(index) })),
    { type: 'click', token: tokenOf(1), action: 'open' },
    { type: 'dismiss', token: tokenOf(5) },
  ];
  for (const body of reports) {
    const response = await report(body);
    assert.deepEqual([response.status, response.body], [202, { success: true }], JSON.stringify(body));
    assert.equal(response.headers.get('access-control-allow-origin'), SITE_ORIGIN);
  }
  await waitForQuiet(harness.stack.topicPrefix, [consumers.campaignEngagement]);
  const expected = { totalSent: 6, totalDelivered: 5, totalClicked: 3, totalFailed: 0, deliveryRate: 83.33, clickRate: 60 };
  assert.deepEqual((await stats(audience, campaignId)).body, expected);
  const campaign = await call<Record<string, unknown>>(harness.stack.gatewayUrl, `${SERVER_API}/campaigns/${campaignId}`, { key: audience.workspace.apiKey });
  assert.deepEqual([campaign.body.totalSent, campaign.body.totalDelivered, campaign.body.totalClicked], [6, 5, 3]);

  // The same reports again change nothing.
  for (const body of reports) assert.equal((await report(body)).status, 202);
  await waitForQuiet(harness.stack.topicPrefix, [consumers.campaignEngagement]);
  assert.deepEqual((await stats(audience, campaignId)).body, expected);
});

test('a token that is not good is refused with one answer that does not say why, and nothing is counted', async () => {
  const audience = await seedAudience(harness, 2);
  const { campaignId, pushes } = await sendCampaign(audience);
  const [first, second] = [...pushes.values()] as [OpenedPush, OpenedPush];
  const [body, mac] = first.token.split('.') as [string, string];
  const fields = Buffer.from(body, 'base64url').toString().split(' ');
  const ownSecret = new EngagementTokens(harness.stack.engagementTokenSecret);
  const otherSecret = new EngagementTokens(randomBytes(32).toString('base64url'));
  const refused = {
    'a changed MAC': `${body}.${mac.startsWith('A') ? 'B' : 'A'}${mac.slice(1)}`,
    "another subscriber's id under this MAC": `${Buffer.from([...fields.slice(0, 3), second.engagement.subscriberId, fields[4]].join(' ')).toString('base64url')}.${mac}`,
    'signed with another secret': otherSecret.sign(first.engagement),
    'signed 31 days ago': ownSecret.sign(first.engagement, Date.now() - 31 * 86_400_000),
    'signed in the future': ownSecret.sign(first.engagement, Date.now() + 3_600_000),
    'no MAC': body,
    'not a token': 'hello',
  };
  for (const [what, token] of Object.entries(refused)) {
    const response = await report({ type: 'click', token });
    assert.deepEqual(
      [response.status, response.body],
      [400, errorBody('invalid_request', 400, 'Invalid event token', 'The event token is not valid.', "Send the `token` of the push payload the report is about, unchanged, within 30 days of the push.")],
      what,
    );
  }
  // A good one after them is counted; the refused ones never were.
  assert.equal((await report({ type: 'click', token: second.token })).status, 202);
  await waitForQuiet(harness.stack.topicPrefix, [consumers.campaignEngagement]);
  assert.deepEqual((await stats(audience, campaignId)).body, { totalSent: 2, totalDelivered: 0, totalClicked: 1, totalFailed: 0, deliveryRate: 0, clickRate: 0 });
});

test('a bad report is a 400 naming the field', async () => {
  const cases: Array<[unknown, string]> = [
    [{ type: 'open', token: 'x' }, 'type'],
    [{ type: 'click' }, 'token'],
    [{ type: 'click', token: 'x'.repeat(1_000) }, 'token'],
    [{ type: 'click', token: 'x', action: 'has spaces' }, 'action'],
    [{ type: 'click', token: 'x', subscriberId: 'sub_1' }, 'subscriberId'],
  ];
  for (const [body, field] of cases) {
    const response = await report(body);
    assert.equal(response.status, 400, JSON.stringify(body));
    const fields = (response.body as { fields?: Array<{ field: string }> }).fields ?? [];
    assert.ok(fields.some((problem) => problem.field === field), `${JSON.stringify(body)}: ${JSON.stringify(response.body)}`);
  }
});

test("CORS: a site's page may ask and gets its origin back; a page that cannot be a site's is refused", async () => {
  const preflight = await call(harness.stack.gatewayUrl, '/api/v1/events', {
    method: 'OPTIONS',
    headers: { origin: SITE_ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
  });
  assert.equal(preflight.status, 204);
  assert.equal(preflight.headers.get('access-control-allow-origin'), SITE_ORIGIN);
  assert.equal(preflight.headers.get('access-control-allow-methods'), 'POST, OPTIONS');
  const insecure = await call(harness.stack.gatewayUrl, '/api/v1/events', {
    method: 'OPTIONS',
    headers: { origin: 'http://shop.example.test', 'access-control-request-method': 'POST' },
  });
  assert.equal(insecure.status, 403);
  assert.equal(insecure.headers.get('access-control-allow-origin'), null);
});

test('reports are limited per client IP and per site: 429 with Retry-After', async () => {
  const audience = await seedAudience(harness, 1);
  const { pushes } = await sendCampaign(audience);
  const token = [...pushes.values()][0]?.token ?? '';
  const limitedByIp = await harness.stack.addGateway({ ENGAGEMENT_IP_RATE_LIMIT_PER_MINUTE: '3' });
  // From a loopback address of its own: the reports of the tests above share 127.0.0.1's bucket.
  const client = '127.0.0.77';
  for (let index = 0; index < 3; index += 1) assert.equal((await reportFrom(client, limitedByIp, { type: 'impression', token })).status, 202);
  const overIp = await reportFrom(client, limitedByIp, { type: 'impression', token });
  assert.equal(overIp.status, 429);
  assert.equal((JSON.parse(overIp.body) as { code: string }).code, 'rate_limited');
  assert.ok(Number(overIp.headers['retry-after']) >= 1);
  assert.equal(overIp.headers['x-ratelimit-limit'], '3');
  // Another address is not held back by it.
  assert.equal((await reportFrom('127.0.0.78', limitedByIp, { type: 'impression', token })).status, 202);

  // Another site, whose bucket the reports above did not touch.
  const other = await sendCampaign(await seedAudience(harness, 1));
  const otherToken = [...other.pushes.values()][0]?.token ?? '';
  const limitedBySite = await harness.stack.addGateway({ ENGAGEMENT_SITE_RATE_LIMIT_PER_MINUTE: '2' });
  for (let index = 0; index < 2; index += 1) assert.equal((await report({ type: 'click', token: otherToken }, limitedBySite)).status, 202);
  const overSite = await report({ type: 'click', token: otherToken }, limitedBySite);
  assert.equal(overSite.status, 429);
  assert.equal(overSite.headers.get('x-ratelimit-limit'), '2');
});

test('while Kafka cannot take a report the answer is 503, so the browser keeps it to retry', async () => {
  const audience = await seedAudience(harness, 1);
  const { pushes } = await sendCampaign(audience);
  // A gateway whose broker is unreachable: its reports cannot be acknowledged.
  const cutOff = await harness.stack.addGateway({ KAFKA_BROKERS: '127.0.0.1:9', ENGAGEMENT_PUBLISH_TIMEOUT_MS: '1500' });
  const started = Date.now();
  const response = await report({ type: 'impression', token: [...pushes.values()][0]?.token }, cutOff);
  assert.deepEqual([response.status, (response.body as { code: string }).code], [503, 'unavailable']);
  assert.ok(Date.now() - started < 5_000, 'answered within its publish time-out');
});
