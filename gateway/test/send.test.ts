import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { SEND_PIPELINE } from '@herald/bus';
import {
  call,
  connectDatabase,
  createKey,
  createWorkspace,
  eventually,
  seedAudience,
  SERVER_API,
  startSendingHarness,
  waitForQuiet,
  type Audience,
  type SendingHarness,
} from '@herald/testkit';

// POST /send and GET /notifications/{id} end to end: the gateway, campaign service, audience
// scan, Kafka, the delivery fleet and a strict push service that verifies and decrypts.

let harness: SendingHarness;
let audience: Audience;

before(async () => {
  // Delivery jobs of two recipients: a send of four is fanned out in two jobs, one of two is queued whole with its notification.
  harness = await startSendingHarness({ env: { FANOUT_BATCH_SIZE: '2' } });
  audience = await seedAudience(harness, 4, 'growth', (index) => ({
    externalId: `user-${index % 2}`,
    tags: index < 2 ? ['vip', 'beta'] : ['beta'],
  }));
});
after(() => harness.stop());

type SendResult = { success: boolean; status: string; campaignId: string; sent: number; limits: { remaining: number; limit: number }; duplicate: boolean };

const send = (body: unknown, key = audience.workspace.apiKey, headers: Record<string, string> = {}) =>
  call<SendResult>(harness.stack.gatewayUrl, `${SERVER_API}/send`, { method: 'POST', key, body, headers });

const notification = (id: string, key = audience.workspace.apiKey) =>
  call<Record<string, unknown> & { status: string; counts: Record<string, number> }>(harness.stack.gatewayUrl, `${SERVER_API}/notifications/${id}`, { key });

const messagesFor = (campaignId: string) =>
  harness.peer.received().filter((message) => (JSON.parse(message.plaintext.toString()) as { notificationId: string }).notificationId === campaignId);

test('a send reaches every active subscriber once, encrypted and signed, and the notification reports it', async () => {
  const response = await send({ title: 'Hello', body: 'World', url: 'https://shop.example.test/sale' });
  assert.equal(response.status, 200);
  const { campaignId, limits } = response.body;
  assert.match(campaignId, /^ntf_[0-9a-f]{32}$/);
  assert.deepEqual(response.body, { success: true, status: 'queued', campaignId, sent: 4, limits, duplicate: false });
  assert.equal(limits.limit, 500_000);
  assert.ok(limits.remaining <= 500_000 - 4);

  await eventually('four pushes at the peer', async () => messagesFor(campaignId).length, (count) => count >= 4);
  const messages = messagesFor(campaignId);
  assert.deepEqual(messages.map((message) => message.endpoint).sort(), audience.subscribers.map((subscriber) => subscriber.endpoint).sort());
  for (const message of messages) {
    const { payload, engagement } = harness.openPush(message);
    assert.deepEqual(payload, { notificationId: campaignId, title: 'Hello', body: 'World', url: 'https://shop.example.test/sale' });
    const subscriber = audience.subscribers.find((candidate) => candidate.endpoint === message.endpoint);
    assert.deepEqual(engagement, { workspaceId: audience.workspace.workspaceId, siteId: audience.workspace.siteId, notificationId: campaignId, subscriberId: subscriber?.id });
    assert.equal(message.vapid.aud, harness.peer.origin);
    assert.equal(message.vapid.publicKey, audience.vapidPublicKey);
    assert.equal(message.vapid.sub, 'mailto:push-operator@herald.dev');
    assert.ok(message.vapid.exp * 1_000 <= Date.now() + 24 * 3_600_000);
    assert.equal(message.ttl, 86_400);
    assert.equal(message.urgency, 'normal');
    assert.match(message.topic ?? '', /^[A-Za-z0-9_-]{32}$/);
  }

  const settled = await eventually('completed', () => notification(campaignId), (reply) => reply.body.status === 'completed');
  assert.equal(settled.status, 200);
  assert.deepEqual(settled.body.counts, { targeted: 4, queued: 4, delivered: 4, failed: 0, expired: 0, pending: 0 });
  assert.deepEqual(settled.body.lastDelivery, { statusCode: 201, outcome: 'delivered', reportedAt: (settled.body.lastDelivery as { reportedAt: string }).reportedAt });
  assert.equal(settled.body.title, 'Hello');
  assert.equal(settled.body.url, 'https://shop.example.test/sale');
  assert.equal(settled.body.iconUrl, null);

  const recipients = await call<{ data: Array<Record<string, unknown>>; hasMore: boolean; nextCursor: string | null }>(
    harness.stack.gatewayUrl,
    `${SERVER_API}/notifications/${campaignId}/recipients?limit=3`,
    { key: audience.workspace.apiKey },
  );
  assert.equal(recipients.status, 200);
  assert.equal(recipients.body.data.length, 3);
  assert.equal(recipients.body.hasMore, true);
  for (const recipient of recipients.body.data) assert.deepEqual([recipient.status, recipient.attempts, recipient.lastStatusCode], ['delivered', 1, 201]);
  const rest = await call<{ data: unknown[]; hasMore: boolean; nextCursor: string | null }>(
    harness.stack.gatewayUrl,
    `${SERVER_API}/notifications/${campaignId}/recipients?limit=3&cursor=${recipients.body.nextCursor}`,
    { key: audience.workspace.apiKey },
  );
  assert.deepEqual([rest.body.data.length, rest.body.hasMore, rest.body.nextCursor], [1, false, null]);
});

