import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';

import { admin, call, connectDatabase, eventually, seedAudience, startSendingHarness, subscribeBrowser, type Audience, type SendingHarness, type Subscribed } from '@herald/testkit';

import { delay, exit, flowApi, publishSubscribed as publish, send, type FlowRecord, type RunRecord, type Step } from './helpers.js';

// Runs end to end: a browser subscribes through the public endpoint, the audience event reaches
// the flow service over Kafka, the run sends through the campaign service and the delivery fleet
// to the strict push peer, waits on its durable timer, and exits. Each test in a workspace of its own.

let harness: SendingHarness;
before(async () => {
  harness = await startSendingHarness({ services: ['flow'], env: { FLOW_RUN_POLL_MS: '100', FLOW_RUN_PRUNE_EVERY_MS: '200' } });
});
after(() => harness.stop());

const { api, createFlow, runsOf, flowOf, titlesTo } = flowApi(() => harness);
const activeFlow = (audience: Audience, steps: Step[], triggerType = 'subscription'): Promise<FlowRecord> => createFlow(audience, steps, { triggerType });
const publishSubscribed = (audience: Audience, events: Array<{ eventId: string; subscriberId: string }>) => publish(harness, audience, events);

/** The run of `flowId` once `done` holds for it (exactly one run exists). */
async function runWhen(audience: Audience, flowId: string, what: string, done: (run: RunRecord) => boolean, timeoutMs = 20_000): Promise<RunRecord> {
  const runs = await eventually(what, () => runsOf(audience, flowId), (found) => found.length === 1 && done(found[0] as RunRecord), timeoutMs);
  return runs[0] as RunRecord;
}

/** SIGKILLs the stack's running instance of a service (a replacement is started on its port with startService). */
async function kill(service: string): Promise<void> {
  const running = harness.stack.services.find((process) => process.output().includes(`${service} service serving`) && process.child.exitCode === null && process.child.signalCode === null);
  assert.ok(running, `no ${service} service running`);
  running.child.kill('SIGKILL');
  await running.exited;
}

/** A workspace with no subscriber yet: its flows are made before anyone subscribes. */
const emptyAudience = () => seedAudience(harness, 0);
const subscribe = (audience: Audience, externalId = 'user-1') => subscribeBrowser(harness, audience, { externalId, tags: [] });

test('a welcome flow: the subscription sends at once, the delayed push after its delay, nothing after exit', async () => {
  const audience = await emptyAudience();
  const flow = await activeFlow(audience, [send('Welcome'), delay(1), send('Your guide'), exit, send('Never')]);
  const subscriber = await subscribe(audience);
  await eventually('two pushes', async () => titlesTo(subscriber), (titles) => titles.length >= 2);
  const run = await runWhen(audience, flow.id, 'the run exited', (found) => found.state === 'exited');
  assert.deepEqual(titlesTo(subscriber), ['Welcome', 'Your guide']);
  assert.deepEqual(
    [run.flowId, run.subscriberId, run.triggerType, run.currentStep, run.nextWakeUpAt, run.endReason],
    [flow.id, subscriber.id, 'subscription', null, null, null],
  );
  assert.ok(run.finishedAt);
  assert.equal(run.notificationIds.length, 2);
  // Each send is a notification with its delivery state, counted like any other.
  const queuedAt: number[] = [];
  for (const id of run.notificationIds) {
    const notification = await eventually(
      `notification ${id} delivered`,
      () => api<{ createdAt: string; counts: { delivered: number; targeted: number } }>(audience, `/notifications/${id}`),
      (answer) => answer.body.counts.delivered === 1,
    );
    assert.deepEqual([notification.status, notification.body.counts.targeted], [200, 1]);
    queuedAt.push(Date.parse(notification.body.createdAt));
  }
  // The second send was queued a delay (1 s) after the first.
  const waited = (queuedAt[1] ?? 0) - (queuedAt[0] ?? 0);
  assert.ok(waited >= 1_000 && waited < 3_000, `the delay held ${waited} ms`);
  assert.equal((await flowOf(audience, flow.id)).executionCount, 1);
});

