import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { call, connectDatabase, createKey, createWorkspace, externalIdProof as proofOf, identitySecret, pushSubscription, SERVER_API, type TestWorkspace } from '@herald/testkit';

import { questionStack } from './waiting.js';

// /decisions, GET /reachability and the answer page (/a/<token>), end to end: two gateway
// replicas, the decision, account and audience services, PostgreSQL and Redis.

const running = questionStack();
const { subscribers } = running;

interface Decision {
  decisionId: string;
  status: string;
  approved: boolean;
  answer: string | null;
  question: string;
  type: string;
  options: string[];
  context: string | null;
  placeholder: string | null;
  agentName: string | null;
  audience: string;
  externalId: string | null;
  toolName: string | null;
  toolTarget: string | null;
  parameters: Record<string, unknown> | null;
  mode: string;
  pollUrl: string;
  decisionPageUrl: string;
  expiresInSeconds: number;
  expiresAt: string;
  createdAt: string;
  answeredAt: string | null;
  answeredBy: { kind: string; id: string; displayName: string; channel: string; at: string } | null;
  cancelledAt: string | null;
  reachability: { reachable: boolean; browserSubscriptions: number; nativeAppDevices: number };
  idempotencyKey: string | null;
  duplicate: boolean;
}
type Body = Decision & { code?: string; message?: string; fields?: unknown };

const open = (key: string, body: unknown, headers: Record<string, string> = {}, url = running.stack.gatewayUrl) =>
  call<Body>(url, `${SERVER_API}/decisions`, { method: 'POST', key, body, headers });
const read = (key: string, id: string, wait = false, url = running.stack.gatewayUrl) => call<Body>(url, `${SERVER_API}/decisions/${id}${wait ? '?wait=true' : ''}`, { key });
const answer = (key: string, id: string, value: unknown, url = running.stack.gatewayUrl) =>
  call<Body>(url, `${SERVER_API}/decisions/${id}`, { method: 'POST', key, body: { answer: value } });
const cancel = (key: string, id: string) => call<Body>(running.stack.gatewayUrl, `${SERVER_API}/decisions/${id}`, { method: 'DELETE', key });

async function opened(key: string, body: Record<string, unknown> = {}): Promise<Decision> {
  const response = await open(key, { question: 'Deploy to production?', ...body });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body;
}

/** Moves a decision's expiry into the past, as if its lifetime had run out. */
async function expire(id: string): Promise<void> {
  const db = await connectDatabase();
  try {
    await db.query(`UPDATE decision.questions SET expires_at = now() - interval '1 second', created_at = now() - interval '2 seconds' WHERE id = $1`, [id]);
  } finally {
    await db.end();
  }
}

/** A browser of `externalId` with its identity-verification proof: an approver device. */
async function subscribe(workspace: TestWorkspace, externalId: string): Promise<void> {
  const subscription = pushSubscription('https://fcm.googleapis.com/fcm/send');
  const externalIdProof = proofOf(await identitySecret(running.stack.gatewayUrl, workspace), externalId);
  const response = await call(running.stack.gatewayUrl, '/api/v1/subscribe', {
    method: 'POST',
    key: workspace.siteKey,
    headers: { origin: 'https://example.test' },
    body: { ...subscription, externalId, externalIdProof },
  });
  assert.equal(response.status, 201, JSON.stringify(response.body));
}

