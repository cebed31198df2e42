import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  call,
  createKey,
  createWorkspace,
  eventually,
  freePort,
  metricValue,
  pendingQuestionId,
  scrapeMetrics,
  seedAudience,
  startSendingHarness,
  subscribeBrowser,
  type Audience,
  type SendingHarness,
} from '@herald/testkit';

import {
  AuthenticationError,
  ConflictError,
  externalIdProof,
  Herald,
  HeraldError,
  NotFoundError,
  PermissionError,
  RateLimitError,
  ServerError,
  RequestTimeoutError,
  ValidationError,
  type AnsweredBy,
  type Approver,
  type AskRecord,
  type EscalationStep,
} from '../src/index.js';
import { startCountingProxy } from './support.js';

// The JavaScript SDK against the running system: gateway, account, audience, campaign, delivery
// (to a strict local push service), policy and decision services. Questions live 8 s here, so a
// question that expires unanswered is seen within the test.

const ASK_LIFETIME_SECONDS = 8;

let harness: SendingHarness;
let audience: Audience;
before(async () => {
  harness = await startSendingHarness({ policy: true, decisions: true, services: ['flow'], env: { ASK_LIFETIME_SECONDS: String(ASK_LIFETIME_SECONDS) } });
  // Two approver devices (proven external ids user-0 and user-1): decisions addressed to them count them.
  audience = await seedAudience(harness, 2, 'growth', (index) => ({ externalId: `user-${index}`, tags: [], verified: true }));
});
// A stack that never started (before failed) has nothing to stop.
after(() => harness?.stop());

const client = (apiKey: string, baseUrl = harness.stack.gatewayUrl) => new Herald({ apiKey, baseUrl });

/** A client whose requests are listed as they are sent ("GET /ask/<id>?wait=1", paths below the server API). */
function recordingClient(apiKey: string): { herald: Herald; sent: string[] } {
  const sent: string[] = [];
  const recording: typeof fetch = (input, init) => {
    sent.push(`${init?.method ?? 'GET'} ${String(input).slice(`${harness.stack.gatewayUrl}/api/v1/server`.length)}`);
    return fetch(input, init);
  };
  return { herald: new Herald({ apiKey, baseUrl: harness.stack.gatewayUrl, fetch: recording }), sent };
}

/** Until the gateway holds exactly `count` callers open for an answer (its herald_approvals_waiters gauge). */
async function untilHeld(count: number): Promise<void> {
  await eventually(`${count} caller(s) held for an answer`, () => scrapeMetrics(harness.stack.gateways[0]?.metricsUrl), (metrics) => metricValue(metrics, 'herald_approvals_waiters') === count);
}

/** The error a call rejects with, checked to be of the class. */
async function rejection<E extends HeraldError>(ErrorClass: new (...args: never[]) => E, promise: Promise<unknown>): Promise<E> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof ErrorClass, `expected ${ErrorClass.name}, got ${String(err)}`);
    assert.ok(err instanceof HeraldError);
    return err;
  }
  assert.fail(`expected ${ErrorClass.name}, but the call succeeded`);
}

const tokenOf = (record: AskRecord) => record.liveUrl.slice(record.liveUrl.indexOf('/a/') + 3);
/** A person answers on the answer page's JSON endpoint (what a notification action does). */
async function personAnswers(record: AskRecord, answer: string): Promise<void> {
  const response = await call(harness.stack.gatewayUrl, `/api/v1/answer/${tokenOf(record)}`, { method: 'POST', body: { answer } });
  assert.equal(response.status, 200, JSON.stringify(response.body));
}

test('account: identity, site, channels, machines', async () => {
  const herald = client(audience.workspace.apiKey);
  const identity = await herald.getIdentity();
  const site = await herald.getSite();
  assert.deepEqual(identity.site, site);
  assert.equal(site.id, audience.workspace.siteId);
  assert.equal(site.slug, audience.workspace.siteSlug);
  assert.equal(site.siteKey, audience.workspace.siteKey);
  assert.equal(site.vapidPublicKey, audience.vapidPublicKey);
  assert.equal(site.domain, 'shop.example.test');
  assert.equal(identity.workspace.id, audience.workspace.workspaceId);
  assert.equal(identity.workspace.approvalMode, 'browser');
  assert.deepEqual(identity.plan, { name: 'growth', active: true, apiAccess: true, partner: false, rateLimitPerMinute: 500, monthlyNotificationAllowance: 500_000 });
  assert.equal(identity.key.origin, 'dashboard');
  assert.equal(identity.key.boundExternalId, null);
  assert.ok(audience.workspace.apiKey.startsWith(`pk_${identity.key.id}.`));

  assert.deepEqual(await herald.getChannels(), {
    keyOwner: { externalId: 'owner', nativeAppDevices: 0, browserSubscriptions: 0, reachable: false },
    site: { nativeAppDevices: 0, browserSubscriptions: 2 },
  });

  const machine = await herald.reportMachine({ machineId: 'build-box-1', name: 'Build box', platform: 'linux' });
  assert.deepEqual({ ...machine, firstSeenAt: '', lastSeenAt: '' }, { id: 'build-box-1', name: 'Build box', platform: 'linux', keyId: identity.key.id, firstSeenAt: '', lastSeenAt: '' });
  assert.deepEqual(await herald.listMachines(), [machine]);
});

test('options default to HERALD_API_KEY and HERALD_URL; without a key the constructor throws', async () => {
  assert.throws(() => new Herald(), { name: 'TypeError', message: 'No API key: pass apiKey or set HERALD_API_KEY' });
  process.env.HERALD_API_KEY = audience.workspace.apiKey;
  process.env.HERALD_URL = `${harness.stack.gatewayUrl}/`;
  try {
    assert.equal((await new Herald().getSite()).id, audience.workspace.siteId);
  } finally {
    delete process.env.HERALD_API_KEY;
    delete process.env.HERALD_URL;
  }
});

