import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { answerChannel } from '@herald/bus';
import { admin, call, createWorkspace, eventually, freePort, requiredEnv, SERVER_API, type TestWorkspace } from '@herald/testkit';
import { Redis } from 'ioredis';

import { onlyQuestionId, questionStack } from './waiting.js';

// POST /ask, GET /ask/{id}?wait, DELETE /ask/{id}, end to end: two gateway replicas, the decision
// service, PostgreSQL and Redis (answer wake-ups).

const running = questionStack();
const { subscribers } = running;

interface AskRecord {
  correlationId: string;
  question: string;
  type: string;
  status: string;
  answered: boolean;
  value?: string;
  liveUrl: string;
  pollUrl: string;
  expiresInSeconds: number;
  expiresAt: string;
  createdAt: string;
  mode: string;
  hint?: string;
  answeredBy?: { kind: string; id: string; displayName: string; channel: string; at: string } | null;
}
/** What a response may carry: the record, or an error. */
type Body = AskRecord & { code?: string; message?: string; fields?: unknown };

const ask = (key: string, body: unknown, url = running.stack.gatewayUrl) => call<Body>(url, `${SERVER_API}/ask`, { method: 'POST', key, body });
const read = (key: string, id: string, wait?: number, url = running.stack.gatewayUrl) =>
  call<Body>(url, `${SERVER_API}/ask/${id}${wait === undefined ? '' : `?wait=${wait}`}`, { key });
const withdraw = (key: string, id: string) => call<Body>(running.stack.gatewayUrl, `${SERVER_API}/ask/${id}`, { method: 'DELETE', key });
const tokenOf = (record: AskRecord) => record.liveUrl.slice(record.liveUrl.indexOf('/a/') + 3);
const answer = (record: AskRecord, value: unknown, url = running.stack.gatewayUrl) =>
  call<Body>(url, `/api/v1/answer/${tokenOf(record)}`, { method: 'POST', body: { answer: value } });

async function pending(key: string, body: Record<string, unknown> = {}): Promise<AskRecord> {
  const response = await ask(key, { question: 'Deploy to production?', wait: false, ...body });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body;
}

test('validation: every bad field is a 400 naming it', async () => {
  const { apiKey } = await createWorkspace();
  const invalid = async (body: unknown, fields: { field: string; problem: string }[]) => {
    const response = await ask(apiKey, body);
    assert.equal(response.status, 400, JSON.stringify(response.body));
    assert.equal(response.body.code, 'invalid_request');
    assert.deepEqual(
      response.body.fields,
      fields.map((field) => ({ ...field, in: 'body' })),
    );
  };
  await invalid({}, [{ field: 'question', problem: 'is required' }]);
  await invalid({ question: '' }, [{ field: 'question', problem: 'must NOT have fewer than 1 characters' }]);
  await invalid({ question: 'x'.repeat(501) }, [{ field: 'question', problem: 'must NOT have more than 500 characters' }]);
  await invalid({ question: 'Pick', type: 'select' }, [{ field: 'options', problem: 'is required for a select question' }]);
  await invalid({ question: 'Sure?', options: ['a', 'b'] }, [{ field: 'options', problem: 'is only allowed for a select question, not confirm' }]);
  await invalid({ question: 'Why?', type: 'input', options: ['a', 'b'] }, [{ field: 'options', problem: 'is only allowed for a select question, not input' }]);
  await invalid({ question: 'Pick', type: 'select', options: ['only'] }, [{ field: 'options', problem: 'must NOT have fewer than 2 items' }]);
  await invalid({ question: 'Pick', type: 'select', options: Array.from({ length: 21 }, (_, i) => `o${i}`) }, [
    { field: 'options', problem: 'must NOT have more than 20 items' },
  ]);
  await invalid({ question: 'Sure?', timeoutSeconds: 0 }, [{ field: 'timeoutSeconds', problem: 'must be >= 1' }]);
  await invalid({ question: 'Sure?', timeoutSeconds: 56 }, [{ field: 'timeoutSeconds', problem: 'must be <= 55' }]);
  await invalid({ question: 'Sure?', timeoutSeconds: 1.5 }, [{ field: 'timeoutSeconds', problem: 'must be integer' }]);
  await invalid({ question: 'Sure?', wait: 'no' }, [{ field: 'wait', problem: 'must be boolean' }]);
  await invalid({ question: 'Sure?', callbackUrl: 'http://example.com/hook' }, [{ field: 'callbackUrl', problem: 'must use https' }]);
  await invalid({ question: 'Sure?', callbackUrl: 'https://user:pw@example.com/hook' }, [{ field: 'callbackUrl', problem: 'must not contain credentials' }]);
  await invalid({ question: 'Sure?', agentName: 'x'.repeat(101) }, [{ field: 'agentName', problem: 'must NOT have more than 100 characters' }]);
  await invalid({ question: 'Sure?', tags: ['a'.repeat(65)] }, [{ field: 'tags.0', problem: 'must NOT have more than 64 characters' }]);
  await invalid({ question: 'Sure?', urgent: true }, [{ field: 'urgent', problem: 'is not allowed' }]);
  // The type must be one of three.
  const badType = await ask(apiKey, { question: 'Sure?', type: 'maybe' });
  assert.equal(badType.status, 400);
  assert.ok((badType.body.fields as { field: string }[]).every((field) => field.field === 'type'));
  // Query: wait is 0..55 seconds.
  const record = await pending(apiKey);
  const badWait = await read(apiKey, record.correlationId, 56);
  assert.equal(badWait.status, 400);
  assert.deepEqual(badWait.body.fields, [{ field: 'wait', in: 'querystring', problem: 'must be <= 55' }]);
});