test('validation: every bad field is a 400 naming it', async () => {
  const { apiKey } = await createWorkspace();
  const invalid = async (body: unknown, fields: { field: string; problem: string }[], headers: Record<string, string> = {}) => {
    const response = await open(apiKey, body, headers);
    assert.equal(response.status, 400, JSON.stringify(response.body));
    assert.equal(response.body.code, 'invalid_request');
    assert.deepEqual(
      response.body.fields,
      fields.map((field) => ({ ...field, in: 'body' })),
    );
  };
  const q = { question: 'Sure?' };
  await invalid({}, [{ field: 'question', problem: 'is required' }]);
  await invalid({ ...q, audience: 'user' }, [{ field: 'audience', problem: 'user needs an externalId' }]);
  await invalid({ ...q, externalId: 'u1', audience: 'team' }, [{ field: 'audience', problem: 'must be user when an externalId is given' }]);
  await invalid({ ...q, expiresInSeconds: 59 }, [{ field: 'expiresInSeconds', problem: 'must be >= 60' }]);
  await invalid({ ...q, expiresInSeconds: 86_401 }, [{ field: 'expiresInSeconds', problem: 'must be <= 86400' }]);
  await invalid({ ...q, timeoutSeconds: 56 }, [{ field: 'timeoutSeconds', problem: 'must be <= 55' }]);
  await invalid({ ...q, type: 'select', options: ['a', 'a'] }, [{ field: 'options', problem: 'must NOT have duplicate items (items ## 1 and 0 are identical)' }]);
  await invalid({ ...q, type: 'select' }, [{ field: 'options', problem: 'is required for a select question' }]);
  await invalid({ ...q, idempotencyKey: 'k'.repeat(201) }, [{ field: 'idempotencyKey', problem: 'must NOT have more than 200 characters' }]);
  await invalid({ ...q, idempotencyKey: 'a' }, [{ field: 'idempotencyKey', problem: 'must match the Idempotency-Key header' }], { 'idempotency-key': 'b' });
  await invalid({ ...q, toolName: '' }, [{ field: 'toolName', problem: 'must NOT have fewer than 1 characters' }]);
  await invalid({ ...q, parameters: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`p${i}`, i])) }, [
    { field: 'parameters', problem: 'must NOT have more than 32 properties' },
  ]);
  await invalid({ ...q, callbackUrl: 'ftp://example.com' }, [{ field: 'callbackUrl', problem: 'must use https' }]);
  await invalid({ ...q, requireReachable: 'yes' }, [{ field: 'requireReachable', problem: 'must be boolean' }]);
  // A nested parameter value is refused.
  const nested = await open(apiKey, { ...q, parameters: { amount: { value: 1 } } });
  assert.equal(nested.status, 400);
  assert.ok((nested.body.fields as { field: string }[]).every((field) => field.field === 'parameters.amount'));
  const header = await open(apiKey, q, { 'idempotency-key': 'k'.repeat(201) });
  assert.equal(header.status, 400);
  assert.deepEqual(header.body.fields, [{ field: 'idempotency-key', in: 'headers', problem: 'must NOT have more than 200 characters' }]);

  const decision = await opened(apiKey);
  const badAnswer = await call<Body>(running.stack.gatewayUrl, `${SERVER_API}/decisions/${decision.decisionId}`, { method: 'POST', key: apiKey, body: {} });
  assert.deepEqual([badAnswer.status, badAnswer.body.fields], [400, [{ field: 'answer', in: 'body', problem: 'is required' }]]);
  const badWait = await call<Body>(running.stack.gatewayUrl, `${SERVER_API}/decisions/${decision.decisionId}?wait=soon`, { key: apiKey });
  assert.equal(badWait.status, 400);
});

test('POST /decisions opens a pending decision (defaults); GET reads it; other workspaces see 404', async () => {
  const { apiKey } = await createWorkspace();
  const response = await open(apiKey, {
    question: 'Refund order 1234?',
    context: 'Customer asked twice.',
    agentName: 'support-bot',
    toolName: 'refund',
    toolTarget: 'order/1234',
    parameters: { amount: 40.5, currency: 'EUR', partial: false, note: null },
  });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  const decision = response.body;
  const id = decision.decisionId;
  assert.match(id, /^dec_[0-9a-f]{32}$/);
  assert.match(decision.decisionPageUrl, new RegExp(`^http://localhost:8080/a/${id}\\.[A-Za-z0-9_-]{43}$`));
  assert.equal(Date.parse(decision.expiresAt) - Date.parse(decision.createdAt), 3_600_000);
  assert.deepEqual(decision, {
    decisionId: id,
    status: 'pending',
    approved: false,
    answer: null,
    question: 'Refund order 1234?',
    type: 'confirm',
    options: [],
    context: 'Customer asked twice.',
    placeholder: null,
    agentName: 'support-bot',
    audience: 'owner',
    externalId: 'owner',
    toolName: 'refund',
    toolTarget: 'order/1234',
    parameters: { amount: 40.5, currency: 'EUR', partial: false, note: null },
    mode: 'browser',
    pollUrl: `http://localhost:8080/api/v1/server/decisions/${id}`,
    decisionPageUrl: decision.decisionPageUrl,
    expiresInSeconds: 3_600,
    expiresAt: decision.expiresAt,
    createdAt: decision.createdAt,
    answeredAt: null,
    cancelledAt: null,
    reachability: { reachable: false, browserSubscriptions: 0, nativeAppDevices: 0 },
    idempotencyKey: null,
    approvers: [],
    answeredBy: null,
    escalation: [],
    duplicate: false,
  });
  const again = await read(apiKey, id);
  assert.equal(again.status, 200);
  assert.deepEqual({ ...again.body, expiresInSeconds: 3_600 }, decision);

  const team = await opened(apiKey, { audience: 'team', expiresInSeconds: 60 });
  assert.deepEqual({ audience: team.audience, externalId: team.externalId, expiresInSeconds: team.expiresInSeconds }, { audience: 'team', externalId: null, expiresInSeconds: 60 });

  const other = await createWorkspace();
  assert.equal((await read(other.apiKey, id)).status, 404);
  assert.equal((await answer(other.apiKey, id, 'yes')).status, 404);
  assert.equal((await cancel(other.apiKey, id)).status, 404);
  assert.equal((await call(running.stack.gatewayUrl, `${SERVER_API}/ask/${id}`, { key: apiKey })).status, 404);
  assert.equal((await read(apiKey, id)).body.status, 'pending');
});

