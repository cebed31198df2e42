import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { questionEventHash } from '@herald/domain';
import { call, connectDatabase, createKey, createWorkspace, eventually, SERVER_API, seedAudience, startSendingHarness, type SendingHarness } from '@herald/testkit';

// Who may answer a question and who did (issue #24 part 3): a question may name its approvers;
// an answer from anyone else is refused (403) and recorded as a refused attempt; every answer
// records answeredBy; each entry of the question's record is chained to the one before it. Each
// test works in its own workspace.

let harness: SendingHarness;
before(async () => {
  harness = await startSendingHarness({ decisions: true });
});
after(() => harness.stop());

interface AnsweredBy {
  kind: string;
  id: string;
  displayName: string;
  channel: string;
  at: string;
}
interface Decision {
  decisionId: string;
  status: string;
  answer: string | null;
  approvers: Array<{ kind: string; id: string }>;
  answeredBy: AnsweredBy | null;
  escalation: Array<{ afterSeconds: number; channels: string[]; approvers: Array<{ kind: string; id: string }> }>;
  decisionPageUrl: string;
  answeredAt: string | null;
}
interface Ask {
  correlationId: string;
  status: string;
  value?: string;
  answeredBy: AnsweredBy | null;
}
interface Failure {
  code: string;
  message: string;
  hint?: string;
  fields?: Array<{ field: string; problem: string }>;
}
interface Pushed {
  url: string;
  answerUrl: string;
}

const gateway = () => harness.stack.gatewayUrl;
const post = <T>(key: string, path: string, body: unknown) => call<T>(gateway(), `${SERVER_API}${path}`, { method: 'POST', key, body });
const get = <T>(key: string, path: string) => call<T>(gateway(), `${SERVER_API}${path}`, { key });

async function open(key: string, body: Record<string, unknown>): Promise<Decision> {
  const response = await post<Decision>(key, '/decisions', body);
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body;
}

interface EventRow {
  question_id: string;
  seq: number;
  kind: string;
  at: Date;
  actor: Record<string, unknown> | null;
  detail: Record<string, unknown>;
  prev_hash: string;
  hash: string;
}

/** The question's record as stored, each entry's hash checked against the one before it. */
async function record(questionId: string): Promise<EventRow[]> {
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<EventRow>(`SELECT * FROM decision.question_events WHERE question_id = $1 ORDER BY seq`, [questionId]);
    let prev = '';
    for (const row of rows) {
      assert.equal(row.prev_hash, prev, `entry ${row.seq} names the hash before it`);
      assert.equal(row.hash, questionEventHash(prev, { questionId, seq: row.seq, kind: row.kind, at: row.at.toISOString(), actor: row.actor, detail: row.detail }));
      prev = row.hash;
    }
    return rows;
  } finally {
    await db.end();
  }
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

test('without approvers a key answers as itself, and the record says opened then answered', async () => {
  const workspace = await createWorkspace();
  const { keyId, apiKey } = await createKey(workspace.workspaceId, 'runtime');
  const opened = await open(apiKey, { question: 'Rotate the database password?' });
  assert.deepEqual([opened.approvers, opened.answeredBy, opened.escalation], [[], null, []]);

  const answered = await post<Decision>(apiKey, `/decisions/${opened.decisionId}`, { answer: true });
  assert.equal(answered.status, 200, JSON.stringify(answered.body));
  const { at, ...by } = answered.body.answeredBy ?? ({} as AnsweredBy);
  assert.deepEqual(by, { kind: 'key', id: keyId, displayName: keyId, channel: 'api' });
  assert.match(at, ISO);
  assert.equal(at, answered.body.answeredAt);
  assert.deepEqual((await get<Decision>(apiKey, `/decisions/${opened.decisionId}`)).body.answeredBy, answered.body.answeredBy);

  // (Its web push to the owner's approver devices, of which there are none, is recorded too, before or after the answer.)
  const entries = (await record(opened.decisionId)).filter((entry) => entry.kind !== 'delivered');
  assert.deepEqual(
    entries.map((entry) => [entry.kind, entry.actor]),
    [
      ['opened', { kind: 'key', id: keyId }],
      ['answered', { kind: 'key', id: keyId, displayName: keyId, channel: 'api' }],
    ],
  );
  assert.deepEqual(entries[1]?.detail, { answer: 'yes' });
});