test('send (Idempotency-Key header), the notification and its recipients', async () => {
  const herald = client(audience.workspace.apiKey);
  const sent = await herald.send({ title: 'Hello', body: 'From the SDK', url: 'https://shop.example.test/sale' }, { idempotencyKey: 'sdk-send-1' });
  assert.match(sent.campaignId, /^ntf_/);
  assert.deepEqual(sent, { success: true, status: 'queued', campaignId: sent.campaignId, sent: 2, limits: { remaining: 500_000 - 2, limit: 500_000 }, duplicate: false });
  // A replay returns the first result and sends nothing.
  assert.deepEqual(await herald.send({ title: 'Hello', body: 'From the SDK', url: 'https://shop.example.test/sale' }, { idempotencyKey: 'sdk-send-1' }), { ...sent, duplicate: true });
  const conflict = await rejection(ConflictError, herald.send({ title: 'Other', body: 'From the SDK' }, { idempotencyKey: 'sdk-send-1' }));
  assert.deepEqual({ status: conflict.status, code: conflict.code }, { status: 409, code: 'conflict' });

  const notification = await eventually('delivered', () => herald.getNotification(sent.campaignId), (value) => value.status === 'completed');
  assert.deepEqual(
    { ...notification, createdAt: '', completedAt: '', lastDelivery: { ...notification.lastDelivery, reportedAt: '' } },
    {
      id: sent.campaignId,
      status: 'completed',
      title: 'Hello',
      body: 'From the SDK',
      url: 'https://shop.example.test/sale',
      iconUrl: null,
      imageUrl: null,
      createdAt: '',
      completedAt: '',
      counts: { targeted: 2, queued: 2, delivered: 2, failed: 0, expired: 0, pending: 0 },
      lastDelivery: { statusCode: 201, outcome: 'delivered', reportedAt: '' },
    },
  );
  const ids = audience.subscribers.map((subscriber) => subscriber.id).sort();
  const first = await herald.listNotificationRecipients(sent.campaignId, { limit: 1, status: 'delivered' });
  assert.equal(first.hasMore, true);
  assert.deepEqual(first.data.map(({ subscriberId, status, attempts, lastStatusCode }) => ({ subscriberId, status, attempts, lastStatusCode })), [
    { subscriberId: ids[0], status: 'delivered', attempts: 1, lastStatusCode: 201 },
  ]);
  const second = await herald.listNotificationRecipients(sent.campaignId, { limit: 1, cursor: first.nextCursor ?? '' });
  assert.deepEqual({ ids: second.data.map((recipient) => recipient.subscriberId), hasMore: second.hasMore, nextCursor: second.nextCursor }, { ids: [ids[1]], hasMore: false, nextCursor: null });

  const none = await rejection(ValidationError, herald.send({ title: 'Hi', body: 'Nobody', externalIds: ['nobody'] }));
  assert.equal(none.body.error, 'No subscribers found matching criteria');
});

test('subscribers: list, count, get, patch, delete', async () => {
  const local = await seedAudience(harness, 3, 'growth', (index) => ({ externalId: `person-${index}`, tags: index === 0 ? ['news'] : [] }));
  const herald = client(local.workspace.apiKey);
  const [a, b, c] = local.subscribers;
  assert.ok(a && b && c);
  const page = await herald.listSubscribers({ limit: 2 });
  assert.deepEqual({ ids: page.data.map((subscriber) => subscriber.id), hasMore: page.hasMore }, { ids: [c.id, b.id], hasMore: true });
  const rest = await herald.listSubscribers({ limit: 2, cursor: page.nextCursor ?? '' });
  assert.deepEqual({ ids: rest.data.map((subscriber) => subscriber.id), hasMore: rest.hasMore, nextCursor: rest.nextCursor }, { ids: [a.id], hasMore: false, nextCursor: null });
  assert.deepEqual((await herald.listSubscribers({ tags: ['news'], status: 'active' })).data.map((subscriber) => subscriber.id), [a.id]);
  assert.deepEqual((await herald.listSubscribers({ externalId: 'person-1' })).data.map((subscriber) => subscriber.id), [b.id]);
  assert.deepEqual(await herald.countSubscribers(), { total: 3, active: 3, unsubscribed: 0 });

  const detail = await herald.getSubscriber(a.id);
  assert.deepEqual(
    { ...detail, createdAt: '', updatedAt: '' },
    {
      id: a.id,
      siteId: local.workspace.siteId,
      status: 'active',
      externalId: 'person-0',
    externalIdVerified: false,
      tags: ['news'],
      customData: {},
      browser: null,
      os: null,
      country: null,
      createdAt: '',
      updatedAt: '',
      delivery: { pushService: new URL(a.endpoint).origin, reachable: true, unsubscribedAt: null },
      device: { browser: null, os: null, language: null, timezone: null },
    },
  );
  const updated = await herald.updateSubscriber(a.id, { tags: ['vip', 'vip'], externalId: null, customData: { tier: 'gold' } });
  assert.deepEqual({ tags: updated.tags, externalId: updated.externalId, customData: updated.customData }, { tags: ['vip'], externalId: null, customData: { tier: 'gold' } });
  assert.deepEqual(await herald.getSubscriber(a.id), updated);

  assert.equal(await herald.deleteSubscriber(a.id), undefined);
  assert.deepEqual(await herald.countSubscribers(), { total: 2, active: 2, unsubscribed: 0 });
  const gone = await rejection(NotFoundError, herald.getSubscriber(a.id));
  assert.deepEqual({ status: gone.status, code: gone.code }, { status: 404, code: 'not_found' });
  // Another workspace's subscriber is 404 too.
  await rejection(NotFoundError, client(audience.workspace.apiKey).getSubscriber(b.id));
});

