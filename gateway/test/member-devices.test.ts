import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { consumers, QUESTION_PIPELINE } from '@herald/bus';
import {
  admin,
  call,
  connectDatabase,
  createWorkspace,
  eventually,
  externalIdProof,
  identitySecret,
  SERVER_API,
  startSendingHarness,
  subscribeBrowser,
  waitForQuiet,
  type SendingHarness,
  type TestWorkspace,
} from '@herald/testkit';

import { memberSessions, newAddress, ORIGIN, type MemberBody, type Session } from './member-sessions.js';

// A console member's devices (POST/GET/DELETE /me/devices, sessions only): a browser's push
// subscription the member turned notifications on in. A question addressed to {kind: member, id}
// is pushed to that member's devices and to nothing else; no other question, campaign or send
// reaches a member's device; a public subscribe cannot make one. The console's journey in Firefox
// is console/test/firefox-push.test.ts.

let harness: SendingHarness;
before(async () => {
  harness = await startSendingHarness({ decisions: true });
});
after(() => harness.stop());

const sessions = memberSessions(() => harness.stack.gatewayUrl);

type Answer = Record<string, unknown>;

interface Team {
  workspace: TestWorkspace;
  vapidPublicKey: string;
  alice: { session: Session; memberId: string };
  bob: { session: Session; memberId: string };
}

async function member(workspaceId: string, name: string): Promise<{ session: Session; memberId: string }> {
  const invited = await admin<{ memberId: string; signInUrl: string }>('member', 'invite', '--workspace', workspaceId, '--email', newAddress(name), '--role', 'approver', '--name', name);
  return { session: await sessions.signInWith(invited.signInUrl), memberId: invited.memberId };
}

/** A workspace with two approver members, Alice and Bob. */
async function team(): Promise<Team> {
  const workspace = await createWorkspace('growth', 'shop.example.test');
  const site = await call<{ vapidPublicKey: string }>(harness.stack.gatewayUrl, `${SERVER_API}/site`, { key: workspace.apiKey });
  return { workspace, vapidPublicKey: site.body.vapidPublicKey, alice: await member(workspace.workspaceId, 'Alice'), bob: await member(workspace.workspaceId, 'Bob') };
}

/** A new browser of the push peer, made one of the member's devices. */
async function addDevice(t: Team, session: Session, fields: Answer = { browser: 'Firefox', os: 'Linux' }) {
  const subscription = harness.peer.createSubscription({ applicationServerKey: t.vapidPublicKey });
  const added = await sessions.withSession(session, `${SERVER_API}/me/devices`, { method: 'POST', body: { ...subscription, ...fields } });
  assert.deepEqual([added.status, added.body.created], [201, true], JSON.stringify(added.body));
  return { id: String(added.body.deviceId), subscription };
}

const questionPushes = (endpoint: string) => harness.peer.received(endpoint).map((message) => harness.openPush(message).payload);

interface Delivery {
  channel: string;
  target: string;
  state: string;
  reached: number | null;
}

async function deliveriesOf(questionId: string): Promise<Delivery[]> {
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<Delivery>(`SELECT channel, target, state, reached FROM decision.question_deliveries WHERE question_id = $1 ORDER BY channel, target`, [questionId]);
    return rows;
  } finally {
    await db.end();
  }
}

/** Opens a decision with the workspace's key; its deliveries made, its pushes sent. */
async function decide(t: Team, body: Answer): Promise<{ id: string; deliveries: Delivery[] }> {
  const opened = await call<Answer>(harness.stack.gatewayUrl, `${SERVER_API}/decisions`, { method: 'POST', key: t.workspace.apiKey, body });
  assert.equal(opened.status, 200, JSON.stringify(opened.body));
  const id = String(opened.body.decisionId);
  const deliveries = await eventually(`${id} delivered`, () => deliveriesOf(id), (rows) => rows.length > 0 && rows.every((row) => row.state === 'delivered'));
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  return { id, deliveries };
}

