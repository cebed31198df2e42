import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { QUESTION_PIPELINE } from '@herald/bus';
import { call, connectDatabase, eventually, expireQuestion, SERVER_API, seedAudience, startSendingHarness, waitForQuiet, type RunningProcess, type SendingHarness } from '@herald/testkit';

// A question's escalation steps are durable timers: when the question is still unanswered after a
// step's delay, that step's approvers are delivered to, once (counted on the strict push peer),
// and the question's record gains an `escalated` entry. A step of a question answered, cancelled
// or expired by then never fires, and a decision service killed around the due time still fires
// it exactly once. Each test works in its own workspace; the processes killed are the stack's own.

let harness: SendingHarness;
before(async () => {
  harness = await startSendingHarness({ decisions: true, env: { EXPIRY_SWEEP_MS: '200' } });
});
after(() => harness.stop());

interface Escalation {
  step: number;
  state: string;
  reason: string | null;
}

async function escalationsOf(questionId: string): Promise<Escalation[]> {
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<Escalation>(`SELECT step, state, reason FROM decision.question_escalations WHERE question_id = $1 ORDER BY step`, [questionId]);
    return rows;
  } finally {
    await db.end();
  }
}

interface Event {
  seq: number;
  kind: string;
  actor: Record<string, unknown> | null;
  detail: Record<string, unknown>;
  prevHash: string;
  hash: string;
}

async function eventsOf(key: string, decisionId: string): Promise<Event[]> {
  const response = await call<{ data: Event[] }>(harness.stack.gatewayUrl, `${SERVER_API}/decisions/${decisionId}/events`, { key });
  assert.equal(response.status, 200);
  return response.body.data;
}

/** The question notifications each endpoint received, by notification id. */
const pushesTo = (endpoint: string): string[] =>
  harness.peer.received(endpoint, { includeReplaced: true }).map((message) => String(harness.openPush(message).payload.notificationId));

const running = (name: string): RunningProcess => {
  const found = harness.stack.services.find((service) => service.child.exitCode === null && service.child.signalCode === null && service.output().includes(`${name} service serving`));
  if (!found) throw new Error(`no running ${name} service`);
  return found;
};

/** Two approver devices of a fresh workspace: user-0 (asked first) and user-1 (the escalation). */
async function approvers() {
  const audience = await seedAudience(harness, 2, 'growth', (index) => ({ externalId: `user-${index}`, tags: [], verified: true }));
  const [alice, bob] = audience.subscribers;
  if (!alice || !bob) throw new Error('two subscribers expected');
  return { key: audience.workspace.apiKey, alice, bob };
}

const decide = (key: string, body: Record<string, unknown>) =>
  call<{ decisionId: string; status: string; escalation: unknown }>(harness.stack.gatewayUrl, `${SERVER_API}/decisions`, { method: 'POST', key, body });

test('a step fires once when the question is still unanswered: its approver is pushed to, a target already delivered is not, and the record says so', async () => {
  const { key, alice, bob } = await approvers();
  const escalation = [
    { afterSeconds: 1, channels: ['web_push'], approvers: [{ kind: 'subscriber', id: bob.externalId }] },
    // The question's own devices again: already delivered, so nothing new is delivered.
    { afterSeconds: 2, channels: ['web_push'], approvers: [] },
  ];
  const opened = await decide(key, { question: 'Escalate to bob?', externalId: alice.externalId, escalation });
  assert.deepEqual([opened.status, opened.body.status, opened.body.escalation], [200, 'pending', escalation]);
  const id = opened.body.decisionId;

  await eventually('both steps fired', () => escalationsOf(id), (rows) => rows.length === 2 && rows.every((row) => row.state === 'fired'));
  await eventually('bob pushed', async () => pushesTo(bob.endpoint).length, (count) => count === 1);
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  assert.equal(pushesTo(alice.endpoint).length, 1);
  assert.equal(pushesTo(bob.endpoint).length, 1);

  const events = await eventsOf(key, id);
  const escalated = events.filter((event) => event.kind === 'escalated');
  assert.deepEqual(
    escalated.map((event) => event.detail),
    [
      { step: 0, afterSeconds: 1, channels: ['web_push'], approvers: [{ kind: 'subscriber', id: bob.externalId }], deliveries: [{ channel: 'web_push', target: `subscriber:${bob.externalId}` }] },
      { step: 1, afterSeconds: 2, channels: ['web_push'], approvers: [], deliveries: [] },
    ],
  );
  assert.deepEqual(
    escalated.map((event) => event.actor),
    [null, null],
  );
  // The step's delivery is recorded like any other, after the escalation.
  const delivered = events.filter((event) => event.kind === 'delivered').map((event) => [event.detail.channel, event.detail.target, event.detail.result === undefined ? 'no result' : 'result']);
  assert.deepEqual(delivered.map(([channel, target]) => [channel, target]).sort(), [
    ['web_push', 'approver_devices'],
    ['web_push', `subscriber:${bob.externalId}`],
  ]);
});

