import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import {
  call,
  eventually,
  infraComponent as infra,
  repoRoot,
  requiredEnv,
  seedAudience,
  SERVER_API,
  startSendingHarness,
  type ApiResponse,
  type Audience,
  type SendingHarness,
} from '@herald/testkit';
import pg from 'pg';

// Acknowledged means durable: PostgreSQL is killed with SIGKILL (no shutdown at all; it recovers
// from its WAL on the next start) the instant the last of a burst of writes was acknowledged, and
// every write that answered 2xx is read back afterwards, exactly. With `synchronous_commit = off`
// (what the local PostgreSQL once ran with) the writes of the last few hundred milliseconds were
// lost this way. This file crashes the shared PostgreSQL, so scripts/test.sh runs it alone, after
// every other test file (*.disruptive.test.js).

let harness: SendingHarness;
let audience: Audience;

before(async () => {
  harness = await startSendingHarness({ decisions: true });
  // Enterprise: 1,000 requests a minute, well above what the writers make before the crash.
  audience = await seedAudience(harness, 2, 'enterprise');
});
after(async () => {
  // Whatever failed, the shared PostgreSQL runs again for the files after this one.
  await infra('start', 'postgres');
  await harness?.stop();
});

const api = (path: string, options: Parameters<typeof call>[2] = {}) => call(harness.stack.gatewayUrl, `${SERVER_API}${path}`, { key: audience.workspace.apiKey, ...options });

function accepted(what: string, response: ApiResponse, status = 200): Record<string, unknown> {
  assert.equal(response.status, status, `${what}: ${JSON.stringify(response.body)}`);
  return response.body;
}

/** A read that may meet the services still reconnecting (503 `unavailable`), never anything else. */
async function readBack(what: string, path: string): Promise<Record<string, unknown>> {
  const response = await eventually(
    what,
    () => api(path),
    (current) => {
      if (current.status === 503) return false;
      assert.equal(current.status, 200, `${what}: ${JSON.stringify(current.body)}`);
      return true;
    },
    30_000,
  );
  return response.body;
}

/** When the running postmaster started (a connection of its own: the crash breaks every open one). */
async function startedAt(): Promise<number | undefined> {
  const client = new pg.Client({ connectionString: requiredEnv('DATABASE_URL') });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.query<{ started: Date }>('SELECT pg_postmaster_start_time() AS started')).rows[0]?.started.getTime();
  } finally {
    await client.end().catch(() => undefined);
  }
}

interface Acknowledged {
  /** `withdrawn`: the withdrawal was acknowledged; `maybe`: it was refused (it may have committed or not). */
  asks: { id: string; question: string; withdrawn: boolean | 'maybe' }[];
  subscribers: { id: string; externalId: string }[];
  answers: string[];
  /** The pushes counted against the allowance by every acknowledged send. */
  sent: number;
  /** Requests refused while PostgreSQL was gone (503 `unavailable`). */
  refused: number;
  /** Any other answer than 2xx or 503: none is allowed. */
  unexpected: string[];
}

/**
 * Four writers, each in turn opening a question and withdrawing it (a workspace holds at most 25
 * pending), subscribing a browser, answering one of the decisions given and (every fifth round)
 * sending, until stopped; what was acknowledged is kept.
 */
function startWriters(decisions: string[]): { acknowledged: Acknowledged; stop(): Promise<Acknowledged> } {
  const acknowledged: Acknowledged = { asks: [], subscribers: [], answers: [], sent: 0, refused: 0, unexpected: [] };
  let running = true;
  const outcome = (what: string, response: ApiResponse): boolean => {
    if (response.status === 200 || response.status === 201) return true;
    if (response.status === 503) acknowledged.refused += 1;
    else acknowledged.unexpected.push(`${what}: ${response.status} ${JSON.stringify(response.body)}`);
    return false;
  };
  // A writer stops at its first 503: PostgreSQL is gone, and what it writes after that proves nothing.
  const writer = async (index: number) => {
    for (let round = 0; running && round < 500 && acknowledged.refused === 0; round += 1) {
      const name = `w${index}-r${round}`;
      const ask = await api('/ask', { method: 'POST', body: { question: `question ${name}`, wait: false } });
      if (outcome('ask', ask)) {
        const opened = { id: String(ask.body.correlationId), question: `question ${name}`, withdrawn: false as boolean | 'maybe' };
        acknowledged.asks.push(opened);
        opened.withdrawn = outcome('withdraw', await api(`/ask/${opened.id}`, { method: 'DELETE' })) || 'maybe';
      }
      const subscription = harness.peer.createSubscription({ applicationServerKey: audience.vapidPublicKey });
      const subscribed = await call(harness.stack.gatewayUrl, '/api/v1/subscribe', {
        method: 'POST',
        key: audience.workspace.siteKey,
        headers: { origin: 'https://shop.example.test' },
        body: { endpoint: subscription.endpoint, keys: subscription.keys, externalId: name, tags: [] },
      });
      if (outcome('subscribe', subscribed)) acknowledged.subscribers.push({ id: String(subscribed.body.subscriberId), externalId: name });
      const decision = decisions.pop();
      if (decision !== undefined) {
        const answered = await api(`/decisions/${decision}`, { method: 'POST', body: { answer: 'yes' } });
        if (outcome('answer', answered)) acknowledged.answers.push(decision);
        else decisions.push(decision);
      }
      if (round % 5 === 0) {
        const send = await api('/send', { method: 'POST', body: { title: name, body: 'counted' } });
        if (outcome('send', send)) acknowledged.sent += send.body.sent as number;
      }
    }
  };
  const done = Promise.all([0, 1, 2, 3].map(writer));
  return {
    acknowledged,
    async stop() {
      running = false;
      await done;
      return acknowledged;
    },
  };
}

