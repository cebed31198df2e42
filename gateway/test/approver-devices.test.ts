import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { SEND_PIPELINE } from '@herald/bus';
import {
  call,
  createKey,
  createWorkspace,
  eventually,
  externalIdProof,
  identitySecret,
  pushesOf,
  SERVER_API,
  startSendingHarness,
  subscribeBrowser,
  waitForQuiet,
  type SendingHarness,
  type TestWorkspace,
} from '@herald/testkit';

// Questions go only to approver devices: browsers whose external id was proven (an
// identity-verification proof, or a pairing link). The attack of issue #24 step by step: the
// public site key, a forged-Origin subscribe as "owner", then reachability and the next questions;
// each is shown harmless. Campaigns and /send still reach the whole audience.

const ORIGIN = 'https://shop.example.test';

let harness: SendingHarness;
before(async () => {
  harness = await startSendingHarness({ decisions: true });
});
after(() => harness.stop());

interface Site {
  siteKey: string;
  vapidPublicKey: string;
}

type Answer = Record<string, unknown> & { code?: string; fields?: Array<{ field: string; in: string; problem: string }> };

const server = <T = Answer>(key: string, path: string, init: { method?: string; body?: unknown } = {}) =>
  call<T>(harness.stack.gatewayUrl, `${SERVER_API}${path}`, { key, ...init });

/** What anyone can read without a key: the site's public record (step 1 of the attack). */
async function publicSite(workspace: TestWorkspace): Promise<Site> {
  const response = await call<Site>(harness.stack.gatewayUrl, `/api/v1/site/${workspace.siteSlug}`);
  assert.equal(response.status, 200);
  return response.body;
}

/** POST /api/v1/subscribe as a script can send it: any Origin header, any body (a new browser unless given one). */
async function subscribeRaw(site: Site, body: Record<string, unknown>, subscription = harness.peer.createSubscription({ applicationServerKey: site.vapidPublicKey })) {
  const response = await call<Answer>(harness.stack.gatewayUrl, '/api/v1/subscribe', {
    method: 'POST',
    key: site.siteKey,
    headers: { origin: ORIGIN },
    body: { endpoint: subscription.endpoint, keys: subscription.keys, ...body },
  });
  return { response, endpoint: subscription.endpoint };
}

const subscriber = async (workspace: TestWorkspace, id: string) =>
  (await server<{ externalId: string | null; externalIdVerified: boolean }>(workspace.apiKey, `/subscribers/${id}`)).body;

const reachability = async (workspace: TestWorkspace, externalId = 'owner') =>
  (await server(workspace.apiKey, `/reachability?externalId=${encodeURIComponent(externalId)}`)).body;

/** Question pushes (answerUrl set) the strict push peer accepted for an endpoint. */
const questionsTo = (endpoint: string) =>
  harness.peer.received(endpoint).filter((message) => (harness.openPush(message).payload as { answerUrl?: string }).answerUrl !== undefined).length;