test("a question that names its approvers takes the answer of a step's approver once the step fired", async () => {
  const { key, alice, bob } = await approvers();
  const opened = await decide(key, {
    question: 'Bob may answer once escalated?',
    externalId: alice.externalId,
    approvers: [{ kind: 'subscriber', id: alice.externalId }],
    escalation: [{ afterSeconds: 1, approvers: [{ kind: 'subscriber', id: bob.externalId }] }],
  });
  assert.equal(opened.status, 200);
  const id = opened.body.decisionId;
  const [pushed] = await eventually('bob pushed', async () => harness.peer.received(bob.endpoint, { includeReplaced: true }), (messages) => messages.length === 1);
  assert.ok(pushed);
  const url = String(harness.openPush(pushed).payload.url);
  const answered = await call<{ status: string; approvers: unknown; answeredBy: { kind: string; id: string; channel: string } }>(
    harness.stack.gatewayUrl,
    `/api/v1/answer/${url.slice(url.indexOf('/a/') + 3)}`,
    { method: 'POST', body: { answer: 'no' } },
  );
  assert.equal(answered.status, 200, JSON.stringify(answered.body));
  const decision = await call<{ status: string; approvers: unknown; answeredBy: { kind: string; id: string } }>(harness.stack.gatewayUrl, `${SERVER_API}/decisions/${id}`, { key });
  assert.deepEqual(
    [decision.body.status, decision.body.approvers, decision.body.answeredBy.kind, decision.body.answeredBy.id],
    ['answered', [{ kind: 'subscriber', id: alice.externalId }, { kind: 'subscriber', id: bob.externalId }], 'subscriber', bob.externalId],
  );
});

test('a question answered before its step is due never escalates: the step is skipped', async () => {
  const { key, alice, bob } = await approvers();
  const opened = await decide(key, {
    question: 'Answered in time?',
    externalId: alice.externalId,
    escalation: [{ afterSeconds: 2, channels: ['web_push'], approvers: [{ kind: 'subscriber', id: bob.externalId }] }],
  });
  assert.equal(opened.status, 200);
  const id = opened.body.decisionId;
  await eventually('the step recorded', () => escalationsOf(id), (rows) => rows.length === 1);
  const answered = await call<{ status: string }>(harness.stack.gatewayUrl, `${SERVER_API}/decisions/${id}`, { method: 'POST', key, body: { answer: 'yes' } });
  assert.deepEqual([answered.status, answered.body.status], [200, 'answered']);

  const [skipped] = await eventually('the step skipped', () => escalationsOf(id), (rows) => rows[0]?.state !== 'pending');
  assert.deepEqual(skipped, { step: 0, state: 'skipped', reason: 'the question is answered' });
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  assert.equal(pushesTo(bob.endpoint).length, 0);
  assert.deepEqual(
    (await eventsOf(key, id)).filter((event) => event.kind === 'escalated'),
    [],
  );
});

test('a cancelled question never escalates', async () => {
  const { key, alice, bob } = await approvers();
  const opened = await decide(key, {
    question: 'Cancelled in time?',
    externalId: alice.externalId,
    escalation: [{ afterSeconds: 1, channels: ['web_push'], approvers: [{ kind: 'subscriber', id: bob.externalId }] }],
  });
  const id = opened.body.decisionId;
  await eventually('the step recorded', () => escalationsOf(id), (rows) => rows.length === 1);
  assert.equal((await call(harness.stack.gatewayUrl, `${SERVER_API}/decisions/${id}`, { method: 'DELETE', key })).status, 200);
  const [skipped] = await eventually('the step skipped', () => escalationsOf(id), (rows) => rows[0]?.state !== 'pending');
  assert.deepEqual(skipped, { step: 0, state: 'skipped', reason: 'the question is cancelled' });
  assert.equal(pushesTo(bob.endpoint).length, 0);
});

