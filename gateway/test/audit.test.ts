import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';

import { questionEventHash } from '@herald/domain';
import { call, connectDatabase, createWorkspace, eventually, expireQuestion, repoRoot, requiredEnv, SERVER_API, seedAudience, startSendingHarness, type SendingHarness } from '@herald/testkit';

// A question's record (issue #24 part 5): GET /decisions/{id}/events and GET /ask/{id}/events show
// every entry, oldest first, each chained to the one before by its hash; an expiry is recorded once
// by the sweep; another workspace's question is 404; and the operator CLI recomputes a chain from
// the database and names the first entry that does not hold. Each test works in its own workspace;
// the tampering is done by SQL on that workspace's questions only.

let harness: SendingHarness;
before(async () => {
  harness = await startSendingHarness({ decisions: true, env: { EXPIRY_SWEEP_MS: '200' } });
});
after(() => harness.stop());

interface Event {
  seq: number;
  kind: string;
  at: string;
  actor: Record<string, string> | null;
  detail: Record<string, unknown>;
  prevHash: string;
  hash: string;
}
interface Page {
  data: Event[];
  hasMore: boolean;
  nextCursor: string | null;
}

const gateway = () => harness.stack.gatewayUrl;
const events = (key: string, path: string) => call<Page>(gateway(), `${SERVER_API}${path}`, { key });