test('wait=false returns pending at once; GET reads it; another workspace sees 404', async () => {
  const { apiKey } = await createWorkspace();
  const created = await ask(apiKey, { question: 'Ship v2?', context: 'All checks green.', agentName: 'ci-bot', wait: false });
  assert.equal(created.status, 200);
  const id = created.body.correlationId;
  assert.match(id, /^ask_[0-9a-f]{32}$/);
  assert.match(created.body.liveUrl, new RegExp(`^http://localhost:8080/a/${id}\\.[A-Za-z0-9_-]{43}$`));
  // Opened now, open for 10 minutes.
  assert.ok(Math.abs(Date.parse(created.body.createdAt) - Date.now()) < 60_000);
  assert.equal(Date.parse(created.body.expiresAt) - Date.parse(created.body.createdAt), 600_000);
  assert.deepEqual(created.body, {
    correlationId: id,
    question: 'Ship v2?',
    type: 'confirm',
    status: 'pending',
    answered: false,
    options: [],
    context: 'All checks green.',
    placeholder: null,
    agentName: 'ci-bot',
    liveUrl: created.body.liveUrl,
    pollUrl: `http://localhost:8080/api/v1/server/ask/${id}`,
    expiresInSeconds: 600,
    expiresAt: created.body.expiresAt,
    createdAt: created.body.createdAt,
    mode: 'browser',
    approvers: [],
    answeredBy: null,
    escalation: [],
  });
  const again = await read(apiKey, id);
  assert.equal(again.status, 200);
  assert.ok(again.body.expiresInSeconds <= 600 && again.body.expiresInSeconds >= 598);
  assert.deepEqual({ ...again.body, expiresInSeconds: 600 }, created.body);

  const other = await createWorkspace();
  assert.equal((await read(other.apiKey, id)).status, 404);
  assert.equal((await withdraw(other.apiKey, id)).status, 404);
  assert.equal((await read(apiKey, 'ask_00000000000000000000000000000000')).status, 404);
  // An ask is not a decision.
  assert.equal((await call(running.stack.gatewayUrl, `${SERVER_API}/decisions/${id}`, { key: apiKey })).status, 404);
  assert.equal((await read(apiKey, id)).body.status, 'pending');
});

test('POST /ask waits: an answer within the wait returns answered with the value', async () => {
  const { apiKey, workspaceId } = await createWorkspace();
  const started = Date.now();
  const waiting = ask(apiKey, { question: 'Which region?', type: 'select', options: ['eu-west', 'us-east'], timeoutSeconds: 20 });
  const id = await onlyQuestionId(workspaceId);
  const current = await read(apiKey, id);
  assert.equal(current.body.status, 'pending');
  const answered = await answer(current.body, 'us-east', running.stack.gatewayUrls[1]);
  assert.equal(answered.status, 200, JSON.stringify(answered.body));
  const response = await waiting;
  // Woken by the answer, not by the end of its 20 s wait (which would also read as answered).
  assert.ok(Date.now() - started < 15_000, `${Date.now() - started} ms`);
  assert.equal(response.status, 200);
  assert.deepEqual({ status: response.body.status, answered: response.body.answered, value: response.body.value, hint: response.body.hint }, {
    status: 'answered',
    answered: true,
    value: 'us-east',
    hint: undefined,
  });
});