test('approved is true only for a yes to a confirm decision; pending, cancelled and expired are never approved', async () => {
  const { apiKey } = await createWorkspace();
  const state = (decision: Decision) => ({ status: decision.status, approved: decision.approved, answer: decision.answer });

  const pending = await opened(apiKey);
  assert.deepEqual(state(pending), { status: 'pending', approved: false, answer: null });

  for (const [given, stored, approved] of [
    ['yes', 'yes', true],
    [true, 'yes', true],
    ['no', 'no', false],
    [false, 'no', false],
  ] as const) {
    const decision = await opened(apiKey);
    const answered = await answer(apiKey, decision.decisionId, given);
    assert.equal(answered.status, 200, JSON.stringify(answered.body));
    assert.deepEqual(state(answered.body), { status: 'answered', approved, answer: stored });
    assert.ok(answered.body.answeredAt !== null);
    assert.deepEqual(state((await read(apiKey, decision.decisionId)).body), { status: 'answered', approved, answer: stored });
  }

  const select = await opened(apiKey, { type: 'select', options: ['approve', 'deny'] });
  assert.deepEqual(state((await answer(apiKey, select.decisionId, 'approve')).body), { status: 'answered', approved: false, answer: 'approve' });
  const input = await opened(apiKey, { type: 'input', placeholder: 'Reason' });
  assert.deepEqual(state((await answer(apiKey, input.decisionId, 'yes')).body), { status: 'answered', approved: false, answer: 'yes' });

  const cancelled = await opened(apiKey);
  const cancelResult = await cancel(apiKey, cancelled.decisionId);
  assert.equal(cancelResult.status, 200);
  assert.deepEqual(state(cancelResult.body), { status: 'cancelled', approved: false, answer: null });
  assert.ok(cancelResult.body.cancelledAt !== null);

  const expired = await opened(apiKey);
  await expire(expired.decisionId);
  const afterExpiry = await read(apiKey, expired.decisionId);
  assert.deepEqual(state(afterExpiry.body), { status: 'expired', approved: false, answer: null });
  assert.equal(afterExpiry.body.expiresInSeconds, 0);
});