test('the attack: a forged-Origin subscribe as "owner" is stored unverified, counts for nothing and receives no question', async () => {
  const workspace = await createWorkspace('growth', 'shop.example.test');
  // 1. The public site key, without a key.
  const site = await publicSite(workspace);
  assert.match(site.siteKey, /^pk_/);

  // 2. A script on another page forges the Origin and claims to be the owner: accepted, unverified.
  const attacker = await subscribeRaw(site, { externalId: 'owner' });
  assert.deepEqual([attacker.response.status, attacker.response.body.created], [201, true]);
  const anonymous = await subscribeRaw(site, {});
  assert.equal(anonymous.response.status, 201);
  const attackerId = attacker.response.body.subscriberId as string;
  const stored = await subscriber(workspace, attackerId);
  assert.deepEqual([stored.externalId, stored.externalIdVerified], ['owner', false]);

  // The owner is not reachable through it: /reachability, /channels and requireReachable say so.
  assert.deepEqual(await reachability(workspace), { externalId: 'owner', reachable: false, browserSubscriptions: 0, nativeAppDevices: 0, channels: [] });
  assert.deepEqual((await server(workspace.apiKey, '/channels')).body, {
    keyOwner: { externalId: 'owner', nativeAppDevices: 0, browserSubscriptions: 0, reachable: false },
    // The site's audience is both browsers.
    site: { nativeAppDevices: 0, browserSubscriptions: 2 },
  });
  const refused = await server(workspace.apiKey, '/decisions', { method: 'POST', body: { question: 'Wire 5,000 EUR?', requireReachable: true } });
  assert.deepEqual([refused.status, refused.body.code], [409, 'conflict']);
  const team = await server(workspace.apiKey, '/decisions', { method: 'POST', body: { question: 'Anyone?', audience: 'team', requireReachable: true } });
  assert.deepEqual([team.status, team.body.code], [409, 'conflict']);

  // The real owner's browser, proven by the site's backend: the one approver device.
  const secret = await identitySecret(harness.stack.gatewayUrl, workspace);
  const owner = await subscribeBrowser(harness, { workspace, vapidPublicKey: site.vapidPublicKey }, { externalId: 'owner', tags: [], proof: externalIdProof(secret, 'owner') });
  assert.equal((await subscriber(workspace, owner.id)).externalIdVerified, true);
  assert.deepEqual(await reachability(workspace), { externalId: 'owner', reachable: true, browserSubscriptions: 1, nativeAppDevices: 0, channels: ['browser'] });

  // 3. Every kind of question: the owner's decision, the team's, /ask untargeted and by external id.
  const questions: Array<[string, unknown]> = [
    ['/decisions', { question: 'Deploy 4.2?', requireReachable: true }],
    ['/decisions', { question: 'Team, deploy 4.2?', audience: 'team', requireReachable: true }],
    ['/ask', { question: 'Anyone there?', wait: false }],
    ['/ask', { question: 'Owner, there?', wait: false, externalIds: ['owner'] }],
    ['/ask', { question: 'By id?', wait: false, subscriberIds: [attackerId, owner.id, anonymous.response.body.subscriberId] }],
  ];
  for (const [path, body] of questions) assert.equal((await server(workspace.apiKey, path, { method: 'POST', body })).status, 200, path);
  await eventually('every question pushed to the owner', async () => questionsTo(owner.endpoint), (count) => count === questions.length);
  await waitForQuiet(harness.stack.topicPrefix, SEND_PIPELINE);
  assert.equal(questionsTo(owner.endpoint), questions.length);
  assert.equal(questionsTo(attacker.endpoint), 0);
  assert.equal(questionsTo(anonymous.endpoint), 0);

  // Campaigns and /send keep reaching the whole audience, unverified and anonymous included.
  const everyone = await server<{ campaignId: string; sent: number }>(workspace.apiKey, '/send', { method: 'POST', body: { title: 'Sale', body: 'Today only' } });
  assert.deepEqual([everyone.status, everyone.body.sent], [200, 3]);
  const byExternalId = await server<{ campaignId: string; sent: number }>(workspace.apiKey, '/send', { method: 'POST', body: { title: 'Hi', body: 'You', externalIds: ['owner'] } });
  assert.deepEqual([byExternalId.status, byExternalId.body.sent], [200, 2]);
  const reached = (campaignId: string, count: number) =>
    eventually(`${campaignId} pushed`, async () => pushesOf(harness.peer, campaignId), (pushes) => [...pushes.values()].reduce((sum, n) => sum + n, 0) === count);
  assert.deepEqual(
    await reached(everyone.body.campaignId, 3),
    new Map([
      [attacker.endpoint, 1],
      [anonymous.endpoint, 1],
      [owner.endpoint, 1],
    ]),
  );
  assert.deepEqual(
    await reached(byExternalId.body.campaignId, 2),
    new Map([
      [attacker.endpoint, 1],
      [owner.endpoint, 1],
    ]),
  );
});