test('an answer just before the wait ends is returned; just after, the wait reports timeout and a later read shows it', async () => {
  const { apiKey } = await createWorkspace();
  // Just before: GET waits 3 s, the answer lands at 2.2 s (through the other replica).
  const first = await pending(apiKey);
  const started = Date.now();
  const before = read(apiKey, first.correlationId, 3);
  // The GET is waiting (its gateway subscribed to the question's wake-up); the answer comes 2.2 s
  // into its wait, the sleep only placing it near the end.
  while ((await subscribers(first.correlationId)) === 0) await sleep(10);
  await sleep(started + 2_200 - Date.now());
  assert.equal((await answer(first, 'yes', running.stack.gatewayUrls[1])).status, 200);
  const early = await before;
  assert.equal(early.body.status, 'answered');
  assert.equal(early.body.value, 'yes');
  assert.ok(Date.now() - started < 3_000, `took ${Date.now() - started} ms`);

  // Just after: POST waits 1 s; the answer lands at 1.3 s.
  const { workspaceId, apiKey: key2 } = await createWorkspace();
  const waiting = ask(key2, { question: 'Restart the database?', timeoutSeconds: 1 });
  const id = await onlyQuestionId(workspaceId);
  const timedOut = await waiting;
  assert.equal(timedOut.status, 200);
  assert.equal(timedOut.body.status, 'timeout');
  assert.equal(timedOut.body.answered, false);
  assert.equal(timedOut.body.value, undefined);
  assert.match(timedOut.body.hint ?? '', /^No answer yet\. The question stays open for \d+ more seconds: wait again with GET http:\/\/localhost:8080\/api\/v1\/server\/ask\/ask_[0-9a-f]{32}\?wait=55, or withdraw it with DELETE\.$/);
  const late = await answer(timedOut.body, false);
  assert.equal(late.status, 200);
  assert.deepEqual({ status: late.body.status, value: late.body.value }, { status: 'answered', value: 'no' });
  const later = await read(key2, id);
  assert.deepEqual({ status: later.body.status, answered: later.body.answered, value: later.body.value }, { status: 'answered', answered: true, value: 'no' });
});

test('an answer link used again with the recorded answer (a retry whose reply was lost) is 200 with the first record; another answer is 409', async () => {
  const { apiKey } = await createWorkspace();
  const record = await pending(apiKey);
  const first = await answer(record, 'yes');
  assert.equal(first.status, 200, JSON.stringify(first.body));
  const again = await answer(record, true, running.stack.gatewayUrls[1]);
  assert.equal(again.status, 200, JSON.stringify(again.body));
  assert.deepEqual([again.body.status, again.body.value, again.body.answeredBy], ['answered', 'yes', first.body.answeredBy]);
  const other = await answer(record, 'no');
  assert.deepEqual([other.status, other.body.code, other.body.message], [409, 'conflict', 'This question was already answered.']);
  assert.equal((await read(apiKey, record.correlationId)).body.value, 'yes');
});

test('two answers at once: exactly one wins, the other is 409', async () => {
  const { apiKey } = await createWorkspace();
  const record = await pending(apiKey);
  const results = await Promise.all([answer(record, 'yes', running.stack.gatewayUrls[0]), answer(record, 'no', running.stack.gatewayUrls[1])]);
  const statuses = results.map((result) => result.status).sort();
  assert.deepEqual(statuses, [200, 409]);
  const winner = results.find((result) => result.status === 200);
  const loser = results.find((result) => result.status === 409);
  assert.equal(loser?.body.code, 'conflict');
  assert.equal(loser?.body.message, 'This question was already answered.');
  assert.equal((await read(apiKey, record.correlationId)).body.value, winner?.body.value);
});

test('a waiter on one gateway is woken by an answer through another', async () => {
  const { apiKey } = await createWorkspace();
  const record = await pending(apiKey);
  const waiting = read(apiKey, record.correlationId, 30, running.stack.gatewayUrls[0]);
  while ((await subscribers(record.correlationId)) === 0) await sleep(10);
  const answeredAt = Date.now();
  assert.equal((await answer(record, 'yes', running.stack.gatewayUrls[1])).status, 200);
  const woken = await waiting;
  assert.equal(woken.body.status, 'answered');
  assert.ok(Date.now() - answeredAt < 1_000, `woken after ${Date.now() - answeredAt} ms`);
  assert.equal(await subscribers(record.correlationId), 0);
});

