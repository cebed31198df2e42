import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { SEND_PIPELINE } from '@herald/bus';
import {
  call,
  connectDatabase,
  createKey,
  errorBody,
  eventually,
  pushesOf as peerPushesOf,
  seedAudience,
  SERVER_API,
  startSendingHarness,
  type Audience,
  type SendingHarness,
  type TestWorkspace,
  waitForQuiet,
} from '@herald/testkit';

// /campaigns end to end: the gateway, the campaign service (state machine, timers, fan-out), the
// audience, Kafka, the delivery fleet and the strict push peer; each test in a workspace of its own.

let harness: SendingHarness;
before(async () => {
  // A fast timer poll: scheduled starts and throttled steps are seen within 100 ms.
  harness = await startSendingHarness({ env: { CAMPAIGN_TIMER_POLL_MS: '100' } });
});
after(() => harness.stop());

interface CampaignRecord {
  id: string;
  name: string;
  status: string;
  title: string;
  body: string;
  iconUrl: string | null;
  imageUrl: string | null;
  actionUrl: string | null;
  scheduledAt: string | null;
  segmentId: string | null;
  templateId: string | null;
  throttlePerMinute: number | null;
  totalTargeted: number;
  totalSent: number;
  totalDelivered: number;
  totalClicked: number;
  totalFailed: number;
  totalQueued: number;
  startError: string | null;
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  completedAt: string | null;
}
type Page = { data: CampaignRecord[]; hasMore: boolean; nextCursor: string | null };

const campaigns = (workspace: TestWorkspace, path = '', options: { method?: string; body?: unknown; key?: string } = {}) =>
  call<CampaignRecord & Page & Record<string, unknown>>(harness.stack.gatewayUrl, `${SERVER_API}/campaigns${path}`, { key: workspace.apiKey, ...options });

const create = async (workspace: TestWorkspace, body: Record<string, unknown> = {}): Promise<CampaignRecord> => {
  const response = await campaigns(workspace, '', { method: 'POST', body: { name: 'Spring sale', title: 'Sale', body: 'Everything -20%', ...body } });
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return response.body;
};
const read = async (workspace: TestWorkspace, id: string): Promise<CampaignRecord> => (await campaigns(workspace, `/${id}`)).body;
const settled = (workspace: TestWorkspace, id: string, timeoutMs = 20_000) =>
  eventually(`campaign ${id} completed`, () => read(workspace, id), (campaign) => campaign.status === 'completed', timeoutMs);

/** Pushes of this campaign the strict peer accepted, by endpoint. */
const pushesOf = (campaignId: string): Map<string, number> => peerPushesOf(harness.peer, campaignId);
const pushCount = (campaignId: string): number => [...pushesOf(campaignId).values()].reduce((sum, count) => sum + count, 0);

/** Every subscriber of the audience got the campaign exactly once. */
function assertEachOnce(audience: Audience, campaignId: string): void {
  const counts = pushesOf(campaignId);
  assert.deepEqual(
    audience.subscribers.map((subscriber) => counts.get(subscriber.endpoint) ?? 0),
    audience.subscribers.map(() => 1),
  );
  assert.equal(counts.size, audience.subscribers.length);
}

/**
 * Positive evidence that the timer loop has worked past every step already due: a throttled
 * campaign of a workspace of its own (two subscribers, 60 a minute: a second apart) completes,
 * so the loop took its second step, due after anything due when this was called.
 */
async function timerLoopPassed(): Promise<void> {
  const witness = await seedAudience(harness, 2);
  const campaign = await create(witness.workspace, { name: 'Witness', throttlePerMinute: 60 });
  assert.equal((await campaigns(witness.workspace, `/${campaign.id}/send`, { method: 'POST' })).status, 200);
  await settled(witness.workspace, campaign.id);
}

const inFuture = (ms: number): string => new Date(Date.now() + ms).toISOString();