test("a question to a member is pushed to that member's devices only, opening the inbox at it", async () => {
  const t = await team();
  const phone = await addDevice(t, t.alice.session, { browser: 'Safari', os: 'iOS' });
  const laptop = await addDevice(t, t.alice.session);
  const bobs = await addDevice(t, t.bob.session);
  // The same subscription again: the same device, not a second one.
  const again = await sessions.withSession(t.alice.session, `${SERVER_API}/me/devices`, { method: 'POST', body: phone.subscription });
  assert.deepEqual([again.status, again.body], [200, { deviceId: phone.id, created: false }]);

  const listed = await sessions.withSession(t.alice.session, `${SERVER_API}/me/devices`);
  assert.equal(listed.status, 200);
  const pushService = new URL(phone.subscription.endpoint).origin;
  const devices = listed.body.devices as Array<Answer & { createdAt: string }>;
  assert.deepEqual(
    devices.map(({ createdAt, ...device }) => (assert.ok(Date.parse(createdAt) > 0), device)),
    [
      { id: laptop.id, status: 'active', browser: 'Firefox', os: 'Linux', pushService },
      { id: phone.id, status: 'active', browser: 'Safari', os: 'iOS', pushService },
    ],
  );

  const asked = await decide(t, { question: 'Promote the canary?', approvers: [{ kind: 'member', id: t.alice.memberId }] });
  assert.deepEqual(asked.deliveries, [{ channel: 'web_push', target: `member:${t.alice.memberId}`, state: 'delivered', reached: 2 }]);
  const expected = { title: 'A question for you', body: 'Promote the canary?', url: `${ORIGIN}/console/inbox?question=${asked.id}` };
  for (const device of [phone, laptop]) {
    const pushes = await eventually('the push on each of her devices', async () => questionPushes(device.subscription.endpoint), (received) => received.length === 1);
    // No answer link nor Yes/No buttons: she answers in the console, signed in.
    assert.deepEqual({ ...pushes[0], notificationId: undefined }, { ...expected, notificationId: undefined });
  }
  assert.equal(questionPushes(bobs.subscription.endpoint).length, 0);

  // Escalated to Bob after a step: his device gets its own push, hers no second one.
  const escalated = await call<Answer>(harness.stack.gatewayUrl, `${SERVER_API}/decisions`, {
    method: 'POST',
    key: t.workspace.apiKey,
    body: { question: 'Roll back?', approvers: [{ kind: 'member', id: t.alice.memberId }], escalation: [{ afterSeconds: 1, approvers: [{ kind: 'member', id: t.bob.memberId }] }] },
  });
  assert.equal(escalated.status, 200, JSON.stringify(escalated.body));
  await eventually('the escalation pushed to Bob', async () => questionPushes(bobs.subscription.endpoint), (received) => received.length === 1);
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  assert.deepEqual(
    [phone, laptop, bobs].map((device) => questionPushes(device.subscription.endpoint).map((push) => push.body)),
    [['Promote the canary?', 'Roll back?'], ['Promote the canary?', 'Roll back?'], ['Roll back?']],
  );
});