test('title and body are required, and the 400 names what is missing', async () => {
  const response = await send({ url: 'https://shop.example.test' });
  assert.equal(response.status, 400);
  assert.equal((response.body as unknown as { message: string }).message, 'Invalid request body: title is required; body is required.');
});

test('targeting by subscriber ids, external ids and tags, and their combination', async () => {
  const [first, second, third] = audience.subscribers as [Audience['subscribers'][0], Audience['subscribers'][0], Audience['subscribers'][0]];
  const cases: Array<[Record<string, unknown>, number]> = [
    [{ subscriberIds: [first.id, third.id] }, 2],
    [{ externalIds: ['user-1'] }, 2],
    [{ tags: ['vip'] }, 2],
    [{ tags: ['vip', 'beta'] }, 2],
    [{ tags: ['beta'] }, 4],
    [{ externalIds: ['user-0'], tags: ['vip'] }, 1],
    [{ subscriberIds: [first.id, second.id], externalIds: ['user-1'] }, 1],
  ];
  for (const [targeting, expected] of cases) {
    const response = await send({ title: 't', body: 'b', ...targeting });
    assert.equal(response.status, 200, JSON.stringify(targeting));
    assert.equal(response.body.sent, expected, JSON.stringify(targeting));
  }
  const none = await send({ title: 't', body: 'b', tags: ['nobody-has-this'] });
  assert.equal(none.status, 400);
  assert.equal((none.body as unknown as { message: string }).message, 'No subscribers found matching criteria');
});

test('known subscribers that fit one delivery job are queued with the notification; more go through the fan-out; each pushed once', async () => {
  const [first, , third] = audience.subscribers as [Audience['subscribers'][0], Audience['subscribers'][0], Audience['subscribers'][0]];
  const few = await send({ title: 'Few', body: 'b', subscriberIds: [first.id, third.id] });
  assert.deepEqual([few.status, few.body.sent], [200, 2]);
  // Its one job committed with it: the first read already counts both queued.
  const read = await notification(few.body.campaignId);
  assert.deepEqual([read.body.counts.targeted, read.body.counts.queued], [2, 2]);
  // Two external ids of two devices each: ids that fit a job, recipients that do not.
  const many = await send({ title: 'Many', body: 'b', externalIds: ['user-0', 'user-1'] });
  assert.deepEqual([many.status, many.body.sent], [200, 4]);

  for (const [id, endpoints] of [
    [few.body.campaignId, [first.endpoint, third.endpoint]],
    [many.body.campaignId, audience.subscribers.map((subscriber) => subscriber.endpoint)],
  ] as const) {
    const settled = await eventually(`${id} completed`, () => notification(id), (reply) => reply.body.status === 'completed');
    const count = endpoints.length;
    assert.deepEqual(settled.body.counts, { targeted: count, queued: count, delivered: count, failed: 0, expired: 0, pending: 0 });
    assert.deepEqual(messagesFor(id).map((message) => message.endpoint).sort(), [...endpoints].sort());
  }
});

test('an idempotency key replays the first result, and concurrent duplicates send once', async () => {
  const key = `order-${Date.now()}`;
  const [a, b, c] = await Promise.all([1, 2, 3].map(() => send({ title: 'Once', body: 'only', tags: ['vip'] }, undefined, { 'idempotency-key': key })));
  const results = [a, b, c].map((response) => response?.body as SendResult);
  assert.deepEqual(results.map((result) => result.campaignId), Array(3).fill(results[0]?.campaignId));
  assert.deepEqual(results.map((result) => result.duplicate).sort(), [false, true, true]);
  const replay = await send({ title: 'Once', body: 'only', tags: ['vip'], idempotencyKey: key });
  assert.equal(replay.body.duplicate, true);
  assert.equal(replay.body.campaignId, results[0]?.campaignId);
  assert.equal(replay.body.sent, 2);
  await eventually('two pushes', async () => messagesFor(results[0]?.campaignId ?? '').length, (count) => count >= 2);
  // Nothing more is on its way once the fan-out and the fleet have handled everything queued.
  await waitForQuiet(harness.stack.topicPrefix, SEND_PIPELINE);
  assert.equal(messagesFor(results[0]?.campaignId ?? '').length, 2);

  const mismatch = await send({ title: 'x', body: 'y', idempotencyKey: 'one' }, undefined, { 'idempotency-key': 'two' });
  assert.equal(mismatch.status, 400);
  assert.deepEqual((mismatch.body as unknown as { fields: unknown }).fields, [
    { field: 'idempotencyKey', in: 'body', problem: 'must match the Idempotency-Key header' },
  ]);
  const reused = await send({ title: 'Different', body: 'request', tags: ['vip'] }, undefined, { 'idempotency-key': key });
  assert.equal(reused.status, 409);
  assert.equal((reused.body as unknown as { code: string }).code, 'conflict');
  const tooLong = await send({ title: 'x', body: 'y' }, undefined, { 'idempotency-key': 'k'.repeat(201) });
  assert.equal(tooLong.status, 400);
});