test('a campaign is created (201, draft or scheduled), read, listed newest first in cursor pages, changed field by field and deleted (204)', async () => {
  const { workspace } = await seedAudience(harness, 1);
  const draft = await create(workspace, { iconUrl: 'https://cdn.example.test/i.png', actionUrl: 'https://shop.example.test/sale' });
  assert.match(draft.id, /^cmp_[a-z2-7]{24}$/);
  assert.deepEqual(draft, {
    id: draft.id,
    name: 'Spring sale',
    status: 'draft',
    title: 'Sale',
    body: 'Everything -20%',
    iconUrl: 'https://cdn.example.test/i.png',
    imageUrl: null,
    actionUrl: 'https://shop.example.test/sale',
    scheduledAt: null,
    segmentId: null,
    templateId: null,
    throttlePerMinute: null,
    totalTargeted: 0,
    totalSent: 0,
    totalDelivered: 0,
    totalClicked: 0,
    totalFailed: 0,
    totalQueued: 0,
    startError: null,
    createdAt: draft.createdAt,
    updatedAt: draft.updatedAt,
    startedAt: null,
    completedAt: null,
  });
  assert.deepEqual(await read(workspace, draft.id), draft);

  const at = inFuture(3_600_000);
  const scheduled = await create(workspace, { name: 'Later', scheduledAt: at, throttlePerMinute: 1000 });
  assert.deepEqual([scheduled.status, scheduled.scheduledAt, scheduled.throttlePerMinute], ['scheduled', at, 1000]);
  const third = await create(workspace, { name: 'Third' });

  const first = await campaigns(workspace, '?limit=2');
  assert.equal(first.status, 200);
  assert.deepEqual(first.body.data.map((item) => item.id), [third.id, scheduled.id]);
  assert.equal(first.body.hasMore, true);
  const next = await campaigns(workspace, `?limit=2&cursor=${first.body.nextCursor}`);
  assert.deepEqual([next.body.data.map((item) => item.id), next.body.hasMore, next.body.nextCursor], [[draft.id], false, null]);

  // Only the fields given change; null clears; scheduledAt on a draft schedules it, null unschedules.
  const patched = await campaigns(workspace, `/${draft.id}`, { method: 'PATCH', body: { title: 'Big sale', iconUrl: null } });
  assert.equal(patched.status, 200);
  assert.deepEqual([patched.body.title, patched.body.body, patched.body.iconUrl, patched.body.actionUrl], ['Big sale', 'Everything -20%', null, 'https://shop.example.test/sale']);
  const rescheduled = await campaigns(workspace, `/${draft.id}`, { method: 'PATCH', body: { scheduledAt: at } });
  assert.deepEqual([rescheduled.body.status, rescheduled.body.scheduledAt], ['scheduled', at]);
  const unscheduled = await campaigns(workspace, `/${draft.id}`, { method: 'PATCH', body: { scheduledAt: null } });
  assert.deepEqual([unscheduled.body.status, unscheduled.body.scheduledAt], ['draft', null]);

  // Another workspace sees none of it.
  const other = await seedAudience(harness, 1);
  assert.equal((await campaigns(other.workspace, `/${draft.id}`)).status, 404);
  assert.deepEqual((await campaigns(other.workspace)).body.data, []);

  const deleted = await campaigns(workspace, `/${draft.id}`, { method: 'DELETE' });
  assert.equal(deleted.status, 204);
  assert.equal((await campaigns(workspace, `/${draft.id}`)).status, 404);
  assert.equal((await campaigns(workspace, `/${draft.id}`, { method: 'DELETE' })).status, 404);
  const missing = await campaigns(workspace, '/cmp_missing');
  assert.deepEqual(missing.body, errorBody('not_found', 404, 'Not found', 'No campaign cmp_missing.', 'Check the path and the identifier.'));
});

test('an empty body is one 400 naming every missing field, as templates do', async () => {
  const { workspace } = await seedAudience(harness, 1);
  const empty = await campaigns(workspace, '', { method: 'POST', body: {} });
  assert.equal(empty.status, 400);
  assert.deepEqual(
    empty.body,
    errorBody(
      'invalid_request',
      400,
      'Invalid request',
      'Invalid request body: title is required without a templateId; body is required without a templateId; name is required.',
      'Fix the request as the message says and send it again.',
      {
        fields: [
          { field: 'title', in: 'body', problem: 'is required without a templateId' },
          { field: 'body', in: 'body', problem: 'is required without a templateId' },
          { field: 'name', in: 'body', problem: 'is required' },
        ],
      },
    ),
  );
  // With a templateId, the content comes from the template: only the name is missing.
  const fromTemplate = await campaigns(workspace, '', { method: 'POST', body: { templateId: 'tpl_any' } });
  assert.deepEqual(fromTemplate.body.fields, [{ field: 'name', in: 'body', problem: 'is required' }]);
  assert.deepEqual((await campaigns(workspace)).body.data, []);
});