test("no other question, campaign or send reaches a member's device", async () => {
  const t = await team();
  const device = await addDevice(t, t.alice.session);
  const secret = await identitySecret(harness.stack.gatewayUrl, t.workspace);
  const approverDevice = await subscribeBrowser(harness, t, { externalId: 'owner', tags: [], proof: externalIdProof(secret, 'owner') });

  // Unaddressed (the approver devices), by external id, and to Bob (no device): none to Alice's.
  const unaddressed = await decide(t, { question: 'Anyone?' });
  assert.deepEqual(unaddressed.deliveries, [{ channel: 'web_push', target: 'approver_devices', state: 'delivered', reached: 1 }]);
  const toBob = await decide(t, { question: 'Bob?', approvers: [{ kind: 'member', id: t.bob.memberId }] });
  assert.deepEqual(toBob.deliveries, [{ channel: 'web_push', target: `member:${t.bob.memberId}`, state: 'delivered', reached: 0 }]);
  // An external id that happens to be her member id is not her.
  const byExternalId = await decide(t, { question: 'By id?', approvers: [{ kind: 'subscriber', id: t.alice.memberId }] });
  assert.deepEqual(byExternalId.deliveries, [{ channel: 'web_push', target: `subscriber:${t.alice.memberId}`, state: 'delivered', reached: 0 }]);

  // /send to everyone reaches the site's subscriber, not the member's device; nor does the list show it.
  const everyone = await call<{ sent: number }>(harness.stack.gatewayUrl, `${SERVER_API}/send`, { method: 'POST', key: t.workspace.apiKey, body: { title: 'Sale', body: 'Today only' } });
  assert.deepEqual([everyone.status, everyone.body.sent], [200, 1]);
  const listed = await call<{ data: Array<{ id: string }> }>(harness.stack.gatewayUrl, `${SERVER_API}/subscribers`, { key: t.workspace.apiKey });
  assert.deepEqual(
    listed.body.data.map((subscriber) => subscriber.id),
    [approverDevice.id],
  );
  // Nor can a key read, change or delete it by its id.
  const byKey = `${SERVER_API}/subscribers/${device.id}`;
  for (const [method, body] of [['GET'], ['PATCH', { tags: ['vip'] }], ['DELETE']] as const) {
    const refused = await call<{ code: string }>(harness.stack.gatewayUrl, byKey, { method, key: t.workspace.apiKey, body });
    assert.deepEqual([method, refused.status, refused.body.code], [method, 404, 'not_found']);
  }
  const counted = await call(harness.stack.gatewayUrl, `${SERVER_API}/subscribers/count`, { key: t.workspace.apiKey });
  assert.deepEqual(counted.body, { total: 1, active: 1, unsubscribed: 0 });
  const channels = await call<{ site: unknown }>(harness.stack.gatewayUrl, `${SERVER_API}/channels`, { key: t.workspace.apiKey });
  assert.deepEqual(channels.body.site, { nativeAppDevices: 0, browserSubscriptions: 1 });
  await eventually('the sale pushed', async () => harness.peer.received(approverDevice.endpoint), (received) => received.length === 2);
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  assert.equal(harness.peer.received(device.subscription.endpoint).length, 0);
});

test("a removed member's devices go with them: a question still naming her reaches none, another member's device stays", async () => {
  const t = await team();
  const owner = await sessions.firstOwner(t.workspace);
  const [phone, laptop] = [await addDevice(t, t.alice.session), await addDevice(t, t.alice.session)];
  const bobs = await addDevice(t, t.bob.session);

  const removed = await sessions.withSession(owner.session, `${SERVER_API}/members/${t.alice.memberId}`, { method: 'DELETE' });
  assert.deepEqual([removed.status, (removed.body as unknown as MemberBody).status], [200, 'removed']);
  // Her sessions ended with the removal: she cannot list (nor add) devices any more.
  const hers = await sessions.withSession(t.alice.session, `${SERVER_API}/me/devices`);
  assert.deepEqual([hers.status, hers.body.code], [401, 'unauthorized']);
  // MemberRemoved published and handled: her devices are deleted.
  await waitForQuiet(harness.stack.topicPrefix, [consumers.audienceMembers]);

  const toHer = await decide(t, { question: 'Still there?', approvers: [{ kind: 'member', id: t.alice.memberId }] });
  assert.deepEqual(toHer.deliveries, [{ channel: 'web_push', target: `member:${t.alice.memberId}`, state: 'delivered', reached: 0 }]);
  const toBob = await decide(t, { question: 'Bob, still there?', approvers: [{ kind: 'member', id: t.bob.memberId }] });
  assert.deepEqual(toBob.deliveries, [{ channel: 'web_push', target: `member:${t.bob.memberId}`, state: 'delivered', reached: 1 }]);
  await eventually("the push on Bob's device", async () => questionPushes(bobs.subscription.endpoint), (received) => received.length === 1);
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  assert.deepEqual(
    [phone, laptop, bobs].map((device) => questionPushes(device.subscription.endpoint).map((push) => push.body)),
    [[], [], ['Bob, still there?']],
  );
  const listed = await sessions.withSession(t.bob.session, `${SERVER_API}/me/devices`);
  assert.deepEqual([listed.status, (listed.body.devices as Answer[]).map((device) => device.id)], [200, [bobs.id]]);
});