test('GET /flows/{id}/runs shows a run parked on its delay: current step and next wake-up', async () => {
  const audience = await emptyAudience();
  const flow = await activeFlow(audience, [send('Hello'), delay(60), send('Later')]);
  const subscriber = await subscribe(audience);
  const run = await runWhen(audience, flow.id, 'the run waiting', (found) => found.state === 'waiting');
  assert.equal(run.currentStep, 2);
  const wakeUpIn = Date.parse(run.nextWakeUpAt ?? '') - Date.now();
  assert.ok(wakeUpIn > 50_000 && wakeUpIn <= 60_000, `wakes up in ${wakeUpIn} ms`);
  assert.equal(run.notificationIds.length, 1);
  await eventually('the first push', async () => titlesTo(subscriber), (titles) => titles.length === 1);
  assert.deepEqual(titlesTo(subscriber), ['Hello']);
});

test('pause and archive: no new runs start, and a run in flight finishes', async () => {
  const audience = await emptyAudience();
  const paused = await activeFlow(audience, [delay(1), send('Still delivered')]);
  const archived = await activeFlow(audience, [exit]);
  const first = await subscribe(audience, 'first');
  await runWhen(audience, paused.id, 'the run waiting', (run) => run.state === 'waiting');
  assert.equal((await api<FlowRecord>(audience, `/flows/${paused.id}/pause`, { method: 'POST' })).body.status, 'paused');
  assert.equal((await api<FlowRecord>(audience, `/flows/${archived.id}`, { method: 'PATCH', body: { status: 'archived' } })).body.status, 'archived');
  // The run in flight finishes.
  await runWhen(audience, paused.id, 'the run completed', (run) => run.state === 'completed');
  await eventually('the push of the run in flight', async () => titlesTo(first), (titles) => titles.length === 1);
  // A flow still active witnesses the next subscription: once its run exists, the paused flow has seen the same event.
  const witness = await activeFlow(audience, [exit]);
  const second = await subscribe(audience, 'second');
  await runWhen(audience, witness.id, 'the witness run', (run) => run.subscriberId === second.id);
  assert.deepEqual((await runsOf(audience, paused.id)).map((run) => run.subscriberId), [first.id]);
  assert.equal((await flowOf(audience, paused.id)).executionCount, 1);
  // Archived: the same, no new runs.
  assert.deepEqual((await runsOf(audience, archived.id)).map((run) => run.subscriberId), [first.id]);
  assert.equal((await flowOf(audience, archived.id)).executionCount, 1);
});

test('a redelivered subscription event starts no second run', async () => {
  const audience = await emptyAudience();
  const flow = await activeFlow(audience, [exit]);
  const subscriber = await subscribe(audience);
  const run = await runWhen(audience, flow.id, 'the run exited', (found) => found.state === 'exited');
  // The same event again (twice), then a new one behind it on the same partition: once the new
  // one has its run, the copies have been handled.
  const copy = { eventId: run.triggerEventId, subscriberId: subscriber.id };
  await publishSubscribed(audience, [copy, copy, { eventId: randomUUID(), subscriberId: 'sub_witness' }]);
  await eventually('the witness run', () => runsOf(audience, flow.id), (runs) => runs.some((found) => found.subscriberId === 'sub_witness'));
  assert.deepEqual((await runsOf(audience, flow.id)).filter((found) => found.subscriberId === subscriber.id).map((found) => found.id), [run.id]);
  assert.equal((await flowOf(audience, flow.id)).executionCount, 2);
});

test('no re-entry: a new trigger event for a subscriber in a run of the flow starts no second one', async () => {
  const audience = await emptyAudience();
  const flow = await activeFlow(audience, [delay(60), exit]);
  const subscriber = await subscribe(audience);
  const run = await runWhen(audience, flow.id, 'the run waiting', (found) => found.state === 'waiting');
  await publishSubscribed(audience, [
    { eventId: randomUUID(), subscriberId: subscriber.id },
    { eventId: randomUUID(), subscriberId: 'sub_witness' },
  ]);
  await eventually('the witness run', () => runsOf(audience, flow.id), (runs) => runs.some((found) => found.subscriberId === 'sub_witness'));
  assert.deepEqual((await runsOf(audience, flow.id)).filter((found) => found.subscriberId === subscriber.id).map((found) => found.id), [run.id]);
  assert.equal((await flowOf(audience, flow.id)).executionCount, 2);
});