test('every bad field is a 400 naming it', async () => {
  const { workspace } = await seedAudience(harness, 1);
  const cases: Array<[Record<string, unknown>, Array<{ field: string; problem: string }>]> = [
    [{ title: 't', body: 'b' }, [{ field: 'name', problem: 'is required' }]],
    [{ name: 'n' }, [{ field: 'title', problem: 'is required without a templateId' }, { field: 'body', problem: 'is required without a templateId' }]],
    [{ name: 'n', title: 't', body: 'b', scheduledAt: '2001-01-01T00:00:00Z' }, [{ field: 'scheduledAt', problem: 'is in the past' }]],
    [{ name: 'n', title: 't', body: 'b', scheduledAt: 'tomorrow' }, [{ field: 'scheduledAt', problem: 'must be an ISO 8601 date-time' }]],
    [{ name: 'n', title: 't', body: 'b', scheduledAt: '2099-01-01T09:00:00' }, [{ field: 'scheduledAt', problem: 'must be an ISO 8601 date-time' }]],
    [{ name: 'n', title: 't', body: 'b', throttlePerMinute: 0 }, [{ field: 'throttlePerMinute', problem: 'must be >= 1' }]],
    [{ name: 'n', title: 't', body: 'b', segment: 'x' }, [{ field: 'segment', problem: 'is not allowed' }]],
    [{ name: 'n', templateId: 'tpl_none' }, [{ field: 'templateId', problem: 'names no template of this workspace' }]],
  ];
  for (const [body, fields] of cases) {
    const response = await campaigns(workspace, '', { method: 'POST', body });
    assert.equal(response.status, 400, JSON.stringify(body));
    assert.deepEqual(
      (response.body.fields as Array<{ field: string; problem: string }>).map(({ field, problem }) => ({ field, problem })),
      fields,
      JSON.stringify(body),
    );
  }
  const draft = await create(workspace);
  const badStatus = await campaigns(workspace, `/${draft.id}`, { method: 'PATCH', body: { status: 'completed' } });
  assert.equal(badStatus.status, 400);
  const empty = await campaigns(workspace, `/${draft.id}`, { method: 'PATCH', body: {} });
  assert.equal(empty.status, 400);
  const noSchedule = await campaigns(workspace, `/${draft.id}`, { method: 'PATCH', body: { status: 'scheduled' } });
  assert.deepEqual(noSchedule.body.fields, [{ field: 'scheduledAt', in: 'body', problem: 'is required to schedule the campaign' }]);
  assert.deepEqual(await read(workspace, draft.id), draft);
});

/**
 * The state machine, table-driven: each (state, action) pair on a fresh campaign in that state.
 * Allowed moves answer 200 with the new state; the others 409 `conflict` naming the current state,
 * and change nothing.
 */