test('sending needs a paid plan with API access; runtime and connector keys may send', async () => {
  const free = await createWorkspace('free');
  const refused = await send({ title: 't', body: 'b' }, free.apiKey);
  assert.equal(refused.status, 403);
  assert.equal((refused.body as unknown as { code: string }).code, 'plan_upgrade_required');
  assert.equal((refused.body as unknown as { upgradeUrl: string }).upgradeUrl, 'https://herald.dev/pricing');
  for (const origin of ['runtime', 'connector']) {
    const { apiKey } = await createKey(audience.workspace.workspaceId, origin);
    assert.equal((await send({ title: 't', body: 'b', tags: ['vip'] }, apiKey)).status, 200, origin);
  }
  const connector = await createKey(audience.workspace.workspaceId, 'connector');
  const read = await notification('ntf_00000000000000000000000000000000', connector.apiKey);
  assert.equal(read.status, 403);
});

test('the monthly allowance is enforced, reported, and its exhaustion is a 403 with upgradeUrl', async () => {
  const small = await seedAudience(harness, 2, 'starter');
  const db = await connectDatabase();
  try {
    const month = new Date();
    await db.query(`INSERT INTO campaign.monthly_usage (workspace_id, month, sent) VALUES ($1, date_trunc('month', $2::timestamptz AT TIME ZONE 'UTC')::date, 49999)`, [
      small.workspace.workspaceId,
      month.toISOString(),
    ]);
  } finally {
    await db.end();
  }
  const tooMany = await send({ title: 't', body: 'b' }, small.workspace.apiKey);
  assert.equal(tooMany.status, 403);
  const refusal = tooMany.body as unknown as Record<string, unknown>;
  assert.deepEqual(
    [refusal.code, refusal.message, refusal.upgradeUrl, refusal.limits],
    ['plan_limit_exceeded', "This send would exceed the plan's monthly allowance of 50000 notifications.", 'https://herald.dev/pricing', { remaining: 0, limit: 50_000 }],
  );
  const one = await send({ title: 't', body: 'b', subscriberIds: [small.subscribers[0]?.id] }, small.workspace.apiKey);
  assert.equal(one.status, 200);
  assert.deepEqual(one.body.limits, { remaining: 0, limit: 50_000 });
  assert.equal((await send({ title: 't', body: 'b', subscriberIds: [small.subscribers[1]?.id] }, small.workspace.apiKey)).status, 403);
});

test('a notification that cannot fit one encrypted record is refused before anything is queued', async () => {
  const db = await connectDatabase();
  const stored = async () =>
    (
      await db.query<{ notifications: string; used: string | null }>(
        `SELECT (SELECT count(*) FROM campaign.campaigns WHERE workspace_id = $1) AS notifications,
                (SELECT sum(sent) FROM campaign.monthly_usage WHERE workspace_id = $1) AS used`,
        [audience.workspace.workspaceId],
      )
    ).rows[0];
  try {
    const before = await stored();
    const response = await send({ title: 'T'.repeat(256), body: 'B'.repeat(2048), url: `https://shop.example.test/${'u'.repeat(1900)}` });
    assert.equal(response.status, 400);
    const body = response.body as unknown as { error: string; message: string };
    assert.equal(body.error, 'Notification too large');
    assert.match(body.message, /^The notification is \d+ bytes as sent to browsers; at most 3993 fit one encrypted push message\.$/);
    assert.deepEqual(await stored(), before);
  } finally {
    await db.end();
  }
});

test("another workspace's notification is 404", async () => {
  const other = await createWorkspace('growth');
  const sent = await send({ title: 't', body: 'b', tags: ['vip'] });
  const response = await notification(sent.body.campaignId, other.apiKey);
  assert.equal(response.status, 404);
  const recipients = await call(harness.stack.gatewayUrl, `${SERVER_API}/notifications/${sent.body.campaignId}/recipients`, { key: other.apiKey });
  assert.equal(recipients.status, 404);
});