test('templates and campaigns: create, page, change, send, pause/resume moves, stats, delete', async () => {
  const local = await seedAudience(harness, 2);
  const herald = client(local.workspace.apiKey);
  const template = await herald.createTemplate({ name: 'Welcome', title: 'Hello {{name|friend}}', body: 'Thanks for joining' });
  assert.deepEqual([template.name, template.title, template.actionUrl], ['Welcome', 'Hello {{name|friend}}', null]);
  assert.equal((await herald.updateTemplate(template.id, { body: 'Welcome aboard' })).body, 'Welcome aboard');
  assert.deepEqual((await herald.listTemplates({ limit: 1 })).data.map((item) => item.id), [template.id]);
  assert.deepEqual(await herald.getTemplate(template.id), { ...template, body: 'Welcome aboard', updatedAt: (await herald.getTemplate(template.id)).updatedAt });

  const fromTemplate = await herald.createCampaign({ name: 'Onboarding', templateId: template.id, variables: { name: 'Ada' } });
  assert.deepEqual([fromTemplate.status, fromTemplate.title, fromTemplate.body, fromTemplate.templateId], ['draft', 'Hello Ada', 'Welcome aboard', template.id]);
  const renamed = await herald.updateCampaign(fromTemplate.id, { name: 'Onboarding v2' });
  assert.equal(renamed.name, 'Onboarding v2');
  const sending = await herald.sendCampaign(fromTemplate.id);
  assert.deepEqual([sending.status, sending.totalTargeted], ['sending', 2]);
  const conflict = await rejection(ConflictError, herald.resumeCampaign(fromTemplate.id));
  assert.deepEqual([conflict.status, conflict.code], [409, 'conflict']);
  const stats = await eventually('the campaign sent', () => herald.getCampaignStats(fromTemplate.id), (read) => read.totalSent === 2);
  assert.deepEqual(stats, { totalSent: 2, totalDelivered: 0, totalClicked: 0, totalFailed: 0, deliveryRate: 0, clickRate: 0 });
  const series = await herald.getCampaignStatsSeries(fromTemplate.id, { bucket: 'hour', to: new Date(Date.now() + 1_000).toISOString() });
  assert.equal(series.bucket, 'hour');
  assert.deepEqual([series.data.reduce((sum, bucket) => sum + bucket.sent, 0), series.data.reduce((sum, bucket) => sum + bucket.delivered, 0)], [2, 0]);

  const scheduled = await herald.createCampaign({ name: 'Later', title: 'Soon', body: 'Tomorrow', scheduledAt: new Date(Date.now() + 86_400_000).toISOString() });
  assert.equal(scheduled.status, 'scheduled');
  const page = await herald.listCampaigns({ limit: 1 });
  assert.deepEqual([page.data.map((item) => item.id), page.hasMore], [[scheduled.id], true]);
  assert.equal((await herald.getCampaign(scheduled.id)).name, 'Later');
  assert.equal(await herald.deleteCampaign(scheduled.id), undefined);
  await rejection(NotFoundError, herald.getCampaign(scheduled.id));
  assert.equal(await herald.deleteTemplate(template.id), undefined);
  await rejection(NotFoundError, herald.getTemplate(template.id));
  // Pause and resume answer the campaign in its new state.
  const slow = await herald.createCampaign({ name: 'Slow', title: 't', body: 'b', throttlePerMinute: 1 });
  await herald.sendCampaign(slow.id);
  assert.equal((await herald.pauseCampaign(slow.id)).status, 'paused');
  assert.equal((await herald.resumeCampaign(slow.id)).status, 'active');
});

test('segments: create, page, read, count, change, aim a campaign, delete', async () => {
  const local = await seedAudience(harness, 3, 'growth', (n) => ({ externalId: `user-${n}`, tags: n === 0 ? ['vip'] : [] }));
  const herald = client(local.workspace.apiKey);
  const vips = await herald.createSegment({ name: 'VIPs', filter: { tags: { all: ['vip'] }, hasExternalId: true } });
  assert.deepEqual([vips.name, vips.filter], ['VIPs', { tags: { all: ['vip'] }, hasExternalId: true }]);
  const everyone = await herald.createSegment({ name: 'Everyone', filter: {} });
  const page = await herald.listSegments({ limit: 1 });
  assert.deepEqual([page.data.map((item) => item.id), page.hasMore], [[everyone.id], true]);
  assert.deepEqual(await herald.getSegment(vips.id), vips);
  assert.deepEqual(await herald.countSegment(vips.id), { active: 1, total: 1 });
  assert.deepEqual(await herald.countSegment(everyone.id), { active: 3, total: 3 });
  const changed = await herald.updateSegment(vips.id, { filter: { tags: { none: ['vip'] } } });
  assert.deepEqual(changed.filter, { tags: { none: ['vip'] } });
  assert.deepEqual(await herald.countSegment(vips.id), { active: 2, total: 2 });
  const campaign = await herald.createCampaign({ name: 'To some', title: 't', body: 'b', segmentId: vips.id });
  assert.equal(campaign.segmentId, vips.id);
  const invalid = await rejection(ValidationError, herald.createCampaign({ name: 'To none', title: 't', body: 'b', segmentId: 'seg_unknown' }));
  assert.deepEqual([invalid.status, invalid.fields], [400, [{ field: 'segmentId', in: 'body', problem: 'names no segment of this workspace' }]]);
  assert.equal(await herald.deleteSegment(everyone.id), undefined);
  await rejection(NotFoundError, herald.countSegment(everyone.id));
});