test('answers: first wins, a later one is 409 but the same one again from its giver is 200; cancelled and expired ones take none; answers must fit', async () => {
  const { workspaceId, apiKey } = await createWorkspace();
  const decision = await opened(apiKey);
  const results = await Promise.all([answer(apiKey, decision.decisionId, 'yes', running.stack.gatewayUrls[0]), answer(apiKey, decision.decisionId, 'no', running.stack.gatewayUrls[1])]);
  assert.deepEqual(results.map((result) => result.status).sort(), [200, 409]);
  const won = results.find((result) => result.status === 200)?.body;
  const winner = won?.answer;
  const loser = winner === 'yes' ? 'no' : 'yes';
  const later = await answer(apiKey, decision.decisionId, loser);
  assert.deepEqual([later.status, later.body.code, later.body.message], [409, 'conflict', 'This decision was already answered.']);
  // The winning answer again from the same key (a retry whose reply was lost) returns the record as it was answered.
  const retried = await answer(apiKey, decision.decisionId, winner === 'yes', running.stack.gatewayUrls[1]);
  assert.equal(retried.status, 200, JSON.stringify(retried.body));
  assert.deepEqual([retried.body.answer, retried.body.answeredBy], [winner, won?.answeredBy]);
  // The same answer from another key is not a retry: the first answer stands.
  const otherKey = (await createKey(workspaceId, 'runtime')).apiKey;
  const fromOther = await answer(otherKey, decision.decisionId, winner);
  assert.deepEqual([fromOther.status, fromOther.body.message], [409, 'This decision was already answered.']);
  assert.equal((await read(apiKey, decision.decisionId)).body.answer, winner);
  const cancelAnswered = await cancel(apiKey, decision.decisionId);
  assert.deepEqual([cancelAnswered.status, cancelAnswered.body.message], [409, 'This decision was already answered.']);

  const cancelled = await opened(apiKey);
  assert.equal((await cancel(apiKey, cancelled.decisionId)).status, 200);
  const twice = await cancel(apiKey, cancelled.decisionId);
  assert.deepEqual([twice.status, twice.body.message], [409, 'This decision was cancelled.']);
  const afterCancel = await answer(apiKey, cancelled.decisionId, 'yes');
  assert.deepEqual([afterCancel.status, afterCancel.body.message], [409, 'This decision was cancelled.']);

  const expired = await opened(apiKey);
  await expire(expired.decisionId);
  const late = await answer(apiKey, expired.decisionId, 'yes');
  assert.equal(late.status, 409);
  assert.match(late.body.message ?? '', /^This decision expired unanswered at \d{4}-\d\d-\d\dT/);
  assert.equal((await cancel(apiKey, expired.decisionId)).status, 409);
  assert.equal((await read(apiKey, expired.decisionId)).body.approved, false);

  const select = await opened(apiKey, { type: 'select', options: ['blue', 'green'] });
  const wrong = await answer(apiKey, select.decisionId, 'red');
  assert.deepEqual([wrong.status, wrong.body.fields], [400, [{ field: 'answer', in: 'body', problem: 'must be one of the options: "blue", "green"' }]]);
  const confirm = await opened(apiKey);
  assert.equal((await answer(apiKey, confirm.decisionId, 'maybe')).status, 400);
  const input = await opened(apiKey, { type: 'input' });
  const tooLong = await answer(apiKey, input.decisionId, 'x'.repeat(2_001));
  assert.equal(tooLong.status, 400);
  assert.equal((await read(apiKey, input.decisionId)).body.status, 'pending');
});

test('waiting: wait=true with no answer returns pending; GET ?wait=true is woken by an answer through another gateway, or by a cancel', async () => {
  const { apiKey } = await createWorkspace();
  const started = Date.now();
  const timedOut = await open(apiKey, { question: 'Quick?', wait: true, timeoutSeconds: 1 });
  assert.ok(Date.now() - started >= 1_000);
  assert.deepEqual([timedOut.status, timedOut.body.status, timedOut.body.approved], [200, 'pending', false]);

  const waiting = read(apiKey, timedOut.body.decisionId, true, running.stack.gatewayUrls[0]);
  while ((await subscribers(timedOut.body.decisionId)) === 0) await sleep(10);
  const answeredAt = Date.now();
  assert.equal((await answer(apiKey, timedOut.body.decisionId, 'yes', running.stack.gatewayUrls[1])).status, 200);
  const woken = await waiting;
  assert.ok(Date.now() - answeredAt < 1_000);
  assert.deepEqual([woken.body.status, woken.body.approved], ['answered', true]);

  const other = await opened(apiKey);
  const waitingForCancel = read(apiKey, other.decisionId, true, running.stack.gatewayUrls[1]);
  while ((await subscribers(other.decisionId)) === 0) await sleep(10);
  assert.equal((await cancel(apiKey, other.decisionId)).status, 200);
  assert.deepEqual([(await waitingForCancel).body.status, (await waitingForCancel).body.approved], ['cancelled', false]);

  // A decision already resolved answers a wait at once.
  const quick = Date.now();
  assert.equal((await read(apiKey, other.decisionId, true)).body.status, 'cancelled');
  assert.ok(Date.now() - quick < 1_000);
});

test('idempotent replay returns the same decision; a different body with the key is 409', async () => {
  const { apiKey } = await createWorkspace();
  const body = { question: 'Rotate the keys?', idempotencyKey: 'rotate-2026-11' };
  const first = await opened(apiKey, body);
  assert.equal(first.idempotencyKey, 'rotate-2026-11');
  const replay = await open(apiKey, body);
  assert.equal(replay.status, 200);
  assert.deepEqual({ ...replay.body, expiresInSeconds: first.expiresInSeconds }, { ...first, duplicate: true });
  // The header names the same key; how the call waits is not part of the request's identity.
  const viaHeader = await open(apiKey, { question: 'Rotate the keys?', wait: true, timeoutSeconds: 1 }, { 'idempotency-key': 'rotate-2026-11' });
  assert.deepEqual([viaHeader.status, viaHeader.body.decisionId, viaHeader.body.duplicate], [200, first.decisionId, true]);
  const different = await open(apiKey, { ...body, question: 'Rotate all the keys?' });
  assert.deepEqual([different.status, different.body.code, different.body.message], [409, 'conflict', 'This idempotency key was already used for a different decision.']);
  // Keys are per workspace.
  const other = await createWorkspace();
  const elsewhere = await open(other.apiKey, body);
  assert.equal(elsewhere.status, 200);
  assert.notEqual(elsewhere.body.decisionId, first.decisionId);
  // A replay of an answered decision returns it as it stands.
  assert.equal((await answer(apiKey, first.decisionId, 'no')).status, 200);
  const answeredReplay = await open(apiKey, body);
  assert.deepEqual([answeredReplay.body.status, answeredReplay.body.approved, answeredReplay.body.duplicate], ['answered', false, true]);
});

