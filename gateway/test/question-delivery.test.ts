import assert from 'node:assert/strict';
import { readdir, readFile, readlink } from 'node:fs/promises';
import { after, before, test } from 'node:test';

import { QUESTION_PIPELINE } from '@herald/bus';
import { call, connectDatabase, eventually, SERVER_API, seedAudience, startSendingHarness, waitForQuiet, type RunningProcess, type SendingHarness } from '@herald/testkit';

// A question's deliveries are made from its QuestionOpened event (written with the question) and
// recorded per (question, channel, target), so they survive what the gateway's push after the
// fact did not: the campaign service down when the question is opened, the gateway killed after
// (or before) its answer, the decision service killed in the middle of a delivery. Each question
// reaches each approver device exactly once (counted on the strict push peer). These tests kill
// the stack's own processes only, never the shared PostgreSQL, Redis or Kafka.

let harness: SendingHarness;
before(async () => {
  harness = await startSendingHarness({
    decisions: true,
    // Retries every 100-500 ms while the campaign service is away; a dead replica's claim comes back after 3 s.
    env: { QUESTION_DELIVERY_RETRY_BASE_MS: '200', QUESTION_DELIVERY_RETRY_CAP_MS: '500', QUESTION_DELIVERY_LEASE_MS: '3000' },
  });
});
after(() => harness.stop());

interface Delivery {
  channel: string;
  target: string;
  state: string;
  attempts: number;
  last_error: string | null;
  result: string | null;
  reached: number | null;
}

async function deliveriesOf(questionId: string): Promise<Delivery[]> {
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<Delivery>(
      `SELECT channel, target, state, attempts, last_error, result, reached FROM decision.question_deliveries WHERE question_id = $1 ORDER BY channel, target`,
      [questionId],
    );
    return rows;
  } finally {
    await db.end();
  }
}

/** Whether a delivery is claimed now (its call in flight). */
async function claimed(questionId: string): Promise<boolean> {
  const db = await connectDatabase();
  try {
    const { rows } = await db.query(`SELECT 1 FROM decision.question_deliveries WHERE question_id = $1 AND state = 'pending' AND leased_until > clock_timestamp()`, [questionId]);
    return rows.length === 1;
  } finally {
    await db.end();
  }
}

/** The question notifications each endpoint received, by notification id. */
const pushesTo = (endpoint: string): string[] =>
  harness.peer.received(endpoint, { includeReplaced: true }).map((message) => String(harness.openPush(message).payload.notificationId));

const running = (name: string): RunningProcess => {
  const found = harness.stack.services.find((service) => service.child.exitCode === null && service.child.signalCode === null && service.output().includes(`${name} service serving`));
  if (!found) throw new Error(`no running ${name} service`);
  return found;
};

/**
 * Whether a request waits unread in a connection a process accepted (Linux: its socket inodes from
 * /proc/<pid>/fd; in /proc/net/tcp and tcp6, a socket on the local port of one of its listening
 * sockets with bytes in its receive queue): a call sent to a process stopped with SIGSTOP.
 */
async function requestWaiting(pid: number): Promise<boolean> {
  const inodes = new Set<string>();
  for (const fd of await readdir(`/proc/${pid}/fd`)) {
    const inode = /^socket:\[(\d+)\]$/.exec(await readlink(`/proc/${pid}/fd/${fd}`).catch(() => ''))?.[1];
    if (inode) inodes.add(inode);
  }
  const sockets = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of (await readFile(table, 'utf8').catch(() => '')).split('\n').slice(1)) {
      const [, local = '', , state = '', queues = '', , , , , inode = ''] = line.trim().split(/\s+/);
      if (inodes.has(inode)) sockets.push({ port: local.split(':').at(-1), listening: state === '0A', rxQueue: Number.parseInt(queues.split(':')[1] ?? '0', 16) });
    }
  }
  const served = new Set(sockets.filter((socket) => socket.listening).map((socket) => socket.port));
  return sockets.some((socket) => !socket.listening && served.has(socket.port) && socket.rxQueue > 0);
}

async function kill(process: RunningProcess): Promise<void> {
  process.child.kill('SIGKILL');
  await process.exited;
}

/** Two approver devices of a fresh workspace: user-0 and user-1. */
async function approvers() {
  const audience = await seedAudience(harness, 2, 'growth', (index) => ({ externalId: `user-${index}`, tags: [], verified: true }));
  const [alice, bob] = audience.subscribers;
  if (!alice || !bob) throw new Error('two subscribers expected');
  return { key: audience.workspace.apiKey, alice, bob };
}

const ask = (key: string, body: Record<string, unknown>, url = harness.stack.gatewayUrl) =>
  call<{ correlationId: string; liveUrl: string; status: string }>(url, `${SERVER_API}/ask`, { method: 'POST', key, body: { wait: false, ...body } });