test('every (state, action) pair: allowed moves answer 200 with the new state, the others 409 naming the current state', async () => {
  const audience = await seedAudience(harness, 3);
  const { workspace } = audience;
  const act = (id: string, action: string) => campaigns(workspace, `/${id}/${action}`, { method: 'POST' });
  // A throttle of one recipient a minute keeps a started campaign sending for minutes.
  const slow = { throttlePerMinute: 1 };
  const reach: Record<string, () => Promise<CampaignRecord>> = {
    draft: () => create(workspace),
    scheduled: () => create(workspace, { scheduledAt: inFuture(3_600_000) }),
    sending: async () => (await act((await create(workspace, slow)).id, 'send')).body,
    paused: async () => (await act((await reach.sending!()).id, 'pause')).body,
    active: async () => (await act((await reach.paused!()).id, 'resume')).body,
    completed: async () => {
      const started = (await act((await create(workspace)).id, 'send')).body;
      return settled(workspace, started.id);
    },
  };
  const allowed: Record<string, Record<string, string>> = {
    send: { draft: 'sending', scheduled: 'sending' },
    pause: { sending: 'paused', active: 'paused' },
    resume: { paused: 'active' },
  };
  const needs: Record<string, string> = { send: 'draft or scheduled', pause: 'sending or active', resume: 'paused' };
  for (const [state, enter] of Object.entries(reach)) {
    for (const action of ['send', 'pause', 'resume']) {
      const campaign = await enter();
      assert.equal(campaign.status, state);
      const response = await act(campaign.id, action);
      const to = allowed[action]?.[state];
      if (to) {
        assert.equal(response.status, 200, `${state} ${action}: ${JSON.stringify(response.body)}`);
        assert.equal(response.body.status, to, `${state} ${action}`);
        assert.equal((await read(workspace, campaign.id)).status, to);
      } else {
        assert.equal(response.status, 409, `${state} ${action}`);
        assert.deepEqual(
          response.body,
          errorBody(
            'conflict',
            409,
            `Campaign is ${state}`,
            `Campaign ${campaign.id} is ${state}; ${action} needs it ${needs[action]}.`,
            'Read the campaign for its current status; docs/campaigns lists the moves each status allows.',
            { campaignStatus: state },
          ),
          `${state} ${action}`,
        );
        const after = await read(workspace, campaign.id);
        assert.deepEqual({ ...after, totalQueued: 0, totalSent: 0 }, { ...campaign, totalQueued: 0, totalSent: 0 }, `${state} ${action} changed it`);
      }
    }
  }

  // PATCH status moves the same way; content changes only before the start.
  const started = await reach.sending!();
  const edit = await campaigns(workspace, `/${started.id}`, { method: 'PATCH', body: { title: 'Too late' } });
  assert.equal(edit.status, 409);
  assert.equal(edit.body.message, `Campaign ${started.id} is sending; changing its content or schedule needs it draft or scheduled.`);
  const paused = await campaigns(workspace, `/${started.id}`, { method: 'PATCH', body: { status: 'paused' } });
  assert.deepEqual([paused.status, paused.body.status], [200, 'paused']);
  const backToDraft = await campaigns(workspace, `/${started.id}`, { method: 'PATCH', body: { status: 'draft' } });
  assert.equal(backToDraft.status, 409);
  const resumed = await campaigns(workspace, `/${started.id}`, { method: 'PATCH', body: { status: 'active', name: 'Renamed' } });
  assert.deepEqual([resumed.status, resumed.body.status, resumed.body.name], [200, 'active', 'Renamed']);
  const draft = await create(workspace);
  const sentByPatch = await campaigns(workspace, `/${draft.id}`, { method: 'PATCH', body: { status: 'sending', title: 'Patched then sent' } });
  assert.deepEqual([sentByPatch.status, sentByPatch.body.status, sentByPatch.body.title], [200, 'sending', 'Patched then sent']);
  const done = await settled(workspace, draft.id);
  const completedPatch = await campaigns(workspace, `/${done.id}`, { method: 'PATCH', body: { name: 'x' } });
  assert.equal(completedPatch.status, 409);
});

test('send starts the fan-out at once: every subscriber gets it once, and the counters and stats agree with the deliveries', async () => {
  const audience = await seedAudience(harness, 5);
  const { workspace } = audience;
  const campaign = await create(workspace, { actionUrl: 'https://shop.example.test/sale', scheduledAt: inFuture(3_600_000) });
  const sent = await campaigns(workspace, `/${campaign.id}/send`, { method: 'POST' });
  assert.equal(sent.status, 200);
  assert.equal(sent.body.status, 'sending');
  assert.equal(sent.body.totalTargeted, 5);
  assert.ok(sent.body.startedAt);
  const done = await settled(workspace, campaign.id);
  assertEachOnce(audience, campaign.id);
  const [message] = harness.peer.received().filter((m) => (JSON.parse(m.plaintext.toString()) as { notificationId: string }).notificationId === campaign.id);
  assert.ok(message);
  assert.deepEqual(harness.openPush(message).payload, { notificationId: campaign.id, title: 'Sale', body: 'Everything -20%', url: 'https://shop.example.test/sale' });
  assert.deepEqual(
    [done.totalTargeted, done.totalQueued, done.totalSent, done.totalFailed, done.totalDelivered, done.totalClicked],
    [5, 5, 5, 0, 0, 0],
  );
  assert.ok(done.completedAt);
  const stats = await campaigns(workspace, `/${campaign.id}/stats`);
  assert.deepEqual([stats.status, stats.body], [200, { totalSent: 5, totalDelivered: 0, totalClicked: 0, totalFailed: 0, deliveryRate: 0, clickRate: 0 }]);
});