test('named approvers: a key that is not one is refused (403), recorded as refused, and the decision stays pending; one that is answers', async () => {
  const workspace = await createWorkspace();
  const approver = await createKey(workspace.workspaceId, 'runtime');
  const other = await createKey(workspace.workspaceId, 'runtime');
  const opened = await open(other.apiKey, {
    question: 'Delete the staging cluster?',
    approvers: [
      { kind: 'key', id: approver.keyId },
      { kind: 'email', id: ' Ops@Example.COM ' },
    ],
  });
  // Stored normalized: addresses lower-cased and trimmed.
  assert.deepEqual(opened.approvers, [
    { kind: 'key', id: approver.keyId },
    { kind: 'email', id: 'ops@example.com' },
  ]);

  const refused = await post<Failure>(other.apiKey, `/decisions/${opened.decisionId}`, { answer: 'yes' });
  assert.equal(refused.status, 403);
  assert.deepEqual([refused.body.code, refused.body.message], ['forbidden', 'Only the approvers this decision names may answer it.']);
  assert.equal((await get<Decision>(other.apiKey, `/decisions/${opened.decisionId}`)).body.status, 'pending');

  // The link handed to the caller names nobody: its holder is no approver either.
  const token = opened.decisionPageUrl.slice(opened.decisionPageUrl.indexOf('/a/') + 3);
  const byLink = await call<Failure>(gateway(), `/api/v1/answer/${token}`, { method: 'POST', body: { answer: 'yes' } });
  assert.equal(byLink.status, 403);
  assert.equal(byLink.body.code, 'forbidden');
  const page = await fetch(`${gateway()}/a/${token}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'answer=yes' });
  assert.equal(page.status, 403);
  assert.match(await page.text(), /Only the approvers named for this question may answer it/);

  const answered = await post<Decision>(approver.apiKey, `/decisions/${opened.decisionId}`, { answer: 'no' });
  assert.equal(answered.status, 200, JSON.stringify(answered.body));
  assert.equal(answered.body.answer, 'no');
  assert.deepEqual({ ...answered.body.answeredBy, at: undefined }, { kind: 'key', id: approver.keyId, displayName: approver.keyId, channel: 'api', at: undefined });

  const entries = (await record(opened.decisionId)).filter((entry) => entry.kind !== 'delivered');
  assert.deepEqual(
    entries.map((entry) => [entry.kind, entry.actor?.kind, entry.actor?.id ?? null, entry.detail.reason ?? null]),
    [
      ['opened', 'key', other.keyId, null],
      ['refused', 'key', other.keyId, 'not an approver'],
      ['refused', 'link', '', 'not an approver'],
      ['refused', 'link', '', 'not an approver'],
      ['answered', 'key', approver.keyId, null],
    ],
  );
});

test('a subscriber approver gets its own push, whose link answers as that subscriber; the generic link does not', async () => {
  const audience = await seedAudience(harness, 2, 'growth', (index) => ({ externalId: `approver-${index}`, tags: [], verified: true }));
  const [alice, bob] = audience.subscribers;
  if (!alice || !bob) throw new Error('two subscribers expected');
  const key = audience.workspace.apiKey;
  const asked = await post<Ask & { liveUrl: string }>(key, '/ask', { question: 'Ship it?', wait: false, approvers: [{ kind: 'subscriber', id: alice.externalId }] });
  assert.equal(asked.status, 200, JSON.stringify(asked.body));

  const [pushed] = await eventually(
    'the question pushed to alice',
    async () => harness.peer.received(alice.endpoint).map((message) => harness.openPush(message).payload as unknown as Pushed),
    (messages) => messages.length === 1,
  );
  if (!pushed) throw new Error('no push');
  assert.equal(harness.peer.received(bob.endpoint).length, 0);
  // Her link is not the generic one: it names her.
  assert.notEqual(pushed.url, asked.body.liveUrl);

  const generic = asked.body.liveUrl.slice(asked.body.liveUrl.indexOf('/a/') + 3);
  assert.equal((await call<Failure>(gateway(), `/api/v1/answer/${generic}`, { method: 'POST', body: { answer: 'yes' } })).status, 403);
  // A forged recipient (her token's payload with another id) is no token at all.
  const hers = pushed.answerUrl.slice(pushed.answerUrl.lastIndexOf('/') + 1);
  const [id, , mac] = hers.split('.');
  const forged = `${id}.${Buffer.from(`subscriber:${bob.externalId}`).toString('base64url')}.${mac}`;
  assert.equal((await call<Failure>(gateway(), `/api/v1/answer/${forged}`, { method: 'POST', body: { answer: 'yes' } })).status, 404);

  const answered = await call<Ask>(gateway(), `/api/v1/answer/${hers}`, { method: 'POST', body: { answer: 'yes' } });
  assert.equal(answered.status, 200, JSON.stringify(answered.body));
  assert.deepEqual({ ...answered.body.answeredBy, at: undefined }, { kind: 'subscriber', id: alice.externalId, displayName: alice.externalId, channel: 'web_push', at: undefined });
  const read = await get<Ask>(key, `/ask/${asked.body.correlationId}`);
  assert.equal(read.body.value, 'yes');
  assert.deepEqual(read.body.answeredBy, answered.body.answeredBy);

  const entries = await record(asked.body.correlationId);
  assert.deepEqual(
    entries.map((entry) => entry.kind),
    ['opened', 'delivered', 'refused', 'answered'],
  );
  assert.deepEqual(entries[1]?.detail, { channel: 'web_push', target: `subscriber:${alice.externalId}`, result: 'delivered', reached: 1, ref: entries[1]?.detail.ref });
});

test('without approvers the answer page records its link holder', async () => {
  const workspace = await createWorkspace();
  const opened = await open(workspace.apiKey, { question: 'Restart the worker?' });
  const token = opened.decisionPageUrl.slice(opened.decisionPageUrl.indexOf('/a/') + 3);
  const answered = await call<Decision>(gateway(), `/api/v1/answer/${token}`, { method: 'POST', body: { answer: 'yes' } });
  assert.equal(answered.status, 200);
  assert.deepEqual({ ...answered.body.answeredBy, at: undefined }, { kind: 'link', id: '', displayName: 'the holder of the answer link', channel: 'answer_page', at: undefined });
});

test('approvers and escalation are checked at the edge and by the decision service', async () => {
  const workspace = await createWorkspace();
  const key = workspace.apiKey;
  const cases: Array<[Record<string, unknown>, string, RegExp]> = [
    [{ approvers: [{ kind: 'fax', id: '1' }] }, 'approvers', /./],
    [{ approvers: [{ kind: 'email', id: 'not-an-address' }] }, 'approvers', /is not an email address/],
    [{ approvers: Array.from({ length: 21 }, (_, index) => ({ kind: 'key', id: `k${index}` })) }, 'approvers', /./],
    [{ escalation: [{ afterSeconds: 60, channels: ['email'] }, { afterSeconds: 30, channels: ['slack'] }] }, 'escalation[1]', /later than the step before/],
    [{ escalation: [{ afterSeconds: 60 }] }, 'escalation[0]', /must name channels or approvers/],
    [{ escalation: [{ afterSeconds: 60, channels: ['pager'] }] }, 'escalation', /./],
  ];
  for (const [extra, field, problem] of cases) {
    const response = await post<Failure>(key, '/decisions', { question: 'Bad?', ...extra });
    assert.equal(response.status, 400, JSON.stringify(extra));
    assert.equal(response.body.code, 'invalid_request');
    const named = response.body.fields?.find((entry) => entry.field.startsWith(field) || entry.field.startsWith(`/${field}`) || entry.field.startsWith(`body.${field}`));
    assert.ok(named, `${JSON.stringify(response.body.fields)} names ${field}`);
    assert.match(named.problem, problem);
  }
  const escalation = [{ afterSeconds: 30, channels: ['email'], approvers: [{ kind: 'email', id: 'Lead@Example.com' }] }];
  const opened = await open(key, { question: 'Escalate?', escalation });
  assert.deepEqual(opened.escalation, [{ afterSeconds: 30, channels: ['email'], approvers: [{ kind: 'email', id: 'lead@example.com' }] }]);
});

test('an idempotent replay must name the same approvers', async () => {
  const workspace = await createWorkspace();
  const key = workspace.apiKey;
  const body = { question: 'Pay the invoice?', idempotencyKey: 'invoice-42', approvers: [{ kind: 'email', id: 'cfo@example.com' }] };
  const first = await open(key, body);
  const replay = await post<Decision & { duplicate: boolean }>(key, '/decisions', body);
  assert.equal(replay.status, 200);
  assert.equal(replay.body.decisionId, first.decisionId);
  assert.equal(replay.body.duplicate, true);
  const changed = await post<Failure>(key, '/decisions', { ...body, approvers: [{ kind: 'email', id: 'intern@example.com' }] });
  assert.equal(changed.status, 409);
  assert.deepEqual([changed.body.code, changed.body.message], ['conflict', 'This idempotency key was already used for a different decision.']);
});