test('reachability: GET /reachability and requireReachable (409 when nobody can be reached)', async () => {
  const workspace = await createWorkspace();
  const key = workspace.apiKey;
  const reach = (query: string) => call<Record<string, unknown>>(running.stack.gatewayUrl, `${SERVER_API}/reachability${query}`, { key });
  assert.deepEqual((await reach('?externalId=user-7')).body, { externalId: 'user-7', reachable: false, browserSubscriptions: 0, nativeAppDevices: 0, channels: [] });

  const refused = await open(key, { question: 'Sure?', externalId: 'user-7', requireReachable: true });
  assert.deepEqual([refused.status, refused.body.code, refused.body.message], [
    409,
    'conflict',
    'The addressed person has no live channel (no paired app, no active browser subscription).',
  ]);
  // Without requireReachable the decision opens anyway and says who can be reached.
  const unreachable = await opened(key, { externalId: 'user-7' });
  assert.deepEqual([unreachable.audience, unreachable.externalId, unreachable.reachability], ['user', 'user-7', { reachable: false, browserSubscriptions: 0, nativeAppDevices: 0 }]);

  await subscribe(workspace, 'user-7');
  assert.deepEqual((await reach('?externalId=user-7')).body, { externalId: 'user-7', reachable: true, browserSubscriptions: 1, nativeAppDevices: 0, channels: ['browser'] });
  assert.deepEqual((await reach('')).body, { externalId: 'owner', reachable: false, browserSubscriptions: 0, nativeAppDevices: 0, channels: [] });
  const reachable = await opened(key, { externalId: 'user-7', requireReachable: true });
  assert.deepEqual(reachable.reachability, { reachable: true, browserSubscriptions: 1, nativeAppDevices: 0 });
  const team = await opened(key, { audience: 'team', requireReachable: true });
  assert.deepEqual(team.reachability, { reachable: true, browserSubscriptions: 1, nativeAppDevices: 0 });
  assert.equal((await open(key, { question: 'Owner?', requireReachable: true })).status, 409);
  assert.equal((await reach('?externalId=')).status, 400);
});

test('a bound key creates, reads, answers and cancels only its own end-user’s decisions', async () => {
  const workspace = await createWorkspace('partner');
  const alice = (await createKey(workspace.workspaceId, 'bound', '--external-id', 'alice')).apiKey;
  const bob = (await createKey(workspace.workspaceId, 'bound', '--external-id', 'bob')).apiKey;

  const own = await opened(alice, { question: 'Book the flight?' });
  assert.deepEqual([own.audience, own.externalId], ['user', 'alice']);
  const forOther = await open(alice, { question: 'Sure?', externalId: 'bob' });
  assert.deepEqual([forOther.status, forOther.body.code], [403, 'forbidden']);
  assert.equal((await open(alice, { question: 'Sure?', externalId: 'alice' })).status, 200);

  assert.equal((await read(bob, own.decisionId)).status, 404);
  assert.equal((await answer(bob, own.decisionId, 'yes')).status, 404);
  assert.equal((await cancel(bob, own.decisionId)).status, 404);
  // The workspace's dashboard key sees every decision.
  assert.equal((await read(workspace.apiKey, own.decisionId)).status, 200);
  const forBob = await opened(workspace.apiKey, { externalId: 'bob' });
  assert.equal((await read(alice, forBob.decisionId)).status, 404);
  assert.equal((await read(bob, forBob.decisionId)).status, 200);
  const owners = await opened(workspace.apiKey);
  assert.equal((await read(alice, owners.decisionId)).status, 404);

  assert.deepEqual([(await answer(alice, own.decisionId, true)).body.approved], [true]);
  assert.equal((await cancel(bob, forBob.decisionId)).body.status, 'cancelled');
  const reach = await call<Record<string, unknown>>(running.stack.gatewayUrl, `${SERVER_API}/reachability?externalId=bob`, { key: alice });
  assert.equal(reach.status, 403);
  assert.equal((await call<Record<string, unknown>>(running.stack.gatewayUrl, `${SERVER_API}/reachability`, { key: alice })).body.externalId, 'alice');
  // Bound keys cannot use /ask.
  assert.equal((await call(running.stack.gatewayUrl, `${SERVER_API}/ask`, { method: 'POST', key: alice, body: { question: 'Sure?' } })).status, 403);
});