test('POST /send is a campaign created and started at once: its campaignId is readable at /campaigns', async () => {
  const audience = await seedAudience(harness, 2);
  const { workspace } = audience;
  const sent = await call<{ campaignId: string }>(harness.stack.gatewayUrl, `${SERVER_API}/send`, { method: 'POST', key: workspace.apiKey, body: { title: 'Now', body: 'quick' } });
  assert.equal(sent.status, 200);
  const done = await settled(workspace, sent.body.campaignId);
  assert.deepEqual([done.name, done.title, done.status, done.totalTargeted, done.totalSent], ['Now', 'Now', 'completed', 2, 2]);
  assert.equal((await campaigns(workspace)).body.data[0]?.id, sent.body.campaignId);
  assert.deepEqual((await campaigns(workspace, `/${sent.body.campaignId}/stats`)).body, { totalSent: 2, totalDelivered: 0, totalClicked: 0, totalFailed: 0, deliveryRate: 0, clickRate: 0 });
  const notification = await call<{ status: string }>(harness.stack.gatewayUrl, `${SERVER_API}/notifications/${sent.body.campaignId}`, { key: workspace.apiKey });
  assert.equal(notification.body.status, 'completed');
  // A sent campaign cannot be sent again.
  assert.equal((await campaigns(workspace, `/${sent.body.campaignId}/send`, { method: 'POST' })).status, 409);
});

test('pause stops the fan-out (nothing more is queued), resume continues where it stopped: each subscriber once, none skipped', async () => {
  const audience = await seedAudience(harness, 24);
  const { workspace } = audience;
  // 240 a minute: 4 recipients a second.
  const campaign = await create(workspace, { throttlePerMinute: 240 });
  await campaigns(workspace, `/${campaign.id}/send`, { method: 'POST' });
  await eventually('a first step queued', () => read(workspace, campaign.id), (c) => c.totalQueued >= 4);
  const paused = await campaigns(workspace, `/${campaign.id}/pause`, { method: 'POST' });
  assert.deepEqual([paused.status, paused.body.status], [200, 'paused']);
  const queuedAtPause = paused.body.totalQueued;
  assert.ok(queuedAtPause < 24, `queued ${queuedAtPause} before the pause`);
  // Queued deliveries still land; nothing more is queued while paused: the timer loop has worked
  // past the paused campaign's next step, then the outboxes are empty and the fan-out and the fleet
  // have caught up (what was on its way is handled).
  await timerLoopPassed();
  await waitForQuiet(harness.stack.topicPrefix, SEND_PIPELINE);
  const held = await read(workspace, campaign.id);
  assert.deepEqual([held.status, held.totalQueued, pushCount(campaign.id)], ['paused', queuedAtPause, queuedAtPause]);

  const resumed = await campaigns(workspace, `/${campaign.id}/resume`, { method: 'POST' });
  assert.deepEqual([resumed.status, resumed.body.status], [200, 'active']);
  const done = await settled(workspace, campaign.id, 30_000);
  assert.deepEqual([done.totalQueued, done.totalSent], [24, 24]);
  assertEachOnce(audience, campaign.id);
});

test('a throttled campaign queues at most its throttle per minute', async () => {
  const audience = await seedAudience(harness, 12);
  const { workspace } = audience;
  // 360 a minute: 6 recipients a second, so 12 take two steps a second apart.
  const campaign = await create(workspace, { throttlePerMinute: 360 });
  const sent = await campaigns(workspace, `/${campaign.id}/send`, { method: 'POST' });
  const startedAt = Date.parse(sent.body.startedAt ?? '');
  await eventually('the first step', () => read(workspace, campaign.id), (c) => c.totalQueued >= 6);
  const first = await read(workspace, campaign.id);
  if (Date.now() - startedAt < 900) assert.equal(first.totalQueued, 6);
  const done = await settled(workspace, campaign.id);
  assert.ok(Date.parse(done.completedAt ?? '') - startedAt >= 1_000, 'the second step waited a second');
  assertEachOnce(audience, campaign.id);
});

test('a kill -9 of the campaign service mid fan-out: its replacement resumes, each subscriber once, none skipped', async () => {
  const audience = await seedAudience(harness, 20);
  const { workspace } = audience;
  const campaign = await create(workspace, { throttlePerMinute: 300 });
  await campaigns(workspace, `/${campaign.id}/send`, { method: 'POST' });
  await eventually('a first step queued', () => read(workspace, campaign.id), (c) => c.totalQueued >= 5);
  // The first instance: the one the gateway calls, and (the only one) doing the fan-out.
  const service = harness.stack.services.find((s) => s.output().includes('campaign service serving'));
  assert.ok(service && service.child.exitCode === null);
  service.child.kill('SIGKILL');
  await service.exited;
  await harness.stack.startService('campaign', { CAMPAIGN_TIMER_POLL_MS: '100' }, { replacing: true });
  const done = await settled(workspace, campaign.id, 60_000);
  assert.deepEqual([done.totalQueued, done.totalSent], [20, 20]);
  assertEachOnce(audience, campaign.id);
});