test('escalation never extends a lifetime: a step due after the expiry is never fired, nor one whose question expired first', async () => {
  const { key, alice, bob } = await approvers();
  const late = await decide(key, {
    question: 'Escalate after my expiry?',
    externalId: alice.externalId,
    expiresInSeconds: 60,
    escalation: [{ afterSeconds: 120, channels: ['web_push'], approvers: [{ kind: 'subscriber', id: bob.externalId }] }],
  });
  assert.equal(late.status, 200);
  const [never] = await eventually('the late step recorded', () => escalationsOf(late.body.decisionId), (rows) => rows.length === 1);
  assert.deepEqual(never, { step: 0, state: 'skipped', reason: 'due after the question expires' });

  const expiring = await decide(key, {
    question: 'Expired before my step?',
    externalId: alice.externalId,
    escalation: [{ afterSeconds: 2, channels: ['web_push'], approvers: [{ kind: 'subscriber', id: bob.externalId }] }],
  });
  const id = expiring.body.decisionId;
  await eventually('the step recorded', () => escalationsOf(id), (rows) => rows.length === 1);
  await expireQuestion(id);
  const [skipped] = await eventually('the step skipped', () => escalationsOf(id), (rows) => rows[0]?.state !== 'pending');
  assert.deepEqual(skipped, { step: 0, state: 'skipped', reason: 'the question is expired' });
  // The expiry itself is recorded once, by the sweep.
  const events = await eventually('the expiry recorded', () => eventsOf(key, id), (found) => found.some((event) => event.kind === 'expired'));
  assert.deepEqual(
    events.filter((event) => event.kind === 'expired' || event.kind === 'escalated').map((event) => event.kind),
    ['expired'],
  );
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  assert.equal(pushesTo(bob.endpoint).length, 0);
});

test('a decision service killed -9 before a step is due fires it exactly once after it is back', async () => {
  const { key, alice, bob } = await approvers();
  const opened = await decide(key, {
    question: 'Escalate across a crash?',
    externalId: alice.externalId,
    escalation: [{ afterSeconds: 2, channels: ['web_push'], approvers: [{ kind: 'subscriber', id: bob.externalId }] }],
  });
  const id = opened.body.decisionId;
  await eventually('the step recorded', () => escalationsOf(id), (rows) => rows.length === 1);
  const decision = running('decision');
  decision.child.kill('SIGKILL');
  await decision.exited;
  // Its due time passes while no decision service runs.
  const db = await connectDatabase();
  try {
    await eventually('the step due', async () => (await db.query(`SELECT 1 FROM decision.question_escalations WHERE question_id = $1 AND due_at <= clock_timestamp()`, [id])).rowCount, (count) => count === 1);
  } finally {
    await db.end();
  }
  assert.deepEqual(await escalationsOf(id), [{ step: 0, state: 'pending', reason: null }]);

  await harness.stack.startService('decision', {}, { replacing: true });
  await eventually('the step fired', () => escalationsOf(id), (rows) => rows[0]?.state === 'fired', 60_000);
  await eventually('bob pushed', async () => pushesTo(bob.endpoint).length, (count) => count === 1, 60_000);
  // A second replica started after it fired finds nothing to fire.
  await harness.stack.startService('decision', {});
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  assert.equal(pushesTo(bob.endpoint).length, 1);
  assert.equal((await eventsOf(key, id)).filter((event) => event.kind === 'escalated').length, 1);
});

test('a decision service killed -9 at the due time, beside another replica: the step fires exactly once', async () => {
  const { key, alice, bob } = await approvers();
  // Two replicas work the steps (the test before left two running; one more if not).
  const replicas = () => harness.stack.services.filter((service) => service.child.exitCode === null && service.child.signalCode === null && service.output().includes('decision service serving'));
  if (replicas().length < 2) await harness.stack.startService('decision', {});
  const opened = await decide(key, {
    question: 'Escalate while a replica dies?',
    externalId: alice.externalId,
    escalation: [{ afterSeconds: 2, channels: ['web_push'], approvers: [{ kind: 'subscriber', id: bob.externalId }] }],
  });
  const id = opened.body.decisionId;
  const db = await connectDatabase();
  try {
    await eventually('the step due', async () => (await db.query(`SELECT 1 FROM decision.question_escalations WHERE question_id = $1 AND due_at <= clock_timestamp()`, [id])).rowCount, (count) => count === 1);
  } finally {
    await db.end();
  }
  // Whichever replica claimed it (or none yet), one of them dies now: the one the gateway does not call (the last started).
  const victim = replicas().at(-1);
  if (!victim) throw new Error('no decision replica');
  victim.child.kill('SIGKILL');
  await victim.exited;
  await eventually('the step fired', () => escalationsOf(id), (rows) => rows[0]?.state === 'fired', 60_000);
  await eventually('bob pushed', async () => pushesTo(bob.endpoint).length, (count) => count === 1, 60_000);
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  assert.equal(pushesTo(bob.endpoint).length, 1);
  assert.equal((await eventsOf(key, id)).filter((event) => event.kind === 'escalated').length, 1);
});
