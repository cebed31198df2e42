import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, createWorkspace, errorBody, eventually, pushesOf, seedAudience, SERVER_API, startSendingHarness, type SendingHarness, type TestWorkspace } from '@herald/testkit';

// Campaigns aimed at a segment (segmentId), end to end: the gateway, the campaign service, the
// audience service resolving the segment, Kafka, the delivery fleet and the strict push peer.

let harness: SendingHarness;
before(async () => {
  // A fast timer poll: a throttled campaign's next step is seen within 100 ms.
  harness = await startSendingHarness({ env: { CAMPAIGN_TIMER_POLL_MS: '100' } });
});
after(() => harness.stop());

interface Campaign {
  id: string;
  status: string;
  segmentId: string | null;
  totalTargeted: number;
  totalSent: number;
  [field: string]: unknown;
}

const api = <T = Record<string, unknown>>(workspace: TestWorkspace, path: string, options: { method?: string; body?: unknown } = {}) =>
  call<T & Record<string, unknown>>(harness.stack.gatewayUrl, `${SERVER_API}${path}`, { key: workspace.apiKey, ...options });

async function createSegment(workspace: TestWorkspace, filter: Record<string, unknown>): Promise<string> {
  const response = await api<{ id: string }>(workspace, '/segments', { method: 'POST', body: { name: 'audience', filter } });
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return response.body.id;
}

const createCampaign = (workspace: TestWorkspace, body: Record<string, unknown>) =>
  api<Campaign>(workspace, '/campaigns', { method: 'POST', body: { name: 'Segment sale', title: 'Sale', body: 'For some of you', ...body } });

const fieldsOf = (response: { status: number; body: Record<string, unknown> }) => {
  assert.equal(response.status, 400, JSON.stringify(response.body));
  return response.body.fields;
};
const noSuchSegment = [{ field: 'segmentId', in: 'body', problem: 'names no segment of this workspace' }];

test('a campaign to a segment reaches exactly its active subscribers, once each', async () => {
  // Subscriber n holds "fan" when n is even and "churned" when n is divisible by 3: the segment
  // (fans, not churned) is 2, 4, 8 and 10; 2 unsubscribes, so the campaign reaches 4, 8 and 10.
  const audience = await seedAudience(harness, 12, 'growth', (n) => ({ externalId: `user-${n}`, tags: [...(n % 2 === 0 ? ['fan'] : []), ...(n % 3 === 0 ? ['churned'] : [])] }));
  const { workspace, subscribers } = audience;
  const endpoint = (n: number): string => subscribers[n]?.endpoint ?? assert.fail(`no subscriber ${n}`);
  const unsubscribed = await call(harness.stack.gatewayUrl, '/api/v1/unsubscribe', { method: 'POST', key: workspace.siteKey, headers: { origin: 'https://shop.example.test' }, body: { endpoint: endpoint(2) } });
  assert.equal(unsubscribed.status, 200);
  // Allowing the unsubscribed status counts it in total, and still never sends to it.
  const segmentId = await createSegment(workspace, { tags: { all: ['fan'], none: ['churned'] }, status: ['active', 'unsubscribed'] });
  assert.deepEqual((await api(workspace, `/segments/${segmentId}/count`)).body, { active: 3, total: 4 });

  const created = await createCampaign(workspace, { segmentId });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  assert.equal(created.body.segmentId, segmentId);
  assert.equal((await api<Campaign>(workspace, `/campaigns/${created.body.id}`)).body.segmentId, segmentId);
  const sent = await api<Campaign>(workspace, `/campaigns/${created.body.id}/send`, { method: 'POST' });
  assert.deepEqual([sent.status, sent.body.status, sent.body.totalTargeted], [200, 'sending', 3]);
  const done = await eventually('campaign completed', async () => (await api<Campaign>(workspace, `/campaigns/${created.body.id}`)).body, (campaign) => campaign.status === 'completed');
  assert.deepEqual([done.totalTargeted, done.totalSent, done.segmentId], [3, 3, segmentId]);
  assert.deepEqual(pushesOf(harness.peer, created.body.id), new Map([4, 8, 10].map((n) => [endpoint(n), 1])));
  // Its segment cannot change once it has been sent.
  const late = await api(workspace, `/campaigns/${created.body.id}`, { method: 'PATCH', body: { segmentId: null } });
  assert.deepEqual([late.status, late.body.code], [409, 'conflict']);
});

