import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { QUESTION_PIPELINE } from '@herald/bus';
import {
  admin,
  call,
  connectDatabase,
  eventually,
  externalIdProof,
  identitySecret,
  SERVER_API,
  seedAudience,
  startSendingHarness,
  waitForQuiet,
  type SendingHarness,
  type TestWorkspace,
} from '@herald/testkit';

// A question (/ask, /decisions) is pushed to the matching approver devices (subscribers whose
// external id is verified; approver-devices.test.ts shows nobody else gets one) through the
// campaign service and the delivery fleet, with Yes/No action buttons, to a strict local push
// service that decrypts every message; Terminal mode pushes nothing; the monthly allowance is
// untouched.

let harness: SendingHarness;
before(async () => {
  harness = await startSendingHarness({ decisions: true });
});
after(() => harness.stop());

interface Pushed {
  notificationId: string;
  title: string;
  body: string;
  url: string;
  actions?: Array<{ action: string; title: string }>;
  answerUrl: string;
}

/** Two approver devices: user-0 and user-1, each subscribed with its external id's proof. */
const approvers = () => seedAudience(harness, 2, 'growth', (index) => ({ externalId: `user-${index}`, tags: [], verified: true }));

/** The answer token of a link that names one subscriber: `<question id>.<base64url("subscriber:<externalId>")>.<MAC>`. */
const recipientToken = (questionId: string, externalId: string) =>
  new RegExp(`^${questionId}\\.${Buffer.from(`subscriber:${externalId}`).toString('base64url')}\\.[A-Za-z0-9_-]{43}$`);

const pushedTo = (endpoint: string): Pushed[] => harness.peer.received(endpoint).map((message) => harness.openPush(message).payload as unknown as Pushed);

async function monthlyUsage(workspaceId: string): Promise<number> {
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<{ sent: string }>(`SELECT coalesce(sum(sent), 0) AS sent FROM campaign.monthly_usage WHERE workspace_id = $1`, [workspaceId]);
    return Number(rows[0]?.sent ?? 0);
  } finally {
    await db.end();
  }
}

test('an ask is pushed to the subscribers it targets, with Yes/No actions that answer it', async () => {
  const audience = await approvers();
  const [alice, bob] = audience.subscribers;
  if (!alice || !bob) throw new Error('two subscribers expected');
  const key = audience.workspace.apiKey;
  const asked = await call<{ correlationId: string; liveUrl: string }>(harness.stack.gatewayUrl, `${SERVER_API}/ask`, {
    method: 'POST',
    key,
    body: { question: 'Deploy to production?', agentName: 'ci-bot', wait: false, externalIds: [alice.externalId] },
  });
  assert.equal(asked.status, 200);
  const [pushed] = await eventually('the question pushed to alice', async () => pushedTo(alice.endpoint), (messages) => messages.length === 1);
  // A push to one person's devices carries a link naming them (its answer says who answered).
  const token = pushed?.url.slice(pushed.url.indexOf('/a/') + 3) ?? '';
  assert.match(token, recipientToken(asked.body.correlationId, alice.externalId));
  assert.deepEqual(pushed, {
    notificationId: pushed?.notificationId,
    title: 'ci-bot asks',
    body: 'Deploy to production?',
    url: `http://localhost:8080/a/${token}`,
    actions: [
      { action: 'yes', title: 'Yes' },
      { action: 'no', title: 'No' },
    ],
    answerUrl: `http://localhost:8080/api/v1/answer/${token}`,
  });
  assert.match(pushed?.notificationId ?? '', /^ntf_[0-9a-f]{32}$/);
  // What the service worker does with the "no" action.
  const answered = await call<{ status: string; value: string; answeredBy: { kind: string; id: string; channel: string } }>(harness.stack.gatewayUrl, new URL(pushed?.answerUrl ?? '').pathname, {
    method: 'POST',
    body: { answer: 'no' },
  });
  assert.deepEqual([answered.status, answered.body.status, answered.body.value], [200, 'answered', 'no']);
  assert.deepEqual([answered.body.answeredBy.kind, answered.body.answeredBy.id, answered.body.answeredBy.channel], ['subscriber', alice.externalId, 'web_push']);
  assert.deepEqual(pushedTo(bob.endpoint), []);
  // Questions are not marketing sends: the allowance is untouched.
  assert.equal(await monthlyUsage(audience.workspace.workspaceId), 0);
});

test('a decision is pushed to the end-user it addresses; a replay pushes nothing again', async () => {
  const audience = await approvers();
  const [alice, bob] = audience.subscribers;
  if (!alice || !bob) throw new Error('two subscribers expected');
  const body = { question: 'Refund order 1234?', type: 'select', options: ['full', 'partial'], externalId: bob.externalId, idempotencyKey: 'refund-1234' };
  const opened = await call<{ decisionId: string; decisionPageUrl: string }>(harness.stack.gatewayUrl, `${SERVER_API}/decisions`, {
    method: 'POST',
    key: audience.workspace.apiKey,
    body,
  });
  assert.equal(opened.status, 200);
  const [pushed] = await eventually('the decision pushed to bob', async () => pushedTo(bob.endpoint), (messages) => messages.length === 1);
  assert.deepEqual({ title: pushed?.title, body: pushed?.body, actions: pushed?.actions }, { title: 'A question for you', body: 'Refund order 1234?', actions: undefined });
  assert.match(pushed?.url ?? '', new RegExp(`^http://localhost:8080/a/${recipientToken(opened.body.decisionId, bob.externalId).source.slice(1)}`));
  const replay = await call(harness.stack.gatewayUrl, `${SERVER_API}/decisions`, { method: 'POST', key: audience.workspace.apiKey, body });
  assert.equal(replay.status, 200);
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  assert.equal(pushedTo(bob.endpoint).length, 1);
  assert.deepEqual(pushedTo(alice.endpoint), []);
});

test('in Terminal approval mode the question is stored and nothing is pushed', async () => {
  const workspace = await admin<TestWorkspace>('workspace', 'create', '--name', 'Terminal push', '--plan', 'growth', '--domain', 'shop.example.test', '--approval-mode', 'terminal');
  const site = await call<{ vapidPublicKey: string }>(harness.stack.gatewayUrl, `${SERVER_API}/site`, { key: workspace.apiKey });
  const subscription = harness.peer.createSubscription({ applicationServerKey: site.body.vapidPublicKey });
  const subscribed = await call(harness.stack.gatewayUrl, '/api/v1/subscribe', {
    method: 'POST',
    key: workspace.siteKey,
    headers: { origin: 'https://shop.example.test' },
    // An approver device, so only the mode keeps the question from it.
    body: { endpoint: subscription.endpoint, keys: subscription.keys, externalId: 'owner', externalIdProof: externalIdProof(await identitySecret(harness.stack.gatewayUrl, workspace), 'owner') },
  });
  assert.equal(subscribed.status, 201);
  const asked = await call<{ mode: string; status: string }>(harness.stack.gatewayUrl, `${SERVER_API}/ask`, {
    method: 'POST',
    key: workspace.apiKey,
    body: { question: 'Terminal only?', wait: false },
  });
  assert.deepEqual([asked.status, asked.body.mode, asked.body.status], [200, 'terminal', 'pending']);
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  assert.deepEqual(pushedTo(subscription.endpoint), []);
});