test("an answer's wake-up goes out on the stack's own channel (its namespace's), not on another stack's", async () => {
  const { apiKey } = await createWorkspace();
  const record = await pending(apiKey);
  const ours = answerChannel(running.stack.topicPrefix, record.correlationId);
  const listener = new Redis(requiredEnv('REDIS_URL'));
  const publisher = new Redis(requiredEnv('REDIS_URL'));
  try {
    const heard: string[] = [];
    listener.on('message', (channel: string) => heard.push(channel));
    // The same question id under no namespace and under another one: neither may hear it.
    await listener.subscribe(ours, answerChannel('', record.correlationId), answerChannel('other.', record.correlationId));
    assert.equal((await answer(record, 'yes')).status, 200);
    await eventually('the wake-up published', async () => heard.length, (count) => count > 0);
    // A marker published after it on the listener's own channel arrives after anything else published before.
    assert.equal(await publisher.publish(ours, 'marker'), 1);
    await eventually('the marker heard', async () => heard.length, (count) => count >= 2);
    assert.deepEqual(heard, [ours, ours]);
  } finally {
    listener.disconnect();
    publisher.disconnect();
  }
});

test('a client that disconnects frees its waiter at once', async () => {
  const { apiKey } = await createWorkspace();
  const record = await pending(apiKey);
  const controller = new AbortController();
  const waiting = fetch(`${running.stack.gatewayUrl}${SERVER_API}/ask/${record.correlationId}?wait=50`, {
    headers: { authorization: `Bearer ${apiKey}` },
    signal: controller.signal,
  }).catch((err: unknown) => err);
  while ((await subscribers(record.correlationId)) === 0) await sleep(10);
  controller.abort();
  await waiting;
  const started = Date.now();
  // Freed when the client left, not held to the end of its 50 s wait (10 s leaves room for a busy machine).
  while ((await subscribers(record.correlationId)) > 0) {
    assert.ok(Date.now() - started < 10_000, 'the waiter was not freed');
    await sleep(10);
  }
});

test('withdraw: DELETE makes it withdrawn; no answer, no second withdrawal; an answered one cannot be withdrawn', async () => {
  const { apiKey } = await createWorkspace();
  const record = await pending(apiKey);
  const waiting = read(apiKey, record.correlationId, 30);
  while ((await subscribers(record.correlationId)) === 0) await sleep(10);
  const withdrawn = await withdraw(apiKey, record.correlationId);
  assert.equal(withdrawn.status, 200);
  assert.deepEqual({ status: withdrawn.body.status, answered: withdrawn.body.answered }, { status: 'withdrawn', answered: false });
  // A waiter hears of the withdrawal too.
  assert.equal((await waiting).body.status, 'withdrawn');
  const again = await withdraw(apiKey, record.correlationId);
  assert.equal(again.status, 409);
  assert.equal(again.body.message, 'This question was withdrawn.');
  const late = await answer(record, 'yes');
  assert.equal(late.status, 409);
  assert.equal((await read(apiKey, record.correlationId)).body.status, 'withdrawn');

  const answered = await pending(apiKey);
  assert.equal((await answer(answered, true)).status, 200);
  const refused = await withdraw(apiKey, answered.correlationId);
  assert.equal(refused.status, 409);
  assert.equal(refused.body.message, 'This question was already answered.');
});

test('answers must fit the question', async () => {
  const { apiKey } = await createWorkspace();
  const confirm = await pending(apiKey);
  const bad = await answer(confirm, 'maybe');
  assert.equal(bad.status, 400);
  assert.deepEqual(bad.body.fields, [
    { field: 'answer', in: 'body', problem: 'must be "yes" or "no" (or true or false) for a confirm question' },
  ]);
  const select = await pending(apiKey, { type: 'select', options: ['a', 'b'] });
  assert.equal((await answer(select, 'c')).status, 400);
  const input = await pending(apiKey, { type: 'input', placeholder: 'Why?' });
  assert.equal((await answer(input, 'x'.repeat(2_001))).status, 400);
  const typed = await answer(input, 'Because the tests pass.');
  assert.deepEqual({ status: typed.status, value: typed.body.value }, { status: 200, value: 'Because the tests pass.' });
  assert.equal((await call(running.stack.gatewayUrl, `/api/v1/answer/${confirm.correlationId}.forged`, { method: 'POST', body: { answer: 'yes' } })).status, 404);
});