test('flows: create, activate (409 without steps), a subscription runs it, page by status, change, pause, delete', async () => {
  const local = await seedAudience(harness, 0);
  const herald = client(local.workspace.apiKey);
  const empty = await herald.createFlow({ name: 'Empty', triggerType: 'subscription' });
  assert.deepEqual([empty.status, empty.steps, empty.executionCount], ['draft', [], 0]);
  const refused = await rejection(ConflictError, herald.activateFlow(empty.id));
  assert.deepEqual([refused.status, refused.code], [409, 'conflict']);
  const invalid = await rejection(ValidationError, herald.createFlow({ name: 'Bad', triggerType: 'subscription', steps: [{ stepType: 'delay', config: { delay: { value: 0, unit: 'days' } } }] }));
  assert.deepEqual(invalid.fields, [{ field: 'steps[0].config.delay.value', in: 'body', problem: 'must be greater than 0' }]);

  const welcome = await herald.createFlow({
    name: 'Welcome',
    triggerType: 'subscription',
    steps: [{ stepType: 'send_notification', config: { notification: { title: 'Welcome', body: 'Glad you are here' } } }, { stepType: 'exit', config: {} }],
  });
  assert.equal((await herald.activateFlow(welcome.id)).status, 'active');
  const subscriber = await subscribeBrowser(harness, local, { externalId: 'sdk-user', tags: [] });
  const runs = await eventually('the run exited', () => herald.listFlowRuns(welcome.id), (page) => page.data[0]?.state === 'exited');
  assert.deepEqual([runs.data.length, runs.data[0]?.subscriberId, runs.data[0]?.notificationIds.length, runs.hasMore], [1, subscriber.id, 1, false]);
  assert.equal((await herald.getFlow(welcome.id)).executionCount, 1);
  assert.deepEqual((await herald.listFlows({ status: 'active' })).data.map((flow) => flow.id), [welcome.id]);

  const renamed = await herald.updateFlow(welcome.id, { name: 'Welcome v2', steps: [{ stepType: 'exit', config: {} }] });
  assert.deepEqual([renamed.name, renamed.steps.map((step) => step.stepType)], ['Welcome v2', ['exit']]);
  assert.equal((await herald.pauseFlow(welcome.id)).status, 'paused');
  assert.equal(await herald.deleteFlow(welcome.id), undefined);
  await rejection(NotFoundError, herald.getFlow(welcome.id));
});

const POLICY = `
@id("read-anything")
permit(principal, action, resource) when { resource.name == "read_file" };

@id("deploy-reviewed")
@requires_human
permit(principal, action, resource) when { resource.name == "deploy" };
`;

test('policy and authorize', async () => {
  const workspace = await createWorkspace('growth');
  const herald = client(workspace.apiKey);
  assert.deepEqual(await herald.getPolicy(), { policy: null, version: 0, updatedAt: null });
  const put = await herald.putPolicy(POLICY);
  assert.deepEqual({ policy: put.policy, version: put.version }, { policy: POLICY, version: 1 });
  assert.deepEqual(await herald.getPolicy(), put);

  const allow = await herald.authorize({ toolName: 'read_file', toolTarget: 'README.md' });
  assert.match(allow.authorizationId, /^authz_/);
  assert.deepEqual({ ...allow, authorizationId: '' }, { verdict: 'allow', policy: 'read-anything', reason: 'permitted by policy read-anything', authorizationId: '' });
  const review = await herald.authorize({ toolName: 'deploy', parameters: { replicas: 3 } });
  assert.deepEqual({ verdict: review.verdict, policy: review.policy }, { verdict: 'requires_human', policy: 'deploy-reviewed' });

  const invalid = await rejection(ValidationError, herald.putPolicy('permit(principal, action, resource) when { nonsense };'));
  assert.equal(invalid.body.error, 'Invalid policy');
  const deleted = await herald.deletePolicy();
  assert.deepEqual({ policy: deleted.policy, version: deleted.version }, { policy: null, version: 2 });
  assert.deepEqual({ ...(await herald.authorize({ toolName: 'read_file' })), authorizationId: '' }, { verdict: 'deny', policy: null, reason: 'no policy', authorizationId: '' });

  // Past versions and try-it.
  const first = await herald.listPolicyVersions({ limit: 1 });
  assert.deepEqual([first.data.map((version) => [version.version, version.deleted]), first.hasMore], [[[2, true]], true]);
  const rest = await herald.listPolicyVersions({ cursor: first.nextCursor ?? '' });
  assert.deepEqual([rest.data.map((version) => version.version), rest.nextCursor], [[1], null]);
  assert.equal((await herald.getPolicyVersion(1)).policy, POLICY);
  assert.deepEqual(await herald.evaluatePolicy({ policy: POLICY, toolName: 'deploy' }), {
    verdict: 'requires_human',
    policy: 'deploy-reviewed',
    reason: 'policy deploy-reviewed permits this call only after a person approves it',
    version: null,
  });
  assert.deepEqual(await herald.evaluatePolicy({ toolName: 'deploy' }), { verdict: 'deny', policy: null, reason: 'no policy', version: 2 });
  assert.equal((await rejection(ValidationError, herald.evaluatePolicy({ policy: 'permit(', toolName: 'x' }))).body.error, 'Invalid policy');
});

test('keys and enrollment (Partner)', async () => {
  const partner = await createWorkspace('partner');
  const herald = client(partner.apiKey);
  const created = await herald.createKey({ externalId: 'user-1', name: 'Alice agent', expiresInSeconds: 3_600 });
  assert.match(created.apiKey, new RegExp(`^pk_${created.key.id}\\.[A-Za-z0-9_-]{43}$`));
  assert.deepEqual(
    { ...created.key, createdAt: '', expiresAt: '' },
    { id: created.key.id, name: 'Alice agent', externalId: 'user-1', createdAt: '', lastUsedAt: null, expiresAt: '', revoked: false, revokedAt: null },
  );
  const other = await herald.createKey({ externalId: 'user-2' });
  assert.equal(other.key.name, 'bound key');
  assert.deepEqual((await herald.listKeys()).map((key) => key.id), [other.key.id, created.key.id]);
  assert.deepEqual(await herald.listKeys({ externalId: 'user-1' }), [created.key]);

  const bound = client(created.apiKey);
  assert.equal((await bound.getReachability()).externalId, 'user-1');
  const link = await bound.enroll();
  assert.equal(link.externalId, 'user-1');
  assert.match(link.enrollmentUrl, /\/enroll\/[A-Za-z0-9_-]{43}$/);
  assert.ok(Date.parse(link.expiresAt) > Date.now());
  assert.equal((await herald.enroll({ externalId: 'user-9' })).externalId, 'user-9');
  const needsId = await rejection(ValidationError, herald.enroll());
  assert.deepEqual(needsId.fields, [{ field: 'externalId', in: 'body', problem: 'is required' }]);
  const foreign = await rejection(PermissionError, bound.enroll({ externalId: 'user-2' }));
  assert.equal(foreign.code, 'forbidden');
  const noMinting = await rejection(PermissionError, bound.listKeys());
  assert.equal(noMinting.body.message, 'This key cannot access this endpoint');

  const revoked = await herald.revokeKey(other.key.id);
  assert.equal(revoked.revoked, true);
  assert.deepEqual(await herald.revokeKey(other.key.id), revoked);
  await rejection(NotFoundError, herald.revokeKey('unknownkeyid0000'));
  // Never used before, so no gateway remembers it: refused at once.
  const revokedUse = await rejection(AuthenticationError, client(other.apiKey).getIdentity());
  assert.equal(revokedUse.code, 'unauthorized');
});