test('a scheduled campaign starts on time by itself, once across two replicas', async () => {
  const audience = await seedAudience(harness, 3);
  const { workspace } = audience;
  await harness.stack.startService('campaign', { CAMPAIGN_TIMER_POLL_MS: '100' });
  const at = inFuture(1_500);
  const campaign = await create(workspace, { scheduledAt: at });
  assert.equal(campaign.status, 'scheduled');
  const done = await settled(workspace, campaign.id);
  const lateness = Date.parse(done.startedAt ?? '') - Date.parse(at);
  assert.ok(lateness >= 0 && lateness < 2_000, `started ${lateness} ms after its time`);
  assert.equal(done.totalTargeted, 3);
  assertEachOnce(audience, campaign.id);
  const logs = harness.stack.services.filter((s) => s.output().includes(campaign.id) && s.output().includes('scheduled campaign started'));
  assert.equal(logs.length, 1);
});

test('the monthly allowance is checked when a scheduled campaign starts: over it, the campaign goes back to draft saying why', async () => {
  const audience = await seedAudience(harness, 2, 'starter');
  const { workspace } = audience;
  const db = await connectDatabase();
  try {
    await db.query(
      `INSERT INTO campaign.monthly_usage (workspace_id, month, sent) VALUES ($1, date_trunc('month', now() AT TIME ZONE 'UTC')::date, 49999)`,
      [workspace.workspaceId],
    );
  } finally {
    await db.end();
  }
  const campaign = await create(workspace, { scheduledAt: inFuture(500) });
  const refused = await eventually('back to draft', () => read(workspace, campaign.id), (c) => c.status === 'draft');
  assert.deepEqual([refused.startError, refused.totalQueued], ["plan_limit_exceeded: This send would exceed the plan's monthly allowance of 50000 notifications.", 0]);
  const now = await campaigns(workspace, `/${campaign.id}/send`, { method: 'POST' });
  assert.equal(now.status, 403);
  assert.equal(now.body.code, 'plan_limit_exceeded');
  assert.equal(pushCount(campaign.id), 0);
});

test('a campaign made from a template copies its content with the variables filled; later template edits do not change it', async () => {
  const audience = await seedAudience(harness, 1);
  const { workspace } = audience;
  const template = (
    await call<{ id: string }>(harness.stack.gatewayUrl, `${SERVER_API}/templates`, {
      method: 'POST',
      key: workspace.apiKey,
      body: { name: 'Welcome', title: 'Hello {{name|friend}}', body: 'Your {{plan}} plan', actionUrl: 'https://shop.example.test/{{path|home}}' },
    })
  ).body;
  const made = await create(workspace, { title: undefined, body: undefined, templateId: template.id, variables: { plan: 'Gold' } });
  assert.deepEqual([made.title, made.body, made.actionUrl, made.templateId], ['Hello friend', 'Your Gold plan', 'https://shop.example.test/home', template.id]);
  const named = await create(workspace, { title: undefined, body: undefined, templateId: template.id, variables: { plan: 'Gold', name: 'Ada', path: 'p/1' } });
  assert.deepEqual([named.title, named.actionUrl], ['Hello Ada', 'https://shop.example.test/p/1']);
  const missing = await campaigns(workspace, '', { method: 'POST', body: { name: 'n', templateId: template.id } });
  assert.equal(missing.status, 400);
  assert.deepEqual(missing.body.fields, [{ field: 'variables.plan', in: 'body', problem: "is required by the template's body ({{plan}} has no default)" }]);
  await call(harness.stack.gatewayUrl, `${SERVER_API}/templates/${template.id}`, { method: 'PATCH', key: workspace.apiKey, body: { title: 'Changed' } });
  assert.equal((await read(workspace, made.id)).title, 'Hello friend');
});