test('proofs: a right one verifies; a wrong, malformed, foreign or orphan one is a 400 naming externalIdProof and stores nothing', async () => {
  const [workspace, other] = [await createWorkspace('growth', 'shop.example.test'), await createWorkspace('growth', 'shop.example.test')];
  const site = await publicSite(workspace);
  const secret = await identitySecret(harness.stack.gatewayUrl, workspace);
  assert.match(secret, /^idsec_[A-Za-z0-9_-]{43}$/);
  const foreignSecret = await identitySecret(harness.stack.gatewayUrl, other);

  const refusals: Array<[string, Record<string, unknown>, string]> = [
    ['another workspace', { externalId: 'owner', externalIdProof: externalIdProof(foreignSecret, 'owner') }, 'does not prove externalId'],
    ['another external id', { externalId: 'owner', externalIdProof: externalIdProof(secret, 'someone') }, 'does not prove externalId'],
    ['not hex', { externalId: 'owner', externalIdProof: 'z'.repeat(64) }, 'must be 64 hex characters'],
    ['too short', { externalId: 'owner', externalIdProof: externalIdProof(secret, 'owner').slice(0, 63) }, 'must be 64 hex characters'],
    ['no external id', { externalIdProof: externalIdProof(secret, 'owner') }, 'needs the externalId it proves'],
  ];
  for (const [name, body, problem] of refusals) {
    const { response } = await subscribeRaw(site, body);
    assert.equal(response.status, 400, name);
    assert.equal(response.body.code, 'invalid_request', name);
    assert.deepEqual(response.body.fields?.map((f) => [f.field, f.in]), [['externalIdProof', 'body']], name);
    assert.ok(response.body.fields?.[0]?.problem.startsWith(problem), `${name}: ${response.body.fields?.[0]?.problem}`);
  }
  assert.deepEqual((await server(workspace.apiKey, '/subscribers/count')).body, { total: 0, active: 0, unsubscribed: 0 });

  // Uppercase hex is the same proof.
  const proven = await subscribeRaw(site, { externalId: 'owner', externalIdProof: externalIdProof(secret, 'owner').toUpperCase() });
  assert.equal(proven.response.status, 201);
  const id = proven.response.body.subscriberId as string;
  assert.equal((await subscriber(workspace, id)).externalIdVerified, true);

  // Any change of the external id without a proof makes it unverified: a PATCH to another id...
  assert.equal((await server(workspace.apiKey, `/subscribers/${id}`, { method: 'PATCH', body: { tags: ['vip'], externalId: 'owner' } })).status, 200);
  assert.equal((await subscriber(workspace, id)).externalIdVerified, true);
  const patched = await server<{ externalIdVerified: boolean }>(workspace.apiKey, `/subscribers/${id}`, { method: 'PATCH', body: { externalId: 'owner-2' } });
  assert.deepEqual([patched.status, patched.body.externalIdVerified], [200, false]);
  assert.equal((await reachability(workspace, 'owner-2')).browserSubscriptions, 0);
  // ...or the browser's setExternalId without one (the same browser subscribing again). Subscribing
  // again without an external id keeps the proven one.
  const browser = harness.peer.createSubscription({ applicationServerKey: site.vapidPublicKey });
  const deviceId = (await subscribeRaw(site, { externalId: 'owner', externalIdProof: externalIdProof(secret, 'owner') }, browser)).response.body.subscriberId as string;
  assert.equal((await subscriber(workspace, deviceId)).externalIdVerified, true);
  assert.deepEqual((await subscribeRaw(site, { tags: ['news'] }, browser)).response.body, { success: true, subscriberId: deviceId, created: false });
  assert.equal((await subscriber(workspace, deviceId)).externalIdVerified, true);
  assert.equal((await subscribeRaw(site, { externalId: 'owner' }, browser)).response.status, 200);
  assert.deepEqual(await subscriber(workspace, deviceId).then((s) => [s.externalId, s.externalIdVerified]), ['owner', false]);
  assert.equal((await reachability(workspace)).browserSubscriptions, 0);
});

