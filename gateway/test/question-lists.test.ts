import assert from 'node:assert/strict';
import { test } from 'node:test';

import { call, connectDatabase, createKey, createWorkspace, SERVER_API } from '@herald/testkit';

import { questionStack } from './waiting.js';

// GET /decisions and GET /ask: a workspace's questions of one kind, newest first, page by page,
// narrowed by state (status=pending is an approver's inbox, and what a second person polls to
// answer). Each test works in its own workspace.

const running = questionStack();

interface Page<T> {
  data: T[];
  hasMore: boolean;
  nextCursor: string | null;
}
interface Decision {
  decisionId: string;
  status: string;
  question: string;
  externalId: string | null;
}
interface Ask {
  correlationId: string;
  status: string;
  question: string;
  liveUrl: string;
}
type Failure = { code: string; fields?: Array<{ field: string }> };

const get = <T>(key: string, path: string) => call<T>(running.stack.gatewayUrl, `${SERVER_API}${path}`, { key });
const post = <T>(key: string, path: string, body: unknown) => call<T>(running.stack.gatewayUrl, `${SERVER_API}${path}`, { method: 'POST', key, body });

async function decision(key: string, question: string, extra: Record<string, unknown> = {}): Promise<string> {
  const response = await post<Decision>(key, '/decisions', { question, ...extra });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body.decisionId;
}

test('GET /decisions lists newest first, narrowed by status, page by page; another workspace sees none of them', async () => {
  const workspace = await createWorkspace('growth');
  const key = workspace.apiKey;
  const first = await decision(key, 'First?');
  const second = await decision(key, 'Second?');
  const third = await decision(key, 'Third?');
  const fourth = await decision(key, 'Fourth?');
  assert.equal((await post(key, `/decisions/${second}`, { answer: 'yes' })).status, 200);
  assert.equal((await call(running.stack.gatewayUrl, `${SERVER_API}/decisions/${third}`, { method: 'DELETE', key })).status, 200);
  // The first one's lifetime runs out: it reads as expired, never pending.
  const db = await connectDatabase();
  try {
    await db.query(`UPDATE decision.questions SET expires_at = now() - interval '1 second' WHERE id = $1`, [first]);
  } finally {
    await db.end();
  }

  const all = await get<Page<Decision>>(key, '/decisions');
  assert.equal(all.status, 200);
  assert.deepEqual(
    all.body.data.map((item) => [item.decisionId, item.status]),
    [
      [fourth, 'pending'],
      [third, 'cancelled'],
      [second, 'answered'],
      [first, 'expired'],
    ],
  );
  assert.deepEqual([all.body.hasMore, all.body.nextCursor], [false, null]);
  for (const [status, id] of [
    ['pending', fourth],
    ['cancelled', third],
    ['answered', second],
    ['expired', first],
  ] as const) {
    const narrowed = await get<Page<Decision>>(key, `/decisions?status=${status}`);
    assert.deepEqual(narrowed.body.data.map((item) => item.decisionId), [id], status);
  }

  // Two at a time: the cursor takes up where the page ended, and the last page says so.
  const page1 = await get<Page<Decision>>(key, '/decisions?limit=2');
  assert.deepEqual([page1.body.data.map((item) => item.decisionId), page1.body.hasMore], [[fourth, third], true]);
  const page2 = await get<Page<Decision>>(key, `/decisions?limit=2&cursor=${page1.body.nextCursor}`);
  assert.deepEqual([page2.body.data.map((item) => item.decisionId), page2.body.hasMore, page2.body.nextCursor], [[second, first], false, null]);

  const other = await createWorkspace('growth');
  const theirs = await get<Page<Decision>>(other.apiKey, '/decisions');
  assert.deepEqual([theirs.status, theirs.body.data], [200, []]);
});

test('a bound key lists only its own end-user’s decisions', async () => {
  const workspace = await createWorkspace('partner');
  const alice = (await createKey(workspace.workspaceId, 'bound', '--external-id', 'alice')).apiKey;
  const own = await decision(alice, 'Book the flight?');
  const forBob = await decision(workspace.apiKey, 'Book the hotel?', { externalId: 'bob' });
  assert.deepEqual((await get<Page<Decision>>(alice, '/decisions?status=pending')).body.data.map((item) => item.decisionId), [own]);
  assert.deepEqual((await get<Page<Decision>>(workspace.apiKey, '/decisions?status=pending')).body.data.map((item) => item.decisionId), [forBob, own]);
});

test('GET /ask lists asks with their answer links, in the /ask words for states (withdrawn, timeout); a second person answers what it lists', async () => {
  const workspace = await createWorkspace('growth');
  const key = workspace.apiKey;
  const asked = async (question: string) => {
    const response = await post<Ask>(key, '/ask', { question, wait: false });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    return response.body;
  };
  const kept = await asked('Ship it?');
  const withdrawn = await asked('Roll back?');
  assert.equal((await call(running.stack.gatewayUrl, `${SERVER_API}/ask/${withdrawn.correlationId}`, { method: 'DELETE', key })).status, 200);

  const pending = await get<Page<Ask>>(key, '/ask?status=pending');
  assert.deepEqual(pending.body.data.map((item) => [item.correlationId, item.status, item.liveUrl]), [[kept.correlationId, 'pending', kept.liveUrl]]);
  assert.deepEqual((await get<Page<Ask>>(key, '/ask?status=withdrawn')).body.data.map((item) => item.correlationId), [withdrawn.correlationId]);
  // Someone else, holding only the list, answers through the link it gives.
  const token = kept.liveUrl.slice(kept.liveUrl.indexOf('/a/') + 3);
  const answered = await call<Ask>(running.stack.gatewayUrl, `/api/v1/answer/${token}`, { method: 'POST', body: { answer: 'yes' } });
  assert.equal(answered.status, 200, JSON.stringify(answered.body));
  assert.deepEqual((await get<Page<Ask>>(key, '/ask?status=pending')).body.data, []);
  assert.deepEqual((await get<Page<Ask>>(key, '/ask?status=answered')).body.data.map((item) => item.correlationId), [kept.correlationId]);
});

test('bad list requests: an unknown status or a forged cursor is a 400 naming it; a Partner workspace has no asks to list (403)', async () => {
  const workspace = await createWorkspace('growth');
  for (const [path, field] of [
    ['/decisions?status=approved', 'status'],
    ['/ask?status=expired', 'status'],
    ['/decisions?limit=0', 'limit'],
    ['/decisions?limit=101', 'limit'],
    ['/decisions?cursor=bm90LWEtY3Vyc29y', 'cursor'],
    ['/ask?cursor=bm90LWEtY3Vyc29y', 'cursor'],
  ] as const) {
    const response = await get<Failure>(workspace.apiKey, path);
    assert.deepEqual([response.status, response.body.code], [400, 'invalid_request'], path);
    assert.ok(response.body.fields?.some((problem) => problem.field === field), `${path}: ${JSON.stringify(response.body)}`);
  }
  const partner = await createWorkspace('partner');
  const refused = await get<Failure>(partner.apiKey, '/ask');
  assert.deepEqual([refused.status, refused.body.code], [403, 'partner_decision_required']);
});