test('ask: create without waiting, read, withdraw; the pending limit is a RateLimitError without retryAfter', async () => {
  const workspace = await createWorkspace('growth');
  const herald = client(workspace.apiKey);
  const asked = await herald.ask({ question: 'Deploy to production?', wait: false });
  assert.match(asked.correlationId, /^ask_/);
  assert.deepEqual(
    { ...asked, liveUrl: '', expiresInSeconds: 0, expiresAt: '', createdAt: '' },
    {
      correlationId: asked.correlationId,
      question: 'Deploy to production?',
      type: 'confirm',
      status: 'pending',
      answered: false,
      options: [],
      context: null,
      placeholder: null,
      agentName: null,
      liveUrl: '',
      pollUrl: `http://localhost:8080/api/v1/server/ask/${asked.correlationId}`,
      expiresInSeconds: 0,
      expiresAt: '',
      createdAt: '',
      mode: 'browser',
      approvers: [],
      answeredBy: null,
      escalation: [],
    },
  );
  assert.equal(asked.expiresInSeconds, ASK_LIFETIME_SECONDS);
  const read = await herald.getAsk(asked.correlationId);
  assert.equal(read.status, 'pending');
  const waited = await herald.getAsk(asked.correlationId, { wait: 1 });
  assert.equal(waited.status, 'timeout');
  assert.match(waited.hint ?? '', /^No answer yet\./);
  // Waiting on a question asked earlier until the budget ends: the question is still open.
  const stillOpen = await herald.waitForAsk(asked, { totalTimeoutMs: 1_500, windowSeconds: 1 });
  assert.deepEqual({ status: stillOpen.status, answered: stillOpen.answered }, { status: 'timeout', answered: false });
  const second = await herald.ask({ question: 'Roll back?', wait: false });
  const answered = await herald.answerAsk(second.correlationId, true);
  assert.deepEqual([answered.status, answered.value, answered.answeredBy?.kind], ['answered', 'yes', 'key']);
  assert.equal((await rejection(ConflictError, herald.answerAsk(second.correlationId, 'no'))).code, 'conflict');
  const withdrawn = await herald.withdrawAsk(asked.correlationId);
  assert.deepEqual({ status: withdrawn.status, answered: withdrawn.answered }, { status: 'withdrawn', answered: false });
  const again = await rejection(ConflictError, herald.withdrawAsk(asked.correlationId));
  assert.equal(again.code, 'conflict');
  const listed = await herald.listAsks({ status: 'withdrawn', limit: 1 });
  assert.deepEqual([listed.data.map((record) => record.correlationId), listed.data[0]?.status], [[asked.correlationId], 'withdrawn']);
  await rejection(NotFoundError, client(audience.workspace.apiKey).getAsk(asked.correlationId));

  for (let index = 0; index < 25; index += 1) await herald.ask({ question: `Question ${index}?`, wait: false });
  const limited = await rejection(RateLimitError, herald.ask({ question: 'One too many?', wait: false }));
  assert.deepEqual({ status: limited.status, code: limited.code, retryAfter: limited.retryAfter }, { status: 429, code: undefined, retryAfter: undefined });
  assert.match(limited.body.error ?? '', /^This workspace already has 25 pending questions/);

  const partner = await createWorkspace('partner');
  const refused = await rejection(PermissionError, client(partner.apiKey).ask({ question: 'Sure?' }));
  assert.equal(refused.code, 'partner_decision_required');
});

test('askAndWait waits across several windows until a person answers', async () => {
  const workspace = await createWorkspace('growth');
  const { herald, sent } = recordingClient(workspace.apiKey);
  const waiting = herald.askAndWait({ question: 'Ship it?', agentName: 'release-bot' }, { totalTimeoutMs: 30_000, windowSeconds: 1 });
  const id = await pendingQuestionId(workspace.workspaceId, 'ask');
  // The person answers once two one-second windows (the POST's and a GET's) ran out without an answer.
  const window = `GET /ask/${id}?wait=1`;
  await eventually('the third window asked for', async () => sent.filter((request) => request === window).length, (windows) => windows >= 2);
  await personAnswers(await client(workspace.apiKey).getAsk(id), 'yes');
  const record = await waiting;
  assert.deepEqual({ id: record.correlationId, status: record.status, answered: record.answered, value: record.value }, { id, status: 'answered', answered: true, value: 'yes' });
  // One more window at most, if the answer came just as the third ran out.
  assert.equal(sent[0], 'POST /ask');
  assert.ok(sent.length >= 3 && sent.length <= 4 && sent.slice(1).every((request) => request === window), sent.join(', '));
});

test('askAndWait stops when the question expires unanswered, or when the caller budget ends', async () => {
  const workspace = await createWorkspace('growth');
  const herald = client(workspace.apiKey);
  const started = Date.now();
  const expired = await herald.askAndWait({ question: 'Anyone there?' }, { totalTimeoutMs: 60_000, windowSeconds: 3 });
  assert.deepEqual({ status: expired.status, answered: expired.answered, expiresInSeconds: expired.expiresInSeconds }, { status: 'timeout', answered: false, expiresInSeconds: 0 });
  assert.match(expired.hint ?? '', /treat it as not approved/);
  const elapsed = Date.now() - started;
  assert.ok(elapsed >= (ASK_LIFETIME_SECONDS - 1) * 1_000 && elapsed < (ASK_LIFETIME_SECONDS + 5) * 1_000, String(elapsed));

  const budgetStart = Date.now();
  const open = await herald.askAndWait({ question: 'Still there?' }, { totalTimeoutMs: 2_500, windowSeconds: 1 });
  assert.equal(open.answered, false);
  assert.ok(open.expiresInSeconds > 0);
  assert.ok(Date.now() - budgetStart < 4_500);
});