test('per-subscriber placeholders are filled for each recipient at delivery, with the fallback where the subscriber lacks the field', async () => {
  const audience = await seedAudience(harness, 3, 'growth', (index) => ({ externalId: `user ${index}`, tags: [] }));
  const { workspace } = audience;
  const [ada, bob, anonymous] = audience.subscribers;
  assert.ok(ada && bob && anonymous);
  const patch = async (id: string, body: Record<string, unknown>) =>
    assert.equal((await call(harness.stack.gatewayUrl, `${SERVER_API}/subscribers/${id}`, { method: 'PATCH', key: workspace.apiKey, body })).status, 200);
  await patch(ada.id, { customData: { firstName: 'Ada', plan: { tier: 'gold' }, visits: 12 } });
  await patch(anonymous.id, { externalId: null });
  const campaign = await create(workspace, {
    title: 'Hi {{subscriber.customData.firstName|there}}',
    body: '{{subscriber.customData.plan.tier|Basic}} member, visit {{subscriber.customData.visits|1}} ({{subscriber.externalId|guest}})',
    actionUrl: 'https://shop.example.test/for/{{subscriber.externalId|guest}}',
  });
  await campaigns(workspace, `/${campaign.id}/send`, { method: 'POST' });
  await settled(workspace, campaign.id);
  const byEndpoint = new Map(harness.peer.received().map((message) => [message.endpoint, harness.openPush(message).payload] as const).filter(([, payload]) => payload.notificationId === campaign.id));
  assert.deepEqual(byEndpoint.get(ada.endpoint), {
    notificationId: campaign.id,
    title: 'Hi Ada',
    body: 'gold member, visit 12 (user 0)',
    url: 'https://shop.example.test/for/user%200',
  });
  assert.deepEqual(byEndpoint.get(bob.endpoint), { notificationId: campaign.id, title: 'Hi there', body: 'Basic member, visit 1 (user 1)', url: 'https://shop.example.test/for/user%201' });
  assert.deepEqual(byEndpoint.get(anonymous.endpoint), { notificationId: campaign.id, title: 'Hi there', body: 'Basic member, visit 1 (guest)', url: 'https://shop.example.test/for/guest' });

  // A field no subscriber has is a 400 naming where it is; the content is sized with full-length values.
  const unknown = await campaigns(workspace, '', { method: 'POST', body: { name: 'x', title: '{{subscriber.email}}', body: 'b' } });
  assert.equal(unknown.status, 400);
  assert.deepEqual((unknown.body as unknown as { fields: unknown[] }).fields, [
    { field: 'title', in: 'body', problem: 'holds {{subscriber.email}} names no subscriber field: use subscriber.id, subscriber.externalId or subscriber.customData.<key>' },
  ]);
  const tooLong = await campaigns(workspace, '', { method: 'POST', body: { name: 'x', title: 't', body: `${'b'.repeat(1_700)}${'{{subscriber.id}}'.repeat(20)}` } });
  assert.deepEqual([tooLong.status, (tooLong.body as unknown as { error: string }).error], [400, 'Notification too large']);
});

test('delete stops a running fan-out: nothing more is queued, deliveries already made stay', async () => {
  const audience = await seedAudience(harness, 12);
  const { workspace } = audience;
  const campaign = await create(workspace, { throttlePerMinute: 240 });
  await campaigns(workspace, `/${campaign.id}/send`, { method: 'POST' });
  await eventually('a first step queued', () => read(workspace, campaign.id), (c) => c.totalQueued >= 4);
  assert.equal((await campaigns(workspace, `/${campaign.id}`, { method: 'DELETE' })).status, 204);
  // The timer loop has worked past the deleted campaign's next step, then the outboxes are empty
  // and the fan-out and the fleet have caught up: what was queued before the delete is pushed and
  // nothing more is on its way.
  await timerLoopPassed();
  await waitForQuiet(harness.stack.topicPrefix, SEND_PIPELINE);
  const pushed = pushCount(campaign.id);
  assert.ok(pushed >= 4 && pushed < 12, `${pushed} pushes`);
});

test('campaigns are for dashboard keys only', async () => {
  const { workspace } = await seedAudience(harness, 1);
  for (const origin of ['runtime', 'connector']) {
    const { apiKey } = await createKey(workspace.workspaceId, origin);
    const response = await campaigns(workspace, '', { key: apiKey });
    assert.equal(response.status, 403, origin);
    assert.equal(response.body.message, 'This key cannot access this endpoint');
  }
});