test('every write acknowledged up to a kill -9 of PostgreSQL is there after its recovery', async () => {
  // The allowance already used, so the count after the crash can be checked against it.
  const first = accepted('the first send', await api('/send', { method: 'POST', body: { title: 'before', body: 'counted' } }));
  const remainingBefore = (first.limits as { remaining: number }).remaining;
  const decisions: string[] = [];
  for (let index = 0; index < 200; index += 1) {
    decisions.push(String(accepted(`decision ${index}`, await api('/decisions', { method: 'POST', body: { question: `Deploy ${index}?` } })).decisionId));
  }
  const serverStarted = await startedAt();
  const logFile = join(repoRoot, '.local/postgres/postgres.log');
  const logBefore = (await readFile(logFile)).length;

  // Writes flowing, then the crash in the middle of them: the last acknowledgements come from
  // commits made a few milliseconds before the kill.
  const writers = startWriters(decisions);
  await eventually('writes acknowledged', async () => decisions.length, (left) => left <= 180);
  const crashedPid = await infra('crash', 'postgres');
  let acknowledged: Awaited<ReturnType<typeof writers.stop>>;
  try {
    // The fault bit: requests meet PostgreSQL gone.
    await eventually('a write refused while PostgreSQL is gone', async () => writers.acknowledged.refused, (refused) => refused > 0);
    acknowledged = await writers.stop();
  } finally {
    // Started again even when the writers failed: a server left down would fail every later test.
    await infra('start', 'postgres');
  }
  assert.deepEqual(acknowledged.unexpected, []);
  assert.ok(acknowledged.asks.length > 20 && acknowledged.subscribers.length > 20, JSON.stringify({ asks: acknowledged.asks.length, subscribers: acknowledged.subscribers.length }));

  // The fault bit: the server was killed (a new postmaster) and recovered from its WAL.
  assert.match(crashedPid, /^\d+$/);
  await eventually('PostgreSQL answering again', () => startedAt().catch(() => undefined), (started) => started !== undefined);
  assert.notEqual(await startedAt(), serverStarted, 'PostgreSQL was not restarted');
  const log = (await readFile(logFile)).subarray(logBefore).toString();
  assert.match(log, /database system was not properly shut down; automatic recovery in progress/);

  for (const { id, question, withdrawn } of acknowledged.asks) {
    const ask = await readBack(`ask ${id}`, `/ask/${id}`);
    assert.deepEqual([ask.correlationId, ask.question], [id, question]);
    const expected = withdrawn === 'maybe' ? ['pending', 'withdrawn'] : [withdrawn ? 'withdrawn' : 'pending'];
    assert.ok(expected.includes(String(ask.status)), `ask ${id}: ${String(ask.status)}, expected ${expected.join(' or ')}`);
  }
  for (const subscriber of acknowledged.subscribers) {
    const record = await readBack(`subscriber ${subscriber.externalId}`, `/subscribers/${subscriber.id}`);
    assert.deepEqual([record.id, record.status, record.externalId], [subscriber.id, 'active', subscriber.externalId]);
  }
  for (const id of acknowledged.answers) {
    const read = await readBack(`decision ${id}`, `/decisions/${id}`);
    assert.deepEqual([read.status, read.answer, read.approved], ['answered', 'yes', true]);
  }
  // Every push an acknowledged send counted is still counted (a send refused with 503 may or may
  // not have been, depending on whether its commit was made before the kill).
  const count = await readBack('the subscriber count', '/subscribers/count');
  const after = accepted('a send after the crash', await api('/send', { method: 'POST', body: { title: 'after', body: 'counted' } }));
  assert.equal(after.sent, count.active);
  assert.ok(
    (after.limits as { remaining: number }).remaining <= remainingBefore - acknowledged.sent - (after.sent as number),
    `allowance: ${JSON.stringify({ remainingBefore, acknowledged: acknowledged.sent, after: after.limits })}`,
  );
});