test('decisions: create with an Idempotency-Key, replay, read, answer, cancel, reachability', async () => {
  const herald = client(audience.workspace.apiKey);
  const opened = await herald.createDecision(
    { question: 'Refund order 1234?', externalId: 'user-0', toolName: 'refund', toolTarget: 'order/1234', parameters: { amount: 40 } },
    { idempotencyKey: 'refund-1234' },
  );
  assert.match(opened.decisionId, /^dec_/);
  // The lifetime counts down in whole seconds: a slow request crosses a second's boundary.
  assert.equal(Math.round((Date.parse(opened.expiresAt) - Date.parse(opened.createdAt)) / 1000), 3_600);
  assert.ok(opened.expiresInSeconds === 3_600 || opened.expiresInSeconds === 3_599, `expiresInSeconds ${opened.expiresInSeconds}`);
  assert.deepEqual(
    { ...opened, decisionPageUrl: '', expiresAt: '', createdAt: '', expiresInSeconds: 3_600 },
    {
      decisionId: opened.decisionId,
      status: 'pending',
      approved: false,
      answer: null,
      question: 'Refund order 1234?',
      type: 'confirm',
      options: [],
      context: null,
      placeholder: null,
      agentName: null,
      audience: 'user',
      externalId: 'user-0',
      toolName: 'refund',
      toolTarget: 'order/1234',
      parameters: { amount: 40 },
      mode: 'browser',
      pollUrl: `http://localhost:8080/api/v1/server/decisions/${opened.decisionId}`,
      decisionPageUrl: '',
      expiresInSeconds: 3_600,
      expiresAt: '',
      createdAt: '',
      answeredAt: null,
      cancelledAt: null,
      reachability: { reachable: true, browserSubscriptions: 1, nativeAppDevices: 0 },
      idempotencyKey: 'refund-1234',
      approvers: [],
      answeredBy: null,
      escalation: [],
      duplicate: false,
    },
  );
  const replay = await herald.createDecision(
    { question: 'Refund order 1234?', externalId: 'user-0', toolName: 'refund', toolTarget: 'order/1234', parameters: { amount: 40 } },
    { idempotencyKey: 'refund-1234' },
  );
  assert.deepEqual(replay, { ...opened, expiresInSeconds: replay.expiresInSeconds, duplicate: true });
  await rejection(ConflictError, herald.createDecision({ question: 'Refund order 9?', externalId: 'user-0' }, { idempotencyKey: 'refund-1234' }));
  assert.deepEqual(await herald.getDecision(opened.decisionId), { ...opened, expiresInSeconds: (await herald.getDecision(opened.decisionId)).expiresInSeconds });

  const answered = await herald.answerDecision(opened.decisionId, true);
  assert.deepEqual({ status: answered.status, approved: answered.approved, answer: answered.answer }, { status: 'answered', approved: true, answer: 'yes' });
  const twice = await rejection(ConflictError, herald.answerDecision(opened.decisionId, 'no'));
  assert.equal(twice.code, 'conflict');

  const other = await herald.createDecision({ question: 'Pick a size', type: 'select', options: ['S', 'M'], audience: 'team' });
  assert.equal(other.reachability.browserSubscriptions, 2);
  const cancelled = await herald.cancelDecision(other.decisionId);
  assert.deepEqual({ status: cancelled.status, approved: cancelled.approved }, { status: 'cancelled', approved: false });
  const inbox = await herald.listDecisions({ status: 'cancelled', limit: 1 });
  assert.deepEqual(inbox.data.map((decision) => decision.decisionId), [other.decisionId]);
  // Its record: opened, then cancelled, chained; a page of one continues with its cursor.
  const record = await herald.listDecisionEvents(other.decisionId);
  const kinds = record.data.map((entry) => entry.kind).filter((kind) => kind !== 'delivered');
  assert.deepEqual(kinds, ['opened', 'cancelled']);
  assert.deepEqual([record.data[0]?.seq, record.data[0]?.prevHash, record.data[1]?.prevHash], [1, '', record.data[0]?.hash]);
  const firstPage = await herald.listDecisionEvents(other.decisionId, { limit: 1 });
  const rest = await herald.listDecisionEvents(other.decisionId, { limit: 100, cursor: firstPage.nextCursor ?? '' });
  // (A delivery still in flight may add an entry after the first read.)
  assert.deepEqual([...firstPage.data, ...rest.data].slice(0, record.data.length), record.data);
  await rejection(NotFoundError, herald.listAskEvents(other.decisionId));
  const unreachable = await rejection(ConflictError, herald.createDecision({ question: 'Hello?', externalId: 'nobody', requireReachable: true }));
  assert.equal(unreachable.code, 'conflict');

  assert.deepEqual(await herald.getReachability({ externalId: 'user-1' }), { externalId: 'user-1', reachable: true, browserSubscriptions: 1, nativeAppDevices: 0, channels: ['browser'] });
  assert.deepEqual(await herald.getReachability(), { externalId: 'owner', reachable: false, browserSubscriptions: 0, nativeAppDevices: 0, channels: [] });
});

test('approvers and escalation: only a named approver answers, and answeredBy says who', async () => {
  const workspace = await createWorkspace('growth');
  const approver = await createKey(workspace.workspaceId, 'runtime');
  const agent = client(workspace.apiKey);
  const escalation: EscalationStep[] = [{ afterSeconds: 600, channels: ['email'], approvers: [{ kind: 'email', id: 'cto@example.com' }] }];
  const approvers: Approver[] = [{ kind: 'key', id: approver.keyId }];
  const opened = await agent.createDecision({ question: 'Drop the staging database?', approvers, escalation });
  assert.deepEqual([opened.approvers, opened.answeredBy, opened.escalation], [approvers, null, escalation]);

  // The key that opened it is no approver: refused, and the decision stays open.
  const refused = await rejection(PermissionError, agent.answerDecision(opened.decisionId, 'yes'));
  assert.deepEqual([refused.status, refused.code], [403, 'forbidden']);
  assert.equal((await agent.getDecision(opened.decisionId)).status, 'pending');

  const answered = await client(approver.apiKey).answerDecision(opened.decisionId, 'no');
  const answeredBy: AnsweredBy = { kind: 'key', id: approver.keyId, displayName: approver.keyId, channel: 'api', at: answered.answeredAt ?? '' };
  assert.deepEqual([answered.status, answered.approved, answered.answeredBy], ['answered', false, answeredBy]);
  assert.deepEqual((await agent.getDecision(opened.decisionId)).answeredBy, answeredBy);

  const asked = await agent.ask({ question: 'Which region?', type: 'select', options: ['eu', 'us'], approvers: [{ kind: 'email', id: 'ops@example.com' }], wait: false });
  assert.deepEqual([asked.approvers, asked.answeredBy], [[{ kind: 'email', id: 'ops@example.com' }], null]);
});