test('a question opened while the campaign service is down is pushed exactly once when it is back; one answered meanwhile is not pushed', async () => {
  const { key, alice, bob } = await approvers();
  await kill(running('campaign'));

  const asked = await ask(key, { question: 'Deploy while campaign is down?', externalIds: [alice.externalId] });
  assert.deepEqual([asked.status, asked.body.status], [200, 'pending']);
  const decided = await call<{ decisionId: string; status: string }>(harness.stack.gatewayUrl, `${SERVER_API}/decisions`, {
    method: 'POST',
    key,
    body: { question: 'Refund while campaign is down?', externalId: bob.externalId },
  });
  assert.deepEqual([decided.status, decided.body.status], [200, 'pending']);
  const answeredMeanwhile = await ask(key, { question: 'Answered before it could be pushed?', externalIds: [alice.externalId] });
  assert.equal(answeredMeanwhile.status, 200);

  // Each is retried while the campaign service is away, the error recorded.
  for (const id of [asked.body.correlationId, decided.body.decisionId, answeredMeanwhile.body.correlationId]) {
    const [retried] = await eventually(`${id} retried`, () => deliveriesOf(id), (rows) => rows.length === 1 && (rows[0]?.attempts ?? 0) >= 2);
    assert.deepEqual({ ...retried, attempts: undefined, last_error: undefined }, { channel: 'web_push', target: 'approver_devices', state: 'pending', attempts: undefined, last_error: undefined, result: null, reached: null });
    assert.notEqual(retried?.last_error ?? null, null);
  }
  const token = answeredMeanwhile.body.liveUrl.slice(answeredMeanwhile.body.liveUrl.indexOf('/a/') + 3);
  const answered = await call(harness.stack.gatewayUrl, `/api/v1/answer/${token}`, { method: 'POST', body: { answer: 'yes' } });
  assert.equal(answered.status, 200);

  await harness.stack.startService('campaign', {}, { replacing: true });
  const [delivered] = await eventually('the ask delivered', () => deliveriesOf(asked.body.correlationId), (rows) => rows[0]?.state === 'delivered', 60_000);
  await eventually('the decision delivered', () => deliveriesOf(decided.body.decisionId), (rows) => rows[0]?.state === 'delivered', 60_000);
  const [skipped] = await eventually('the answered question skipped', () => deliveriesOf(answeredMeanwhile.body.correlationId), (rows) => rows[0]?.state === 'skipped', 60_000);
  assert.deepEqual([skipped?.last_error, skipped?.result], ['the question is answered', null]);
  await eventually('both pushed', async () => [pushesTo(alice.endpoint).length, pushesTo(bob.endpoint).length], ([a, b]) => a === 1 && b === 1);
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  assert.deepEqual(pushesTo(alice.endpoint), [delivered?.result]);
  assert.equal(pushesTo(bob.endpoint).length, 1);
  assert.equal(delivered?.reached, 1);
});

test('a gateway killed right after its 200, or while it holds the caller, loses nothing: the question is delivered once', async () => {
  const { key, alice, bob } = await approvers();
  const url = await harness.stack.addGateway();
  const gateway = harness.stack.gateways.at(-1) as RunningProcess;
  const asked = await ask(key, { question: 'Killed after the 200?', externalIds: [alice.externalId] }, url);
  assert.equal(asked.status, 200);
  await kill(gateway);

  // A caller held by a gateway (wait: true) that dies under it: the question was opened before the wait began.
  const holdingUrl = await harness.stack.addGateway();
  const holding = harness.stack.gateways.at(-1) as RunningProcess;
  const held = ask(key, { question: 'Killed while holding?', externalIds: [bob.externalId], wait: true, timeoutSeconds: 30 }, holdingUrl).catch((err: unknown) => err);
  await eventually('the held question pushed', async () => pushesTo(bob.endpoint).length, (count) => count === 1);
  await kill(holding);
  assert.ok((await held) instanceof Error, 'the held call dies with its gateway');

  await eventually('the first question pushed', async () => pushesTo(alice.endpoint).length, (count) => count === 1);
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  assert.equal(pushesTo(alice.endpoint).length, 1);
  assert.equal(pushesTo(bob.endpoint).length, 1);
  assert.deepEqual((await deliveriesOf(asked.body.correlationId)).map((row) => [row.state, row.attempts]), [['delivered', 1]]);
});

