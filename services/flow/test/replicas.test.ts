import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { eventually, seedAudience, startSendingHarness, subscribeBrowser, type Audience, type RunningProcess, type SendingHarness, type Subscribed } from '@herald/testkit';

import { delay, flowApi, send } from './helpers.js';

// Two flow replicas share the work: the trigger consumer group splits the audience events'
// partitions (keyed by workspace) between them, and both claim due runs with leases. Each run's
// steps are executed exactly once (the strict push peer's count per subscriber); one replica is
// killed (SIGKILL) as the parked runs fall due, and the other finishes every run, the killed one's
// claimed runs once their lease ends and its partitions' new triggers once the group rebalanced.

const LEASE_MS = 3_000;
const DELAY_S = 6;
let harness: SendingHarness;
let replicas: [RunningProcess, RunningProcess];
before(async () => {
  harness = await startSendingHarness({ services: ['flow'], env: { FLOW_RUN_POLL_MS: '100', FLOW_RUN_LEASE_MS: String(LEASE_MS) } });
  const first = harness.stack.services.find((running) => running.output().includes('flow service serving'));
  assert.ok(first);
  replicas = [first, await harness.stack.startService('flow')];
});
after(() => harness?.stop());

const STEPS = [send('A'), delay(DELAY_S), send('B')];
const { createFlow, runsOf, flowOf, titlesTo } = flowApi(() => harness);

/** Whether this replica started the runs of a trigger of this workspace (its log says so). */
const startedRunsFor = (replica: RunningProcess, workspaceId: string): boolean =>
  replica
    .output()
    .split('\n')
    .some((line) => line.includes('subscription started flow runs') && line.includes(workspaceId));

interface Tenant {
  audience: Audience;
  flowId: string;
  subscribers: Subscribed[];
}

test('two replicas split the triggers, each run step executes once, and one replica killed mid-run leaves its runs to the other', { timeout: 240_000 }, async () => {
  // Workspaces until both replicas have started runs (a workspace's events go to one partition).
  const tenants: Tenant[] = [];
  const handledBy = new Map<string, number>();
  while (tenants.length < 4 || new Set(handledBy.values()).size < 2) {
    assert.ok(tenants.length < 20, 'twenty workspaces and the triggers did not split between the replicas');
    const audience = await seedAudience(harness, 0);
    const flow = await createFlow(audience, STEPS);
    tenants.push({ audience, flowId: flow.id, subscribers: [await subscribeBrowser(harness, audience, { externalId: 'one', tags: [] })] });
    const { workspaceId } = audience.workspace;
    const [index] = await eventually(
      'the trigger handled',
      async () => replicas.flatMap((replica, at) => (startedRunsFor(replica, workspaceId) ? [at] : [])),
      (found) => found.length > 0,
    );
    handledBy.set(workspaceId, index as number);
  }
  // A second subscriber in every workspace at once: runs parked on both replicas' timers.
  await Promise.all(tenants.map(async (tenant) => tenant.subscribers.push(await subscribeBrowser(harness, tenant.audience, { externalId: 'two', tags: [] }))));
  const started = await Promise.all(tenants.map((tenant) => eventually('the second runs', () => runsOf(tenant.audience, tenant.flowId), (runs) => runs.length === 2, 30_000)));

  // Killed as the earliest of them falls due: what it claimed comes back after the lease.
  const dueTimes = started.flat().flatMap((run) => (run.state === 'waiting' ? [Date.parse(run.nextWakeUpAt ?? '')] : []));
  assert.ok(dueTimes.length > 0, 'runs parked when the replica is killed');
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(...dueTimes) - Date.now())));
  const [survivor, killed] = replicas;
  killed.child.kill('SIGKILL');
  await killed.exited;

  // New triggers in every workspace: those of the killed replica's partitions reach the survivor after the rebalance.
  for (const tenant of tenants) tenant.subscribers.push(await subscribeBrowser(harness, tenant.audience, { externalId: 'after-the-kill', tags: [] }));
  for (const tenant of tenants) {
    await eventually(
      'every run completed',
      () => runsOf(tenant.audience, tenant.flowId),
      (runs) => runs.length === 3 && runs.every((run) => run.state === 'completed'),
      90_000,
    );
  }
  const everyone = tenants.flatMap((tenant) => tenant.subscribers);
  await eventually('every push', async () => everyone.flatMap(titlesTo), (titles) => titles.length >= 2 * everyone.length, 60_000);
  for (const subscriber of everyone) assert.deepEqual(titlesTo(subscriber), ['A', 'B']);
  for (const tenant of tenants) {
    assert.equal((await flowOf(tenant.audience, tenant.flowId)).executionCount, 3);
    // Every workspace's triggers are the survivor's now, the killed replica's former ones included.
    assert.ok(startedRunsFor(survivor, tenant.audience.workspace.workspaceId));
  }
  assert.ok([...handledBy.values()].includes(1), "the killed replica had some workspaces' triggers");
  assert.deepEqual([survivor.child.exitCode, survivor.child.signalCode], [null, null]);
});