test('a public subscribe cannot make a member device', async () => {
  const t = await team();
  const site = await call<{ siteKey: string }>(harness.stack.gatewayUrl, `/api/v1/site/${t.workspace.siteSlug}`);
  const subscribe = (body: Answer) =>
    call<Answer>(harness.stack.gatewayUrl, '/api/v1/subscribe', { method: 'POST', key: site.body.siteKey, headers: { origin: 'https://shop.example.test' }, body });
  const forged = await subscribe({ ...harness.peer.createSubscription({ applicationServerKey: t.vapidPublicKey }), memberId: t.alice.memberId });
  assert.equal(forged.status, 400, JSON.stringify(forged.body));
  // Her device's endpoint subscribed again through the public route stays hers, and nobody else's.
  const device = await addDevice(t, t.alice.session);
  const resubscribed = await subscribe({ ...device.subscription, externalId: 'mallory' });
  assert.deepEqual([resubscribed.status, resubscribed.body.subscriberId], [200, device.id]);
  const asked = await decide(t, { question: 'Still hers?', approvers: [{ kind: 'member', id: t.alice.memberId }] });
  assert.equal(asked.deliveries[0]?.reached, 1);
  assert.deepEqual((await sessions.withSession(t.bob.session, `${SERVER_API}/me/devices`)).body, { devices: [] });
});

test('the device routes: a session and its CSRF token required, only your own devices, bad subscriptions refused', async () => {
  const t = await team();
  const other = await team();
  const subscription = harness.peer.createSubscription({ applicationServerKey: t.vapidPublicKey });
  const path = `${SERVER_API}/me/devices`;

  const anonymous = await call<Answer>(harness.stack.gatewayUrl, path, { method: 'POST', body: subscription });
  assert.deepEqual([anonymous.status, anonymous.body.code], [401, 'unauthorized']);
  const withKey = await call<Answer>(harness.stack.gatewayUrl, path, { method: 'POST', key: t.workspace.apiKey, body: subscription });
  assert.deepEqual([withKey.status, withKey.body.code], [403, 'forbidden']);
  const noCsrf = await sessions.withSession(t.alice.session, path, { method: 'POST', body: subscription, csrf: null });
  assert.deepEqual([noCsrf.status, noCsrf.body.code], [403, 'forbidden']);
  const plainHttp = await sessions.withSession(t.alice.session, path, { method: 'POST', body: { ...subscription, endpoint: 'http://push.example.test/x' } });
  assert.deepEqual([plainHttp.status, plainHttp.body.fields], [400, [{ field: 'endpoint', in: 'body', problem: 'must be an https URL' }]]);
  const extra = await sessions.withSession(t.alice.session, path, { method: 'POST', body: { ...subscription, memberId: t.bob.memberId } });
  assert.equal(extra.status, 400);
  assert.deepEqual((await sessions.withSession(t.alice.session, path)).body, { devices: [] });

  const device = await addDevice(t, t.alice.session);
  // Bob's session, and a member of another workspace, cannot remove Alice's device: 404.
  for (const session of [t.bob.session, other.alice.session]) {
    const refused = await sessions.withSession(session, `${path}/${device.id}`, { method: 'DELETE' });
    assert.deepEqual([refused.status, refused.body.code], [404, 'not_found']);
  }
  const noCsrfDelete = await sessions.withSession(t.alice.session, `${path}/${device.id}`, { method: 'DELETE', csrf: null });
  assert.equal(noCsrfDelete.status, 403);
  assert.deepEqual(((await sessions.withSession(t.alice.session, path)).body.devices as Answer[]).map((listed) => listed.id), [device.id]);

  const removed = await sessions.withSession(t.alice.session, `${path}/${device.id}`, { method: 'DELETE' });
  assert.equal(removed.status, 204);
  assert.deepEqual((await sessions.withSession(t.alice.session, path)).body, { devices: [] });
  const gone = await sessions.withSession(t.alice.session, `${path}/${device.id}`, { method: 'DELETE' });
  assert.equal(gone.status, 404);
  // Removed: the next question to her reaches nothing.
  const asked = await decide(t, { question: 'Anyone home?', approvers: [{ kind: 'member', id: t.alice.memberId }] });
  assert.deepEqual(asked.deliveries, [{ channel: 'web_push', target: `member:${t.alice.memberId}`, state: 'delivered', reached: 0 }]);
  assert.equal(harness.peer.received(device.subscription.endpoint).length, 0);
});