test('decideAndWait returns the answer once a person gives it, and the pending decision when the budget ends', async () => {
  const workspace = await createWorkspace('growth');
  const herald = client(workspace.apiKey);
  const waiting = herald.decideAndWait({ question: 'Rotate the database password?' }, { totalTimeoutMs: 30_000 });
  const id = await pendingQuestionId(workspace.workspaceId, 'decision');
  // Answered while the SDK's call is held for it.
  await untilHeld(1);
  await herald.answerDecision(id, 'yes');
  const decided = await waiting;
  assert.deepEqual({ id: decided.decisionId, status: decided.status, approved: decided.approved }, { id, status: 'answered', approved: true });

  const opened = await herald.createDecision({ question: 'Answered while waited on?' });
  const waitingAgain = herald.waitForDecision(opened, { totalTimeoutMs: 30_000 });
  await herald.answerDecision(opened.decisionId, 'no');
  const again = await waitingAgain;
  assert.deepEqual({ id: again.decisionId, status: again.status, answer: again.answer, approved: again.approved }, { id: opened.decisionId, status: 'answered', answer: 'no', approved: false });

  const started = Date.now();
  const open = await herald.decideAndWait({ question: 'Nobody will answer this' }, { totalTimeoutMs: 2_000 });
  assert.deepEqual({ status: open.status, approved: open.approved }, { status: 'pending', approved: false });
  assert.ok(Date.now() - started < 4_000);
});

test('authorizeThenDecide: allow proceeds, deny refuses, requires_human waits for a person and treats silence as a refusal', async () => {
  const workspace = await createWorkspace('growth');
  const herald = client(workspace.apiKey);
  await herald.putPolicy(POLICY);
  const question = { question: 'Deploy to production?' };

  const allowed = await herald.authorizeThenDecide({ toolName: 'read_file', toolTarget: 'a.txt' }, question, { totalTimeoutMs: 5_000 });
  assert.deepEqual({ approved: allowed.approved, verdict: allowed.authorization.verdict, decision: allowed.decision }, { approved: true, verdict: 'allow', decision: null });
  const denied = await herald.authorizeThenDecide({ toolName: 'rm_rf' }, question, { totalTimeoutMs: 5_000 });
  assert.deepEqual({ approved: denied.approved, verdict: denied.authorization.verdict, decision: denied.decision }, { approved: false, verdict: 'deny', decision: null });

  const reviewing = herald.authorizeThenDecide({ toolName: 'deploy', toolTarget: 'api', parameters: { replicas: 3 } }, question, { totalTimeoutMs: 30_000 });
  await herald.answerDecision(await pendingQuestionId(workspace.workspaceId, 'decision'), 'yes');
  const approved = await reviewing;
  assert.equal(approved.approved, true);
  assert.equal(approved.authorization.verdict, 'requires_human');
  assert.deepEqual(
    { status: approved.decision?.status, toolName: approved.decision?.toolName, toolTarget: approved.decision?.toolTarget, parameters: approved.decision?.parameters, audience: approved.decision?.audience },
    { status: 'answered', toolName: 'deploy', toolTarget: 'api', parameters: { replicas: 3 }, audience: 'owner' },
  );

  const refusing = herald.authorizeThenDecide({ toolName: 'deploy' }, question, { totalTimeoutMs: 30_000 });
  await herald.answerDecision(await pendingQuestionId(workspace.workspaceId, 'decision'), 'no');
  const refused = await refusing;
  assert.deepEqual({ approved: refused.approved, status: refused.decision?.status, answer: refused.decision?.answer }, { approved: false, status: 'answered', answer: 'no' });

  const silent = await herald.authorizeThenDecide({ toolName: 'deploy' }, question, { totalTimeoutMs: 1_500 });
  assert.deepEqual({ approved: silent.approved, status: silent.decision?.status }, { approved: false, status: 'pending' });
});