test('edited mid-run: a run in flight follows the steps it started with; runs started later follow the new ones', async () => {
  const audience = await emptyAudience();
  const flow = await activeFlow(audience, [delay(1), send('Before the edit')]);
  const first = await subscribe(audience, 'first');
  await runWhen(audience, flow.id, 'the run waiting', (run) => run.state === 'waiting');
  const edited = await api<FlowRecord>(audience, `/flows/${flow.id}`, { method: 'PATCH', body: { steps: [send('After the edit')] } });
  assert.equal(edited.status, 200);
  const second = await subscribe(audience, 'second');
  await eventually('both runs completed', () => runsOf(audience, flow.id), (runs) => runs.length === 2 && runs.every((run) => run.state === 'completed'));
  await eventually('both pushes', async () => [...titlesTo(first), ...titlesTo(second)], (titles) => titles.length === 2);
  assert.deepEqual([titlesTo(first), titlesTo(second)], [['Before the edit'], ['After the edit']]);
});

test('a send refused for good (the monthly allowance spent) ends the run as failed, saying why', async () => {
  const audience = await seedAudience(harness, 0, 'starter');
  const db = await connectDatabase();
  try {
    await db.query(
      `INSERT INTO campaign.monthly_usage (workspace_id, month, sent) VALUES ($1, date_trunc('month', now() AT TIME ZONE 'UTC')::date, 49999)`,
      [audience.workspace.workspaceId],
    );
  } finally {
    await db.end();
  }
  const flow = await activeFlow(audience, [send('The last one allowed'), send('Over the allowance'), exit]);
  const subscriber = await subscribe(audience);
  const run = await runWhen(audience, flow.id, 'the run failed', (found) => found.state === 'failed');
  assert.deepEqual(
    [run.endReason, run.currentStep, run.notificationIds.length],
    ["plan_limit_exceeded: This send would exceed the plan's monthly allowance of 50000 notifications.", null, 1],
  );
  await eventually('the allowed push', async () => titlesTo(subscriber), (titles) => titles.length === 1);
  assert.deepEqual(titlesTo(subscriber), ['The last one allowed']);
});

test("a workspace whose plan ends mid-run: the next send is refused by the campaign service, which reads the plan itself, and the run fails saying why", async () => {
  const audience = await emptyAudience();
  // Past the 5 s the campaign service reuses a workspace's plan for.
  const flow = await activeFlow(audience, [send('While subscribed'), delay(6), send('After the plan ended')]);
  const subscriber = await subscribe(audience);
  await runWhen(audience, flow.id, 'the run waiting', (run) => run.state === 'waiting');
  await admin('workspace', 'set-plan', '--workspace', audience.workspace.workspaceId, '--plan', 'none');
  // Without a plan the API answers the workspace nothing: the run's state is read from its table
  // until it ends, then through the API once the plan is back.
  const db = await connectDatabase();
  try {
    await eventually('the run ended', async () => (await db.query<{ state: string }>('SELECT state FROM flow.flow_runs WHERE flow_id = $1', [flow.id])).rows, (rows) => rows[0]?.state === 'failed');
  } finally {
    await db.end();
  }
  await admin('workspace', 'set-plan', '--workspace', audience.workspace.workspaceId, '--plan', 'growth');
  const run = await runWhen(audience, flow.id, 'the run failed', (found) => found.state === 'failed');
  assert.deepEqual([run.endReason, run.notificationIds.length], ['subscription_required: This workspace has no active plan.', 1]);
  assert.deepEqual(titlesTo(subscriber), ['While subscribed']);
});