test('a decision service killed in the middle of a delivery delivers it once: the next replica replays the call whose reply was lost', async () => {
  const { key, alice } = await approvers();
  // A first question, so the decision service holds a connection to the campaign service.
  const warmUp = await ask(key, { question: 'Warm up?', externalIds: [alice.externalId] });
  assert.equal(warmUp.status, 200);
  await eventually('the warm-up pushed', async () => pushesTo(alice.endpoint).length, (count) => count === 1);

  // The campaign service frozen: the next delivery's call waits in its socket.
  const campaign = running('campaign');
  campaign.child.kill('SIGSTOP');
  let asked;
  try {
    asked = await ask(key, { question: 'Killed mid-delivery?', externalIds: [alice.externalId] });
    assert.equal(asked.status, 200);
    const questionId = asked.body.correlationId;
    await eventually('the delivery in flight', () => claimed(questionId), (inFlight) => inFlight);
    // Its call has reached the frozen campaign service (claimed is not yet sent).
    await eventually('the call waiting in the campaign service\'s socket', () => requestWaiting(campaign.child.pid ?? 0), (waiting) => waiting);
    await kill(running('decision'));
  } finally {
    campaign.child.kill('SIGCONT');
  }
  // The campaign service takes the call of the dead replica and pushes: its reply is lost.
  await eventually('the question pushed by the lost call', async () => pushesTo(alice.endpoint).length, (count) => count === 2);
  const [lost] = await deliveriesOf(asked.body.correlationId);
  assert.deepEqual([lost?.state, lost?.attempts, lost?.result], ['pending', 1, null]);

  await harness.stack.startService('decision', {}, { replacing: true });
  const [delivered] = await eventually('the delivery recorded by the next replica', () => deliveriesOf(asked.body.correlationId), (rows) => rows[0]?.state === 'delivered', 60_000);
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  const pushes = pushesTo(alice.endpoint);
  assert.equal(pushes.length, 2);
  // The replayed call answered the notification the lost one queued: nothing was pushed twice.
  assert.deepEqual([delivered?.attempts, delivered?.result, delivered?.reached], [2, pushes[1], 1]);
});

test('a push the campaign service refuses for good is recorded failed, not retried; the question stays answerable through its link', async () => {
  const { key, alice } = await approvers();
  // Per-subscriber placeholders count at their longest: 31 of them make the push too large for one encrypted message.
  const asked = await ask(key, { question: '{{subscriber.a}}'.repeat(31), agentName: '{{subscriber.b}}'.repeat(6), externalIds: [alice.externalId] });
  assert.equal(asked.status, 200);
  const [failed] = await eventually('the delivery failed', () => deliveriesOf(asked.body.correlationId), (rows) => rows[0]?.state === 'failed');
  assert.deepEqual([failed?.attempts, failed?.result], [1, null]);
  assert.match(failed?.last_error ?? '', /^The notification is \d+ bytes as sent to browsers; at most 3993 fit one encrypted push message\.$/);
  await waitForQuiet(harness.stack.topicPrefix, QUESTION_PIPELINE);
  assert.deepEqual(pushesTo(alice.endpoint), []);
  const token = asked.body.liveUrl.slice(asked.body.liveUrl.indexOf('/a/') + 3);
  const answered = await call<{ status: string }>(harness.stack.gatewayUrl, `/api/v1/answer/${token}`, { method: 'POST', body: { answer: 'no' } });
  assert.deepEqual([answered.status, answered.body.status], [200, 'answered']);
});

test('a delivery on a channel this version does not know is left pending for a replica that does', async () => {
  const { key } = await approvers();
  const asked = await ask(key, { question: 'By carrier pigeon?' });
  assert.equal(asked.status, 200);
  await eventually('the web push delivered', () => deliveriesOf(asked.body.correlationId), (rows) => rows[0]?.state === 'delivered');
  // What a newer replica's QuestionOpened would have recorded.
  const db = await connectDatabase();
  try {
    await db.query(`INSERT INTO decision.question_deliveries (question_id, channel, target, namespace) VALUES ($1, 'carrier_pigeon', 'loft', $2)`, [
      asked.body.correlationId,
      harness.stack.topicPrefix,
    ]);
    await db.query('NOTIFY decision_question_deliveries');
  } finally {
    await db.end();
  }
  // Tried again after the longest backoff (QUESTION_DELIVERY_RETRY_CAP_MS, 500 ms here), never given up on.
  const rows = await eventually('the unknown channel tried twice', () => deliveriesOf(asked.body.correlationId), (found) => (found[0]?.attempts ?? 0) >= 2);
  assert.deepEqual(
    rows.map((row) => [row.channel, row.state, row.last_error, row.result]),
    [
      ['carrier_pigeon', 'pending', 'this replica does not know the channel carrier_pigeon', null],
      ['web_push', 'delivered', null, rows[1]?.result],
    ],
  );
  assert.equal(rows[1]?.attempts, 1);
});