test('runtime keys may open decisions on any plan; connector keys may not', async () => {
  const workspace = await createWorkspace('free');
  const runtime = (await createKey(workspace.workspaceId, 'runtime')).apiKey;
  const connector = (await createKey(workspace.workspaceId, 'connector')).apiKey;
  assert.equal((await open(runtime, { question: 'Sure?' })).status, 200);
  const refused = await open(connector, { question: 'Sure?' });
  assert.deepEqual([refused.status, refused.body.code, refused.body.message], [403, 'forbidden', 'This key cannot access this endpoint']);
});

// The answer page.

const pageOf = (url: string) => `${running.stack.gatewayUrl}${new URL(url).pathname}`;
const getPage = async (url: string) => {
  const response = await fetch(pageOf(url));
  return { status: response.status, type: response.headers.get('content-type'), headers: response.headers, html: await response.text() };
};
const postForm = async (url: string, form: Record<string, string>) => {
  const response = await fetch(pageOf(url), { method: 'POST', body: new URLSearchParams(form) });
  return { status: response.status, html: await response.text() };
};

test('the answer page renders each kind of question, escaped, as a plain form, and records a form post', async () => {
  const { apiKey } = await createWorkspace();
  const confirm = await opened(apiKey, { question: 'Delete <script>alert(1)</script>?', context: 'Rows: "all" & more', agentName: 'ops<bot>' });
  const page = await getPage(confirm.decisionPageUrl);
  assert.equal(page.status, 200);
  assert.equal(page.type, 'text/html; charset=utf-8');
  assert.equal(page.headers.get('cache-control'), 'no-store');
  assert.equal(page.headers.get('referrer-policy'), 'no-referrer');
  assert.match(page.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
  assert.ok(!page.html.includes('<script>'));
  assert.ok(page.html.includes('<h1>Delete &lt;script&gt;alert(1)&lt;/script&gt;?</h1>'));
  assert.ok(page.html.includes('<p class="context">Rows: &quot;all&quot; &amp; more</p>'));
  assert.ok(page.html.includes('<p class="who">ops&lt;bot&gt; asks, with key <code>'));
  assert.ok(!page.html.includes('What a yes does'), 'an unbound decision has no tool, target or parameters to show');
  assert.ok(page.html.includes('<meta name="viewport" content="width=device-width, initial-scale=1">'));
  const token = new URL(confirm.decisionPageUrl).pathname.slice(3);
  assert.ok(page.html.includes(`<form method="post" action="/a/${encodeURIComponent(token)}">`));
  assert.ok(page.html.includes('<div class="choices"><button type="submit" name="answer" value="no">No</button><button type="submit" name="answer" value="yes">Yes</button></div>'));

  const select = await opened(apiKey, { type: 'select', options: ['eu-west', 'us "east"'] });
  const selectPage = await getPage(select.decisionPageUrl);
  assert.ok(selectPage.html.includes('<button type="submit" name="answer" value="eu-west">eu-west</button><button type="submit" name="answer" value="us &quot;east&quot;">us &quot;east&quot;</button>'));
  const input = await opened(apiKey, { type: 'input', placeholder: 'Why <now>?' });
  const inputPage = await getPage(input.decisionPageUrl);
  assert.ok(inputPage.html.includes('<label for="answer">Your answer</label>'));
  assert.ok(inputPage.html.includes('<textarea id="answer" name="answer" rows="4" maxlength="2000" required placeholder="Why &lt;now&gt;?"></textarea>'));

  // A form post answers (and wakes a waiter).
  const waiting = read(apiKey, confirm.decisionId, true, running.stack.gatewayUrls[1]);
  while ((await subscribers(confirm.decisionId)) === 0) await sleep(10);
  const posted = await postForm(confirm.decisionPageUrl, { answer: 'yes' });
  assert.equal(posted.status, 200);
  assert.ok(posted.html.includes('Thank you. Your answer was recorded: <strong>Yes</strong>.'));
  assert.deepEqual([(await waiting).body.status, (await waiting).body.approved], ['answered', true]);
  const repeat = await postForm(confirm.decisionPageUrl, { answer: 'no' });
  assert.equal(repeat.status, 409);
  assert.ok(repeat.html.includes('This decision was already answered: <strong>Yes</strong>.'));
  assert.ok(!repeat.html.includes('<form'));
  const answeredPage = await getPage(confirm.decisionPageUrl);
  assert.ok(answeredPage.html.includes('This decision was already answered: <strong>Yes</strong>.'));

  const wrong = await postForm(select.decisionPageUrl, { answer: 'mars' });
  assert.equal(wrong.status, 400);
  assert.ok(wrong.html.includes('<p class="problem" role="alert">That answer is not one of the choices.</p>'));
  assert.ok(wrong.html.includes('<form'));
  assert.equal((await postForm(select.decisionPageUrl, {})).status, 400);
  const chosen = await postForm(select.decisionPageUrl, { answer: 'us "east"' });
  assert.ok(chosen.html.includes('Your answer was recorded: <strong>us &quot;east&quot;</strong>.'));
  assert.equal((await read(apiKey, select.decisionId)).body.answer, 'us "east"');

  const typed = await postForm(input.decisionPageUrl, { answer: 'Because <b>it</b> is late' });
  assert.ok(typed.html.includes('Your answer was recorded: <strong>Because &lt;b&gt;it&lt;/b&gt; is late</strong>.'));
});

test('the answer page of a bound decision shows the tool, target and parameters, the agent and key, and the time left; answered, it says when', async () => {
  const workspace = await createWorkspace();
  const { keyId, apiKey } = await createKey(workspace.workspaceId, 'runtime', '--name', 'release <pipeline>');
  const long = `--image=registry.example.test/${'release-'.repeat(20)}4.2`;
  const decision = await opened(apiKey, {
    question: 'Deploy release 4.2 to production?',
    agentName: 'release-bot',
    toolName: 'deploy',
    toolTarget: 'prod/<eu-west>',
    parameters: { version: '4.2', replicas: 3, canary: false, note: null, args: long },
    expiresInSeconds: 7_230,
  });
  const page = await getPage(decision.decisionPageUrl);
  assert.equal(page.status, 200);
  const main = page.html.slice(page.html.indexOf('<main>'), page.html.indexOf('</main>') + 7);
  // 7,230 s: "2 hours" for the half minute this test may take.
  assert.equal(
    main,
    `<main>
<p class="who">release-bot asks, with key <code>release &lt;pipeline&gt; (${keyId})</code></p>
<h1>Deploy release 4.2 to production?</h1>

<section class="binding" aria-labelledby="binding">
<h2 id="binding">What a yes does</h2>
<dl><dt>Tool</dt><dd><code>deploy</code></dd><dt>Target</dt><dd><code>prod/&lt;eu-west&gt;</code></dd></dl>
<h3>Parameters</h3>
<dl class="parameters"><dt><code>args</code></dt><dd><code>${long}</code></dd><dt><code>canary</code></dt><dd><code>false</code></dd><dt><code>note</code></dt><dd><code>null</code></dd><dt><code>replicas</code></dt><dd><code>3</code></dd><dt><code>version</code></dt><dd><code>4.2</code></dd></dl>
</section>
<p class="time">Time left: <strong>2 hours</strong> (until <time datetime="${decision.expiresAt}">${decision.expiresAt.slice(0, 10)} ${decision.expiresAt.slice(11, 16)} UTC</time>).</p>

<form method="post" action="/a/${encodeURIComponent(new URL(decision.decisionPageUrl).pathname.slice(3))}"><div class="choices"><button type="submit" name="answer" value="no">No</button><button type="submit" name="answer" value="yes">Yes</button></div></form>
</main>`,
  );
  assert.ok(!page.html.includes('autofocus'), 'no choice takes the focus by itself');

  const posted = await postForm(decision.decisionPageUrl, { answer: 'no' });
  assert.equal(posted.status, 200);
  const answeredAt = (await read(apiKey, decision.decisionId)).body.answeredAt!;
  const time = `<time datetime="${answeredAt}">${answeredAt.slice(0, 10)} ${answeredAt.slice(11, 16)} UTC</time>`;
  // The page's own link names nobody: its holder answered.
  const answeredBy = `Answered by <strong>the holder of the answer link</strong>, on the answer page, at ${time}.`;
  assert.ok(posted.html.includes(`<p class="notice" role="status">Thank you. Your answer was recorded: <strong>No</strong>.</p>\n<p class="answered">${answeredBy}</p>`));
  const answered = await getPage(decision.decisionPageUrl);
  assert.ok(answered.html.includes(`<p class="notice" role="status">This decision was already answered: <strong>No</strong>.</p>\n<p class="answered">${answeredBy}</p>`));
  assert.ok(answered.html.includes('<h2 id="binding">What a yes does</h2>'), 'what was decided stays on the page');
  assert.ok(!answered.html.includes('Time left'));
  assert.ok(!answered.html.includes('<form'));

  // Answered with the key: the page names the key.
  const byKey = await opened(apiKey, { question: 'Roll back?' });
  const keyAnswer = await answer(apiKey, byKey.decisionId, 'yes');
  const keyTime = `<time datetime="${keyAnswer.body.answeredAt}">${keyAnswer.body.answeredAt!.slice(0, 10)} ${keyAnswer.body.answeredAt!.slice(11, 16)} UTC</time>`;
  assert.ok(
    (await getPage(byKey.decisionPageUrl)).html.includes(
      `<p class="notice" role="status">This decision was already answered: <strong>Yes</strong>.</p>\n<p class="answered">Answered by <strong>${keyId}</strong> (API key), through the API, at ${keyTime}.</p>`,
    ),
  );
});

test('the answer page of a cancelled, expired or withdrawn question says so; a forged link is 404', async () => {
  const { apiKey } = await createWorkspace();
  const cancelled = await opened(apiKey);
  await cancel(apiKey, cancelled.decisionId);
  const cancelledPage = await getPage(cancelled.decisionPageUrl);
  assert.equal(cancelledPage.status, 200);
  assert.ok(cancelledPage.html.includes('This decision was cancelled; no answer is needed.'));
  assert.ok(!cancelledPage.html.includes('<form'));
  const cancelledPost = await postForm(cancelled.decisionPageUrl, { answer: 'yes' });
  assert.equal(cancelledPost.status, 409);
  assert.ok(cancelledPost.html.includes('This decision was cancelled; no answer is needed.'));

  const expired = await opened(apiKey);
  await expire(expired.decisionId);
  const expiredPage = await getPage(expired.decisionPageUrl);
  assert.ok(expiredPage.html.includes('This decision expired without an answer; it can no longer be answered.'));
  assert.equal((await postForm(expired.decisionPageUrl, { answer: 'yes' })).status, 409);

  const ask = await call<{ liveUrl: string; correlationId: string }>(running.stack.gatewayUrl, `${SERVER_API}/ask`, { method: 'POST', key: apiKey, body: { question: 'Now?', wait: false } });
  await call(running.stack.gatewayUrl, `${SERVER_API}/ask/${ask.body.correlationId}`, { method: 'DELETE', key: apiKey });
  assert.ok((await getPage(ask.body.liveUrl)).html.includes('This question was withdrawn; no answer is needed.'));

  const forged = `${expired.decisionPageUrl.slice(0, -4)}AAAA`;
  const forgedPage = await getPage(forged);
  assert.equal(forgedPage.status, 404);
  assert.ok(forgedPage.html.includes('This link is not valid'));
  assert.equal((await postForm(forged, { answer: 'yes' })).status, 404);
});

test('POST /api/v1/answer/<token> answers from a notification action: 200 the record, 409 once answered, CORS for service workers', async () => {
  const { apiKey } = await createWorkspace();
  const decision = await opened(apiKey);
  const token = new URL(decision.decisionPageUrl).pathname.slice(3);
  const preflight = await fetch(`${running.stack.gatewayUrl}/api/v1/answer/${token}`, { method: 'OPTIONS', headers: { origin: 'https://example.test' } });
  assert.equal(preflight.status, 204);
  assert.equal(preflight.headers.get('access-control-allow-origin'), '*');
  const first = await call<Body>(running.stack.gatewayUrl, `/api/v1/answer/${token}`, { method: 'POST', body: { answer: true }, headers: { origin: 'https://example.test' } });
  assert.equal(first.status, 200);
  assert.equal(first.headers.get('access-control-allow-origin'), '*');
  assert.deepEqual([first.body.decisionId, first.body.status, first.body.approved], [decision.decisionId, 'answered', true]);
  const second = await call<Body>(running.stack.gatewayUrl, `/api/v1/answer/${token}`, { method: 'POST', body: { answer: false } });
  assert.deepEqual([second.status, second.body.code, second.body.message], [409, 'conflict', 'This decision was already answered.']);
  const badBody = await call<Body>(running.stack.gatewayUrl, `/api/v1/answer/${token}`, { method: 'POST', body: { answer: 3 } });
  assert.equal(badBody.status, 400);
});