test('the identity-verification secret: dashboard keys only; a rotation keeps the previous one valid while the new one takes over', async () => {
  const workspace = await createWorkspace('growth', 'shop.example.test');
  const runtime = await createKey(workspace.workspaceId, 'runtime');
  for (const [method, path] of [
    ['GET', '/identity-verification/secret'],
    ['POST', '/identity-verification/secret/rotate'],
  ] as const) {
    const refused = await server(runtime.apiKey, path, { method });
    assert.deepEqual([refused.status, refused.body.message], [403, 'This key cannot access this endpoint'], path);
  }
  // A browser subscribes first, so the gateway has the site key cached from before any secret existed.
  const site = await publicSite(workspace);
  assert.equal((await subscribeRaw(site, {})).response.status, 201);
  const first = (await server<{ secret: string; createdAt: string; previousSecretExpiresAt: string | null }>(workspace.apiKey, '/identity-verification/secret')).body;
  assert.equal(first.previousSecretExpiresAt, null);
  // Reading again gives the same secret.
  assert.equal((await server<{ secret: string }>(workspace.apiKey, '/identity-verification/secret')).body.secret, first.secret);
  const rotated = await server<{ secret: string; previousSecretExpiresAt: string }>(workspace.apiKey, '/identity-verification/secret/rotate', { method: 'POST' });
  assert.equal(rotated.status, 200);
  assert.notEqual(rotated.body.secret, first.secret);
  assert.ok(Math.abs(Date.parse(rotated.body.previousSecretExpiresAt) - Date.now() - 86_400_000) < 60_000, rotated.body.previousSecretExpiresAt);

  // The previous secret's proofs are still accepted during the grace period...
  const old = await subscribeRaw(site, { externalId: 'owner', externalIdProof: externalIdProof(first.secret, 'owner') });
  assert.equal(old.response.status, 201, JSON.stringify(old.response.body));
  // ...and the new one's at once, though the gateway's site-key cache still held the old secrets.
  const fresh = await subscribeRaw(site, { externalId: 'owner', externalIdProof: externalIdProof(rotated.body.secret, 'owner') });
  assert.equal(fresh.response.status, 201, JSON.stringify(fresh.response.body));
  assert.equal((await reachability(workspace)).browserSubscriptions, 2);
});

test('pairing: POST /pair on any plan makes a link whose browser becomes the owner\'s approver device and receives its questions', async () => {
  const workspace = await createWorkspace('free', 'shop.example.test');
  const runtime = await createKey(workspace.workspaceId, 'runtime');
  const paired = await server<{ enrollmentUrl: string; externalId: string; expiresAt: string }>(runtime.apiKey, '/pair', { method: 'POST', body: {} });
  assert.equal(paired.status, 200, JSON.stringify(paired.body));
  assert.equal(paired.body.externalId, 'owner');
  const token = /\/enroll\/([A-Za-z0-9_-]{43})$/.exec(paired.body.enrollmentUrl)?.[1] as string;
  const site = await publicSite(workspace);
  const browser = harness.peer.createSubscription({ applicationServerKey: site.vapidPublicKey });
  const used = await call<Answer>(harness.stack.gatewayUrl, `/api/v1/enroll/${token}`, { method: 'POST', body: { endpoint: browser.endpoint, keys: browser.keys } });
  assert.deepEqual([used.status, used.body.externalId], [201, 'owner']);
  assert.equal((await subscriber(workspace, used.body.subscriberId as string)).externalIdVerified, true);
  assert.deepEqual(await reachability(workspace), { externalId: 'owner', reachable: true, browserSubscriptions: 1, nativeAppDevices: 0, channels: ['browser'] });

  const opened = await server<{ decisionId: string }>(workspace.apiKey, '/decisions', { method: 'POST', body: { question: 'Merge the release branch?', requireReachable: true } });
  assert.equal(opened.status, 200);
  await eventually('the decision pushed to the paired browser', async () => questionsTo(browser.endpoint), (count) => count === 1);
});