/** The record through the API, checked to be one chain. */
async function chain(key: string, path: string): Promise<Event[]> {
  const response = await events(key, path);
  assert.equal(response.status, 200, JSON.stringify(response.body));
  let prev = '';
  for (const [index, event] of response.body.data.entries()) {
    assert.deepEqual([event.seq, event.prevHash], [index + 1, prev]);
    assert.match(event.hash, /^[0-9a-f]{64}$/);
    assert.match(event.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    prev = event.hash;
  }
  return response.body.data;
}

const run = promisify(execFile);

/** `npm run admin:decision -- chain verify --question <id>`: its exit code and what it printed. */
async function verify(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['services/decision/dist/src/admin.js', ...args], { cwd: repoRoot, env: { ...process.env, DATABASE_URL: requiredEnv('DATABASE_URL') } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const failure = err as { code: number; stdout: string; stderr: string };
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
}

/** Changes a stored entry behind the service's back (the table refuses UPDATE: its owner lifts that for one statement). */
async function tamper(sql: string, params: unknown[]): Promise<void> {
  const db = await connectDatabase();
  try {
    await db.query('BEGIN');
    await db.query('ALTER TABLE decision.question_events DISABLE TRIGGER question_events_append_only');
    await db.query(sql, params);
    await db.query('ALTER TABLE decision.question_events ENABLE TRIGGER question_events_append_only');
    await db.query('COMMIT');
  } catch (err) {
    await db.query('ROLLBACK');
    throw err;
  } finally {
    await db.end();
  }
}

test('a decision record: opened, delivered, refused, answered, in one chain; pages; 404 for another workspace; the CLI verifies it and names a tampered entry', async () => {
  const audience = await seedAudience(harness, 1, 'growth', () => ({ externalId: 'approver-1', tags: [], verified: true }));
  const key = audience.workspace.apiKey;
  const opened = await call<{ decisionId: string }>(gateway(), `${SERVER_API}/decisions`, {
    method: 'POST',
    key,
    body: { question: 'Ship it?', externalId: 'approver-1', approvers: [{ kind: 'subscriber', id: 'approver-1' }] },
  });
  assert.equal(opened.status, 200);
  const id = opened.body.decisionId;
  await eventually('the push delivered', () => chain(key, `/decisions/${id}/events`), (found) => found.some((event) => event.kind === 'delivered'));
  // The key is not among the approvers: refused, and recorded.
  const refused = await call<{ code: string }>(gateway(), `${SERVER_API}/decisions/${id}`, { method: 'POST', key, body: { answer: 'yes' } });
  assert.deepEqual([refused.status, refused.body.code], [403, 'forbidden']);
  // The approver answers through the link the push carried.
  const [pushed] = await eventually('the push received', async () => harness.peer.received(audience.subscribers[0]?.endpoint ?? '', { includeReplaced: true }), (messages) => messages.length === 1);
  assert.ok(pushed);
  const url = String(harness.openPush(pushed).payload.url);
  const token = url.slice(url.indexOf('/a/') + 3);
  const answered = await call<{ status: string }>(gateway(), `/api/v1/answer/${token}`, { method: 'POST', body: { answer: 'yes' } });
  assert.deepEqual([answered.status, answered.body.status], [200, 'answered']);

  const record = await chain(key, `/decisions/${id}/events`);
  assert.deepEqual(
    record.map((event) => event.kind),
    ['opened', 'delivered', 'refused', 'answered'],
  );
  const [, delivered, refusal, answer] = record;
  assert.deepEqual([delivered?.actor, delivered?.detail.channel, delivered?.detail.target, delivered?.detail.result], [null, 'web_push', 'subscriber:approver-1', 'delivered']);
  assert.deepEqual([refusal?.actor?.kind, refusal?.actor?.channel, refusal?.detail.answer], ['key', 'api', 'yes']);
  assert.deepEqual([answer?.actor?.kind, answer?.actor?.id, answer?.detail], ['subscriber', 'approver-1', { answer: 'yes' }]);

  // Pages of two: the cursor continues where the first ended.
  const first = await events(key, `/decisions/${id}/events?limit=2`);
  assert.deepEqual([first.status, first.body.data.map((event) => event.seq), first.body.hasMore], [200, [1, 2], true]);
  const second = await events(key, `/decisions/${id}/events?limit=2&cursor=${first.body.nextCursor ?? ''}`);
  assert.deepEqual([second.body.data.map((event) => event.seq), second.body.hasMore, second.body.nextCursor], [[3, 4], false, null]);
  const badCursor = await call<{ code: string; fields: unknown[] }>(gateway(), `${SERVER_API}/decisions/${id}/events?cursor=bm90LWEtY3Vyc29y`, { key });
  assert.deepEqual([badCursor.status, badCursor.body.code, badCursor.body.fields], [400, 'invalid_request', [{ field: 'cursor', in: 'querystring', problem: 'is not a cursor returned by this endpoint' }]]);

  // Another workspace, or the wrong kind of question: 404 alike.
  const stranger = await createWorkspace('growth');
  assert.equal((await events(stranger.apiKey, `/decisions/${id}/events`)).status, 404);
  assert.equal((await events(key, `/ask/${id}/events`)).status, 404);
  assert.equal((await events(key, `/decisions/dec_unknown/events`)).status, 404);

  const intact = await verify('chain', 'verify', '--question', id);
  assert.deepEqual([intact.code, JSON.parse(intact.stdout)], [0, { questionId: id, entries: 4, intact: true, head: answer?.hash }]);

  // An entry changed after the fact: the chain breaks there.
  await tamper(`UPDATE decision.question_events SET detail = '{"answer": "no", "reason": "not an approver"}' WHERE question_id = $1 AND seq = 3`, [id]);
  const changed = await verify('chain', 'verify', '--question', id);
  assert.deepEqual([changed.code, JSON.parse(changed.stdout)], [3, { questionId: id, entries: 4, intact: false, brokenAt: 3, problem: 'hash does not match the entry' }]);
  // An entry removed: the first missing seq.
  await tamper(`DELETE FROM decision.question_events WHERE question_id = $1 AND seq = 2`, [id]);
  const removed = await verify('chain', 'verify', '--question', id);
  assert.deepEqual([removed.code, JSON.parse(removed.stdout)], [3, { questionId: id, entries: 3, intact: false, brokenAt: 2, problem: 'missing' }]);
});

test('an entry rewritten with a correct hash of its own still breaks the chain: the entry after it names the old one', async () => {
  const workspace = await createWorkspace('growth');
  const opened = await call<{ decisionId: string }>(gateway(), `${SERVER_API}/decisions`, { method: 'POST', key: workspace.apiKey, body: { question: 'Rewrite me?', approvers: [{ kind: 'key', id: 'k_elsewhere' }] } });
  const id = opened.body.decisionId;
  assert.equal((await call(gateway(), `${SERVER_API}/decisions/${id}`, { method: 'DELETE', key: workspace.apiKey })).status, 200);
  const record = await chain(workspace.apiKey, `/decisions/${id}/events`);
  assert.deepEqual(
    record.map((event) => event.kind),
    ['opened', 'cancelled'],
  );
  // (A key approver is delivered nothing: the record holds no delivery.) Someone who knows the scheme rewrites the first entry and recomputes its hash.
  const [first] = record;
  assert.ok(first);
  const detail = { ...first.detail, question: 'Something else?' };
  const hash = questionEventHash('', { questionId: id, seq: 1, kind: first.kind, at: first.at, actor: first.actor, detail });
  await tamper(`UPDATE decision.question_events SET detail = $2, hash = $3 WHERE question_id = $1 AND seq = 1`, [id, JSON.stringify(detail), hash]);
  const broken = await verify('chain', 'verify', '--question', id);
  assert.deepEqual([broken.code, JSON.parse(broken.stdout)], [3, { questionId: id, entries: 2, intact: false, brokenAt: 2, problem: 'prevHash is not the hash of the entry before' }]);
});

test('the record refuses a changed or removed entry, even to the service role; a deleted question takes its whole record with it', async () => {
  const workspace = await createWorkspace('growth');
  const opened = await call<{ decisionId: string }>(gateway(), `${SERVER_API}/decisions`, { method: 'POST', key: workspace.apiKey, body: { question: 'Keep my record?', approvers: [{ kind: 'key', id: 'k_elsewhere' }] } });
  const id = opened.body.decisionId;
  assert.equal((await call(gateway(), `${SERVER_API}/decisions/${id}`, { method: 'DELETE', key: workspace.apiKey })).status, 200);
  const db = await connectDatabase();
  try {
    const entries = async () => (await db.query<{ seq: number }>('SELECT seq FROM decision.question_events WHERE question_id = $1 ORDER BY seq', [id])).rows;
    await assert.rejects(db.query(`UPDATE decision.question_events SET kind = 'answered' WHERE question_id = $1 AND seq = 2`, [id]), /question_events is append-only/);
    await assert.rejects(db.query('DELETE FROM decision.question_events WHERE question_id = $1 AND seq = 2', [id]), /question_events is append-only/);
    assert.deepEqual(await entries(), [{ seq: 1 }, { seq: 2 }]);
    // Erasing a workspace's data (or a benchmark's clean-up) deletes questions: their records go with them.
    assert.equal((await db.query('DELETE FROM decision.questions WHERE id = $1 AND workspace_id = $2', [id, workspace.workspaceId])).rowCount, 1);
    assert.deepEqual(await entries(), []);
  } finally {
    await db.end();
  }
});

test('an ask record: withdrawn is recorded cancelled; an expired question is recorded expired once by the sweep', async () => {
  const workspace = await createWorkspace('growth');
  const key = workspace.apiKey;
  const ask = (question: string) => call<{ correlationId: string }>(gateway(), `${SERVER_API}/ask`, { method: 'POST', key, body: { question, wait: false } });

  const withdrawn = await ask('Withdraw me?');
  assert.equal((await call(gateway(), `${SERVER_API}/ask/${withdrawn.body.correlationId}`, { method: 'DELETE', key })).status, 200);
  const withdrawnRecord = await chain(key, `/ask/${withdrawn.body.correlationId}/events`);
  assert.deepEqual(
    withdrawnRecord.filter((event) => event.kind !== 'delivered').map((event) => [event.kind, event.actor]),
    [
      // Opened by the key (pk_<key id>.<secret>).
      ['opened', { kind: 'key', id: key.slice('pk_'.length, key.indexOf('.')) }],
      ['cancelled', null],
    ],
  );

  const expiring = await ask('Let me expire?');
  const id = expiring.body.correlationId;
  await expireQuestion(id);
  const record = await eventually('the expiry recorded', () => chain(key, `/ask/${id}/events`), (found) => found.some((event) => event.kind === 'expired'));
  const expired = record.filter((event) => event.kind === 'expired');
  assert.equal(expired.length, 1);
  assert.equal(expired[0]?.actor, null);
  assert.match(String(expired[0]?.detail.expiresAt), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  // Swept once: the question is marked, so no later sweep records it again.
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<{ swept: boolean }>(`SELECT expiry_recorded_at IS NOT NULL AS swept FROM decision.questions WHERE id = $1`, [id]);
    assert.deepEqual(rows, [{ swept: true }]);
  } finally {
    await db.end();
  }
  assert.equal((await verify('chain', 'verify', '--question', id)).code, 0);
});

test('answers landing together: a workspace\'s decisions answered at once all take, and refusals racing on one question make one unbroken chain', async () => {
  const workspace = await createWorkspace('growth');
  const key = workspace.apiKey;
  const open = async (question: string, approver: string): Promise<string> => {
    const opened = await call<{ decisionId: string }>(gateway(), `${SERVER_API}/decisions`, { method: 'POST', key, body: { question, approvers: [{ kind: 'key', id: approver }] } });
    assert.equal(opened.status, 200, JSON.stringify(opened.body));
    return opened.body.decisionId;
  };
  const answer = (id: string) => call<{ status: string; code: string }>(gateway(), `${SERVER_API}/decisions/${id}`, { method: 'POST', key, body: { answer: 'yes' } });

  // Twelve questions of one workspace, each answered by its approver (the key), all at once.
  const ids: string[] = [];
  for (let index = 0; index < 12; index += 1) ids.push(await open(`Ship part ${index}?`, workspace.keyId));
  const answers = await Promise.all(ids.map(answer));
  assert.deepEqual(
    answers.map((answered) => [answered.status, answered.body.status]),
    ids.map(() => [200, 'answered']),
  );
  for (const id of ids) {
    assert.deepEqual(
      (await chain(key, `/decisions/${id}/events`)).map((event) => event.kind),
      ['opened', 'answered'],
    );
  }

  // Ten refused attempts on one question at once: each appended after the one before, no fork, no gap.
  const raced = await open('Race me?', 'k_elsewhere');
  const refusals = await Promise.all(Array.from({ length: 10 }, () => answer(raced)));
  assert.deepEqual(
    refusals.map((refused) => [refused.status, refused.body.code]),
    refusals.map(() => [403, 'forbidden']),
  );
  const record = await chain(key, `/decisions/${raced}/events`);
  assert.deepEqual(
    record.map((event) => event.kind),
    ['opened', ...Array.from({ length: 10 }, () => 'refused')],
  );
  const intact = await verify('chain', 'verify', '--question', raced);
  assert.deepEqual([intact.code, JSON.parse(intact.stdout)], [0, { questionId: raced, entries: 11, intact: true, head: record.at(-1)?.hash }]);
});

test('the CLI: usage errors exit 2, an unknown question exits 1', async () => {
  const missing = await verify('chain', 'verify');
  assert.equal(missing.code, 2);
  assert.deepEqual(JSON.parse(missing.stderr.split('\n')[0] ?? ''), { error: '--question is required' });
  const unknown = await verify('chain', 'check', '--question', 'dec_x');
  assert.equal(unknown.code, 2);
  assert.deepEqual(JSON.parse(unknown.stderr.split('\n')[0] ?? ''), { error: 'unknown command "chain check"' });
  const absent = await verify('chain', 'verify', '--question', 'dec_absent');
  assert.equal(absent.code, 1);
  assert.deepEqual(JSON.parse(absent.stderr), { error: 'No question dec_absent.', code: 'not_found' });
});