test('more than 25 pending questions per workspace: 429 with only {error} and no Retry-After', async () => {
  const { apiKey } = await createWorkspace();
  const records = await Promise.all(Array.from({ length: 25 }, () => pending(apiKey)));
  const refused = await ask(apiKey, { question: 'One more?', wait: false });
  assert.equal(refused.status, 429);
  assert.deepEqual(refused.body, { error: 'This workspace already has 25 pending questions; answer, withdraw or let some expire first.' });
  assert.equal(refused.headers.get('retry-after'), null);
  // An answered or withdrawn one no longer counts.
  assert.equal((await answer(records[0] as AskRecord, 'yes')).status, 200);
  assert.equal((await withdraw(apiKey, (records[1] as AskRecord).correlationId)).status, 200);
  await pending(apiKey);
  await pending(apiKey);
  assert.equal((await ask(apiKey, { question: 'And another?', wait: false })).status, 429);
});

test('a Partner workspace must use /decisions: 403 partner_decision_required', async () => {
  const { apiKey } = await createWorkspace('partner');
  const response = await ask(apiKey, { question: 'Sure?' });
  assert.equal(response.status, 403);
  assert.deepEqual(response.body, {
    error: 'Use POST /decisions',
    code: 'partner_decision_required',
    status: 403,
    message: 'Partner workspaces cannot use /ask; open a decision with POST /decisions instead.',
    hint: 'POST /api/v1/server/decisions addresses the owner, the team or one of your end-users, and waits the same way.',
    documentation: 'http://localhost:8080/docs/errors#partner_decision_required',
  });
});

test('Terminal approval mode: the question is stored with mode terminal', async () => {
  const workspace = await admin<TestWorkspace>('workspace', 'create', '--name', 'Terminal', '--plan', 'growth', '--domain', 'example.test', '--approval-mode', 'terminal');
  const record = await pending(workspace.apiKey);
  assert.equal(record.mode, 'terminal');
  assert.equal((await read(workspace.apiKey, record.correlationId)).body.mode, 'terminal');
});

test('an expired unanswered question reads as timeout forever after and takes no answer', async () => {
  // A decision replica whose asks live 2 s, and a gateway in front of it.
  const port = await freePort();
  await running.stack.startService('decision', { GRPC_PORT: String(port), ASK_LIFETIME_SECONDS: '2' });
  const gateway = await running.stack.addGateway({ DECISION_GRPC_URL: `127.0.0.1:${port}` });
  const { apiKey } = await createWorkspace();
  const created = await ask(apiKey, { question: 'Quick?', wait: false }, gateway);
  assert.equal(created.body.expiresInSeconds, 2);
  // A wait longer than the lifetime ends at the expiry.
  const started = Date.now();
  const waited = await read(apiKey, created.body.correlationId, 30, gateway);
  assert.ok(Date.now() - started < 3_500, `took ${Date.now() - started} ms`);
  const expired = {
    status: 'timeout',
    answered: false,
    expiresInSeconds: 0,
    hint: 'Nobody answered before the question expired; treat it as not approved. Ask again if it still matters.',
  };
  const pick = (record: AskRecord) => ({ status: record.status, answered: record.answered, expiresInSeconds: record.expiresInSeconds, hint: record.hint });
  assert.deepEqual(pick(waited.body), expired);
  const late = await answer(created.body, 'yes', gateway);
  assert.equal(late.status, 409);
  assert.match(late.body.message ?? '', /^This question expired unanswered at /);
  assert.equal((await withdraw(apiKey, created.body.correlationId)).status, 409);
  assert.deepEqual(pick((await read(apiKey, created.body.correlationId, 0, gateway)).body), expired);
});

test('a gateway shutting down answers its waiters at once with the current record', async () => {
  const url = await running.stack.addGateway();
  const gateway = running.stack.gateways.at(-1);
  const { apiKey } = await createWorkspace();
  const record = await pending(apiKey);
  const waiting = read(apiKey, record.correlationId, 50, url);
  while ((await subscribers(record.correlationId)) === 0) await sleep(10);
  const started = Date.now();
  const exited = gateway?.stop();
  const response = await waiting;
  assert.ok(Date.now() - started < 2_000, `answered after ${Date.now() - started} ms`);
  assert.deepEqual([response.status, response.body.status, response.body.correlationId], [200, 'pending', record.correlationId]);
  assert.equal(await exited, 0);
});