test('webhook signing secret: read and rotate', async () => {
  const workspace = await createWorkspace('growth');
  const herald = client(workspace.apiKey);
  const first = await herald.getWebhookSecret();
  assert.match(first.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assert.equal(first.previousSecretExpiresAt, null);
  assert.deepEqual(await herald.getWebhookSecret(), first);
  const rotated = await herald.rotateWebhookSecret();
  assert.notEqual(rotated.secret, first.secret);
  assert.ok(rotated.previousSecretExpiresAt !== null && Date.parse(rotated.previousSecretExpiresAt) > Date.now() + 23 * 3_600_000);
  const runtime = await createKey(workspace.workspaceId, 'runtime');
  await rejection(PermissionError, client(runtime.apiKey).getWebhookSecret());
});

test('Slack connection: none yet is a 404 to read or remove; a malformed one is refused before Slack is asked', async () => {
  const workspace = await createWorkspace('growth');
  const herald = client(workspace.apiKey);
  await rejection(NotFoundError, herald.getSlackConnection());
  await rejection(NotFoundError, herald.disconnectSlack());
  const invalid = await rejection(ValidationError, herald.connectSlack({ botToken: 'xoxp-a-user-token', signingSecret: '0'.repeat(32), defaultChannel: 'C0123456' }));
  assert.deepEqual(invalid.fields.map((field) => field.field), ['botToken']);
});

test('typed errors: 400 names fields, 401, 403 with its code, 404', async () => {
  const herald = client(audience.workspace.apiKey);
  const invalid = await rejection(ValidationError, herald.send({ title: '', body: 'x' }));
  assert.deepEqual(
    { status: invalid.status, code: invalid.code, fields: invalid.fields, retryAfter: invalid.retryAfter },
    { status: 400, code: 'invalid_request', fields: [{ field: 'title', in: 'body', problem: 'must NOT have fewer than 1 characters' }], retryAfter: undefined },
  );
  const unauthorized = await rejection(AuthenticationError, client('pk_aaaaaaaaaaaaaaaa.bbbb').getIdentity());
  assert.deepEqual({ status: unauthorized.status, code: unauthorized.code }, { status: 401, code: 'unauthorized' });
  const runtime = await createKey(audience.workspace.workspaceId, 'runtime');
  const forbidden = await rejection(PermissionError, client(runtime.apiKey).listSubscribers());
  assert.deepEqual({ status: forbidden.status, code: forbidden.code, message: forbidden.message }, { status: 403, code: 'forbidden', message: 'This key cannot access this endpoint' });
  const free = await createWorkspace('free');
  const upgrade = await rejection(PermissionError, client(free.apiKey).send({ title: 'a', body: 'b' }));
  assert.equal(upgrade.code, 'plan_upgrade_required');
  assert.equal(typeof upgrade.body.upgradeUrl, 'string');
  const missing = await rejection(NotFoundError, herald.getNotification('ntf_unknown'));
  assert.deepEqual({ status: missing.status, code: missing.code }, { status: 404, code: 'not_found' });
});

test('no retries: a 429 and a 503 are thrown after exactly one request each', async () => {
  const free = await createWorkspace('free');
  const proxy = await startCountingProxy(harness.stack.gatewayUrl);
  try {
    const herald = client(free.apiKey, proxy.url);
    for (let index = 0; index < 100; index += 1) await herald.getIdentity();
    const limited = await rejection(RateLimitError, herald.getIdentity());
    assert.equal(limited.code, 'rate_limited');
    assert.ok(typeof limited.retryAfter === 'number' && limited.retryAfter >= 1 && limited.retryAfter <= 60, String(limited.retryAfter));
    assert.equal(limited.body.retryAfter, limited.retryAfter);
    assert.equal(proxy.requests.length, 101);
  } finally {
    await proxy.close();
  }

  // A gateway whose policy service cannot be reached answers 503.
  const brokenGateway = await harness.stack.addGateway({ POLICY_GRPC_URL: `127.0.0.1:${await freePort()}` });
  const brokenProxy = await startCountingProxy(brokenGateway);
  try {
    const workspace = await createWorkspace('growth');
    const unavailable = await rejection(ServerError, client(workspace.apiKey, brokenProxy.url).authorize({ toolName: 'deploy' }));
    assert.deepEqual({ status: unavailable.status, code: unavailable.code }, { status: 503, code: 'unavailable' });
    assert.deepEqual(brokenProxy.requests, ['POST /api/v1/server/authorize']);
  } finally {
    await brokenProxy.close();
  }
});

test('a per-request time-out throws RequestTimeoutError; a caller AbortSignal aborts with its own reason', async () => {
  const workspace = await createWorkspace('growth');
  const { herald, sent } = recordingClient(workspace.apiKey);
  const asked = await herald.ask({ question: 'Wait for me?', wait: false });
  const timedOut = await rejection(RequestTimeoutError, herald.getAsk(asked.correlationId, { wait: 5 }, { timeoutMs: 300 }));
  assert.deepEqual({ status: timedOut.status, code: timedOut.code }, { status: 0, code: 'timeout' });
  const controller = new AbortController();
  const reason = new Error('caller gave up');
  const waiting = herald.getAsk(asked.correlationId, { wait: 5 }, { signal: controller.signal });
  // Aborted once the SDK has sent the request (the gateway would hold it for 5 s).
  await eventually('the held request sent', async () => sent.length, (requests) => requests === 3);
  controller.abort(reason);
  await assert.rejects(waiting, (err) => err === reason);
  assert.deepEqual(sent, ['POST /ask', `GET /ask/${asked.correlationId}?wait=5`, `GET /ask/${asked.correlationId}?wait=5`]);
});

test('identity verification: a proof made by externalIdProof makes the subscriber an approver device; pair; the secret rotates', async () => {
  const local = await seedAudience(harness, 0);
  const herald = client(local.workspace.apiKey);
  const { secret, previousSecretExpiresAt } = await herald.getIdentitySecret();
  assert.match(secret, /^idsec_[A-Za-z0-9_-]{43}$/);
  assert.equal(previousSecretExpiresAt, null);
  const proven = await subscribeBrowser(harness, local, { externalId: 'sdk-owner', tags: [], proof: externalIdProof(secret, 'sdk-owner') });
  assert.equal((await herald.getSubscriber(proven.id)).externalIdVerified, true);
  assert.deepEqual(await herald.getReachability({ externalId: 'sdk-owner' }), { externalId: 'sdk-owner', reachable: true, browserSubscriptions: 1, nativeAppDevices: 0, channels: ['browser'] });

  const rotated = await herald.rotateIdentitySecret();
  assert.notEqual(rotated.secret, secret);
  assert.ok(rotated.previousSecretExpiresAt !== null);
  const again = await subscribeBrowser(harness, local, { externalId: 'sdk-owner', tags: [], proof: externalIdProof(rotated.secret, 'sdk-owner') });
  assert.equal((await herald.getSubscriber(again.id)).externalIdVerified, true);

  const link = await herald.pair({ externalId: 'sdk-phone' });
  assert.equal(link.externalId, 'sdk-phone');
  assert.match(link.enrollmentUrl, /\/enroll\/[A-Za-z0-9_-]{43}$/);
  const runtime = client((await createKey(local.workspace.workspaceId, 'runtime')).apiKey);
  assert.equal((await runtime.pair()).externalId, 'owner');
  await rejection(PermissionError, runtime.getIdentitySecret());
});