test('an unsubscription mid-run ends the run: no further sends', async () => {
  const audience = await emptyAudience();
  const flow = await activeFlow(audience, [send('Hello'), delay(1), send('Not after leaving')]);
  const subscriber = await subscribe(audience);
  await runWhen(audience, flow.id, 'the run waiting', (run) => run.state === 'waiting');
  const left = await call(harness.stack.gatewayUrl, '/api/v1/unsubscribe', {
    method: 'POST',
    key: audience.workspace.siteKey,
    headers: { origin: 'https://shop.example.test' },
    body: { endpoint: subscriber.endpoint },
  });
  assert.equal(left.status, 200, JSON.stringify(left.body));
  const run = await runWhen(audience, flow.id, 'the run cancelled', (found) => found.state === 'cancelled');
  assert.deepEqual([run.endReason, run.nextWakeUpAt, run.currentStep], ['the subscriber left (unsubscribed)', null, null]);
  await eventually('the first push', async () => titlesTo(subscriber), (titles) => titles.length === 1);
  assert.deepEqual(titlesTo(subscriber), ['Hello']);
});

test('deleting a flow mid-run stops its runs at their next step', async () => {
  const audience = await emptyAudience();
  const deleted = await activeFlow(audience, [delay(1), send('From a deleted flow')]);
  // Due later than the deleted flow's run: once its push arrived, the deleted run's time has passed.
  const witness = await activeFlow(audience, [delay(1.5), send('Witness')]);
  const subscriber = await subscribe(audience);
  await runWhen(audience, deleted.id, 'the run waiting', (run) => run.state === 'waiting');
  assert.equal((await api(audience, `/flows/${deleted.id}`, { method: 'DELETE' })).status, 204);
  await runWhen(audience, witness.id, 'the witness run completed', (run) => run.state === 'completed');
  await eventually('the witness push', async () => titlesTo(subscriber), (titles) => titles.includes('Witness'));
  assert.deepEqual(titlesTo(subscriber), ['Witness']);
});

test('a kill -9 of the flow service mid-delay: the timer fires once after the restart', async () => {
  const audience = await emptyAudience();
  const flow = await activeFlow(audience, [delay(2), send('After the restart')]);
  const subscriber = await subscribe(audience);
  await runWhen(audience, flow.id, 'the run waiting', (run) => run.state === 'waiting');
  await kill('flow');
  await harness.stack.startService('flow', { FLOW_RUN_POLL_MS: '100', FLOW_RUN_PRUNE_EVERY_MS: '200' }, { replacing: true });
  const run = await runWhen(audience, flow.id, 'the run completed', (found) => found.state === 'completed', 30_000);
  assert.equal(run.notificationIds.length, 1);
  await eventually('the push', async () => titlesTo(subscriber), (titles) => titles.length === 1);
  assert.deepEqual(titlesTo(subscriber), ['After the restart']);
  assert.equal((await flowOf(audience, flow.id)).executionCount, 1);
});

test('the campaign service away when a timer fires: the send is tried again every few seconds and made once it is back', async () => {
  const audience = await emptyAudience();
  const flow = await activeFlow(audience, [delay(1), send('Once it is back')]);
  const subscriber = await subscribe(audience);
  await runWhen(audience, flow.id, 'the run waiting', (run) => run.state === 'waiting');
  await kill('campaign');
  // The timer fires with the campaign service away: the step waits to be tried again, not for the lease.
  const retrying = await runWhen(audience, flow.id, 'the send to be tried again', (run) => run.state === 'running' && run.nextWakeUpAt !== null);
  assert.deepEqual([retrying.currentStep, retrying.notificationIds], [1, []]);
  await harness.stack.startService('campaign', {}, { replacing: true });
  const run = await runWhen(audience, flow.id, 'the run completed', (found) => found.state === 'completed', 30_000);
  assert.equal(run.notificationIds.length, 1);
  await eventually('the push', async () => titlesTo(subscriber), (titles) => titles.length === 1);
  assert.deepEqual(titlesTo(subscriber), ['Once it is back']);
});