test('segmentId is checked on create and change, can be cleared, and a segment deleted before the send is a 409', async () => {
  const workspace = await createWorkspace('growth', 'shop.example.test');
  const other = await createWorkspace();
  const mine = await createSegment(workspace, { hasExternalId: true });
  const theirs = await createSegment(other, {});
  for (const segmentId of ['seg_unknown', theirs]) {
    assert.deepEqual(fieldsOf(await createCampaign(workspace, { segmentId })), noSuchSegment, segmentId);
  }
  assert.deepEqual((fieldsOf(await createCampaign(workspace, { segmentId: '' })) as Array<{ field: string }>).map((f) => f.field), ['segmentId']);

  const everyone = await createCampaign(workspace, {});
  assert.equal(everyone.body.segmentId, null);
  const path = `/campaigns/${everyone.body.id}`;
  const aimed = await api<Campaign>(workspace, path, { method: 'PATCH', body: { segmentId: mine } });
  assert.deepEqual([aimed.status, aimed.body.segmentId], [200, mine]);
  assert.deepEqual(fieldsOf(await api(workspace, path, { method: 'PATCH', body: { segmentId: theirs } })), noSuchSegment);
  assert.equal((await api<Campaign>(workspace, path)).body.segmentId, mine);
  const cleared = await api<Campaign>(workspace, path, { method: 'PATCH', body: { segmentId: null } });
  assert.deepEqual([cleared.status, cleared.body.segmentId], [200, null]);
  await api(workspace, path, { method: 'PATCH', body: { segmentId: mine } });

  assert.equal((await api(workspace, `/segments/${mine}`, { method: 'DELETE' })).status, 204);
  const refused = await api(workspace, `${path}/send`, { method: 'POST' });
  assert.deepEqual(
    refused.body,
    errorBody('conflict', 409, 'Segment missing', `Campaign ${everyone.body.id} targets segment ${mine}, which no longer exists.`, 'Give the campaign another segmentId, or null for every active subscriber (PATCH), then send it.'),
  );
  const unchanged = (await api<Campaign>(workspace, path)).body;
  assert.deepEqual([unchanged.status, unchanged.segmentId, unchanged.totalTargeted], ['draft', mine, 0]);
});

test('a segment deleted mid fan-out ends it: the campaign completes with those already queued, nothing more', async () => {
  const audience = await seedAudience(harness, 6, 'growth', (n) => ({ externalId: `user-${n}`, tags: ['fan'] }));
  const { workspace } = audience;
  const segmentId = await createSegment(workspace, { tags: { all: ['fan'] } });
  // 60 a minute: one recipient a second, so the fan-out is still going when the segment goes.
  const created = await createCampaign(workspace, { segmentId, throttlePerMinute: 60 });
  const campaignPath = `/campaigns/${created.body.id}`;
  assert.equal((await api(workspace, `${campaignPath}/send`, { method: 'POST' })).status, 200);
  await eventually('the first step', async () => (await api<Campaign>(workspace, campaignPath)).body, (campaign) => Number(campaign.totalQueued) >= 1);
  assert.equal((await api(workspace, `/segments/${segmentId}`, { method: 'DELETE' })).status, 204);
  const done = await eventually('campaign completed', async () => (await api<Campaign>(workspace, campaignPath)).body, (campaign) => campaign.status === 'completed');
  const pushes = pushesOf(harness.peer, created.body.id);
  assert.ok(Number(done.totalQueued) < 6, `queued ${String(done.totalQueued)}`);
  assert.deepEqual([done.totalSent, [...pushes.values()].every((count) => count === 1)], [Number(done.totalQueued), true]);
  assert.equal(pushes.size, Number(done.totalQueued));
});

test('a scheduled campaign whose segment was deleted does not start: back to draft, saying why', async () => {
  const { workspace } = await seedAudience(harness, 1);
  const segmentId = await createSegment(workspace, {});
  const created = await createCampaign(workspace, { segmentId, scheduledAt: new Date(Date.now() + 1_500).toISOString() });
  assert.equal(created.body.status, 'scheduled');
  assert.equal((await api(workspace, `/segments/${segmentId}`, { method: 'DELETE' })).status, 204);
  const refused = await eventually('back to draft', async () => (await api<Campaign>(workspace, `/campaigns/${created.body.id}`)).body, (campaign) => campaign.status === 'draft');
  assert.deepEqual(
    [refused.startError, refused.totalTargeted, refused.startedAt],
    [`conflict: Campaign ${created.body.id} targets segment ${segmentId}, which no longer exists.`, 0, null],
  );
});