test('a click-triggered flow limited to one campaign runs for clicks on that campaign only', async () => {
  const audience = await seedAudience(harness, 1);
  const [subscriber] = audience.subscribers as [Subscribed];
  const campaignNamed = async (name: string): Promise<string> => {
    const created = await api<{ id: string }>(audience, '/campaigns', { method: 'POST', body: { name, title: name, body: `${name} body` } });
    assert.equal(created.status, 201);
    return created.body.id;
  };
  const [chosen, other] = [await campaignNamed('Chosen'), await campaignNamed('Other')];
  const created = await api<FlowRecord>(audience, '/flows', {
    method: 'POST',
    body: { name: 'Thank clickers', triggerType: 'notification_click', triggerCampaignId: chosen, steps: [send('Thanks for clicking'), exit] },
  });
  assert.equal((await api<FlowRecord>(audience, `/flows/${created.body.id}/activate`, { method: 'POST' })).body.status, 'active');
  /** Sends the campaign, then clicks its push the way the service worker reports it. */
  const click = async (campaignId: string): Promise<void> => {
    assert.equal((await api(audience, `/campaigns/${campaignId}/send`, { method: 'POST' })).status, 200);
    const [push] = await eventually(
      `the push of ${campaignId}`,
      async () => harness.peer.received(subscriber.endpoint).filter((message) => harness.openPush(message).payload.notificationId === campaignId),
      (found) => found.length === 1,
    );
    assert.ok(push);
    const reported = await call(harness.stack.gatewayUrl, '/api/v1/events', {
      method: 'POST',
      headers: { origin: 'https://shop.example.test' },
      body: { type: 'click', token: harness.openPush(push).token },
    });
    assert.equal(reported.status, 202, JSON.stringify(reported.body));
  };
  // The other campaign's click first: one subscriber's reports keep their order on Kafka, so once
  // the chosen campaign's click started its run, the other's has been handled too.
  await click(other);
  await click(chosen);
  const run = await runWhen(audience, created.body.id, 'the run exited', (found) => found.state === 'exited');
  assert.deepEqual([run.subscriberId, run.triggerType, run.notificationIds.length], [subscriber.id, 'notification_click', 1]);
  await eventually('the thank-you push', async () => titlesTo(subscriber), (titles) => titles.includes('Thanks for clicking'));
  assert.deepEqual(titlesTo(subscriber), ['Other', 'Chosen', 'Thanks for clicking']);
  assert.equal((await flowOf(audience, created.body.id)).executionCount, 1);
});

test('finished runs are deleted after the retention (30 days): runs in flight and younger ones stay, executionCount stays exact', async () => {
  const audience = await emptyAudience();
  const flow = await activeFlow(audience, [send('Hello'), delay(3_600), exit]);
  const finished = await activeFlow(audience, [exit]);
  const subscriber = await subscribe(audience, 'first');
  const second = await subscribe(audience, 'second');
  await eventually('two runs waiting', () => runsOf(audience, flow.id), (runs) => runs.length === 2 && runs.every((run) => run.state === 'waiting'));
  const [exited] = await eventually('two runs exited', () => runsOf(audience, finished.id), (runs) => runs.length === 2 && runs.every((run) => run.state === 'exited'));
  assert.ok(exited);
  // Time passes for two runs only: the first subscriber's finished run and its run in flight, both 31 days old.
  const db = await connectDatabase();
  try {
    await db.query(`UPDATE flow.flow_runs SET created_at = created_at - interval '31 days', finished_at = finished_at - interval '31 days' WHERE subscriber_id = $1`, [subscriber.id]);
  } finally {
    await db.end();
  }
  await eventually('the old finished run deleted', () => runsOf(audience, finished.id), (runs) => runs.length === 1);
  assert.deepEqual((await runsOf(audience, finished.id)).map((run) => [run.subscriberId, run.state]), [[second.id, 'exited']]);
  assert.deepEqual(
    (await runsOf(audience, flow.id)).map((run) => [run.subscriberId, run.state]).sort(),
    [[subscriber.id, 'waiting'], [second.id, 'waiting']].sort(),
  );
  assert.equal((await flowOf(audience, finished.id)).executionCount, 2);
  assert.equal((await flowOf(audience, flow.id)).executionCount, 2);
});
