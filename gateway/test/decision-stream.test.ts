import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { admin, call, createKey, createWorkspace, SERVER_API, startStack, type Stack } from '@herald/testkit';

import { memberSessions, newAddress, type Session } from './member-sessions.js';

// GET /decisions/stream: a workspace's question changes as server-sent events (the console's live
// inbox), fed by the decision service's Redis announcements; and POST /ask/{id}, the answer an
// approver gives in place. Each test works in its own workspace.

const STREAMS = 2;
const HEARTBEAT_MS = 300;
let stack: Stack | undefined;
const running = () => {
  if (!stack) throw new Error('the stack starts before the first test');
  return stack;
};

before(async () => {
  stack = await startStack({ decisions: true, gatewayEnv: { DECISION_STREAMS_PER_WORKSPACE: String(STREAMS), DECISION_STREAM_HEARTBEAT_MS: String(HEARTBEAT_MS) } });
});
after(async () => {
  await stack?.stop();
});

const sessions = memberSessions(() => running().gatewayUrl);

interface StreamEvent {
  event: string;
  data: Record<string, unknown>;
}

/** An open stream: its response, and its events one at a time as the gateway sends them. */
interface Stream {
  response: Response;
  /** The next event; `comments`: a block of comment lines (a heartbeat) is one too, as event ':' with data {text}. */
  next(options?: { comments: boolean }): Promise<StreamEvent>;
  close(): void;
}

async function openStream(headers: Record<string, string>, gatewayUrl = running().gatewayUrl): Promise<Stream> {
  const controller = new AbortController();
  const response = await fetch(`${gatewayUrl}${SERVER_API}/decisions/stream`, { headers, signal: controller.signal });
  // Made at the first next(): a refused stream's body is read as JSON instead.
  let reader: ReadableStreamDefaultReader<string> | undefined;
  let buffer = '';
  const stream: Stream = {
    response,
    async next({ comments } = { comments: false }) {
      assert.ok(response.body, 'the stream has a body');
      reader ??= response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const end = buffer.indexOf('\n\n');
        if (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const lines = block.split('\n').filter((line) => !line.startsWith(':') && !line.startsWith('retry:'));
          if (lines.length === 0 && comments && block.startsWith(':')) return { event: ':', data: { text: block } };
          if (lines.length === 0) continue;
          const event = lines.find((line) => line.startsWith('event: '))?.slice(7) ?? 'message';
          const data = lines.find((line) => line.startsWith('data: '))?.slice(6) ?? '{}';
          return { event, data: JSON.parse(data) as Record<string, unknown> };
        }
        const { value, done } = await reader.read();
        if (done) throw new Error('the stream ended');
        buffer += value;
      }
    },
    close: () => controller.abort(),
  };
  return stream;
}

/** A stream that is listening (its `ready` event came). */
async function listening(headers: Record<string, string>, gatewayUrl?: string): Promise<Stream> {
  const stream = await openStream(headers, gatewayUrl);
  assert.equal(stream.response.status, 200);
  assert.equal(stream.response.headers.get('content-type'), 'text/event-stream; charset=utf-8');
  assert.equal(stream.response.headers.get('cache-control'), 'no-store');
  assert.deepEqual(await stream.next(), { event: 'ready', data: {} });
  return stream;
}

const keyHeaders = (key: string) => ({ authorization: `Bearer ${key}` });
const sessionHeaders = (session: Session) => ({ cookie: `herald_session=${session.id}` });
const post = (key: string, path: string, body: unknown) => call<Record<string, unknown>>(running().gatewayUrl, `${SERVER_API}${path}`, { method: 'POST', key, body });

async function member(workspaceId: string, role: string): Promise<{ session: Session; memberId: string }> {
  const invited = await admin<{ memberId: string; signInUrl: string }>('member', 'invite', '--workspace', workspaceId, '--email', newAddress(role), '--role', role, '--name', `A ${role}`);
  return { session: await sessions.signInWith(invited.signInUrl), memberId: invited.memberId };
}

test('a member’s stream: decisions and asks as they open and settle, nothing of another workspace', async () => {
  const workspace = await createWorkspace();
  const other = await createWorkspace();
  const { session, memberId } = await member(workspace.workspaceId, 'approver');
  const stream = await listening(sessionHeaders(session));
  try {
    // Another workspace's question says nothing here: the next event is this workspace's.
    assert.equal((await post(other.apiKey, '/decisions', { question: 'Not yours?' })).status, 200);
    const opened = await post(workspace.apiKey, '/decisions', { question: 'Deploy to production?' });
    assert.equal(opened.status, 200);
    const first = await stream.next();
    assert.equal(first.event, 'decision');
    assert.deepEqual([first.data.decisionId, first.data.status, first.data.question], [opened.body.decisionId, 'pending', 'Deploy to production?']);

    const asked = await post(workspace.apiKey, '/ask', { question: 'Which region?', type: 'select', options: ['eu', 'us'], wait: false });
    assert.equal(asked.status, 200);
    const ask = await stream.next();
    assert.equal(ask.event, 'ask');
    assert.deepEqual([ask.data.correlationId, ask.data.status, ask.data.options], [asked.body.correlationId, 'pending', ['eu', 'us']]);

    const answered = await sessions.withSession(session, `${SERVER_API}/decisions/${String(opened.body.decisionId)}`, { method: 'POST', body: { answer: 'yes' } });
    assert.equal(answered.status, 200, JSON.stringify(answered.body));
    const settled = await stream.next();
    assert.deepEqual([settled.event, settled.data.decisionId, settled.data.status, settled.data.answer], ['decision', opened.body.decisionId, 'answered', 'yes']);
    assert.deepEqual([(settled.data.answeredBy as Record<string, string>).kind, (settled.data.answeredBy as Record<string, string>).id], ['member', memberId]);

    assert.equal((await call(running().gatewayUrl, `${SERVER_API}/ask/${String(asked.body.correlationId)}`, { method: 'DELETE', key: workspace.apiKey })).status, 200);
    const withdrawn = await stream.next();
    assert.deepEqual([withdrawn.event, withdrawn.data.correlationId, withdrawn.data.status], ['ask', asked.body.correlationId, 'withdrawn']);
  } finally {
    stream.close();
  }
});

test('a bound key’s stream hears only its end-user’s decisions', async () => {
  const workspace = await createWorkspace('partner');
  const alice = (await createKey(workspace.workspaceId, 'bound', '--external-id', 'alice')).apiKey;
  const bob = (await createKey(workspace.workspaceId, 'bound', '--external-id', 'bob')).apiKey;
  const stream = await listening(keyHeaders(alice));
  try {
    assert.equal((await post(bob, '/decisions', { question: 'Bob’s?' })).status, 200);
    const own = await post(alice, '/decisions', { question: 'Alice’s?' });
    assert.equal(own.status, 200);
    const heard = await stream.next();
    assert.deepEqual([heard.event, heard.data.decisionId, heard.data.externalId], ['decision', own.body.decisionId, 'alice']);
  } finally {
    stream.close();
  }
});

test('an idle stream gets a heartbeat comment line; the next change still arrives after it', async () => {
  const workspace = await createWorkspace();
  const stream = await listening(keyHeaders(workspace.apiKey));
  try {
    assert.deepEqual(await stream.next({ comments: true }), { event: ':', data: { text: ': heartbeat' } });
    assert.deepEqual(await stream.next({ comments: true }), { event: ':', data: { text: ': heartbeat' } });
    const opened = await post(workspace.apiKey, '/decisions', { question: 'After the heartbeat?' });
    const event = await stream.next();
    assert.deepEqual([event.event, event.data.decisionId], ['decision', opened.body.decisionId]);
  } finally {
    stream.close();
  }
});

test('a key without decisions, a forged session and no credentials are refused', async () => {
  const workspace = await createWorkspace();
  const connector = (await createKey(workspace.workspaceId, 'connector')).apiKey;
  const refused = await openStream(keyHeaders(connector));
  assert.equal(refused.response.status, 403);
  assert.equal(((await refused.response.json()) as { code: string }).code, 'forbidden');
  const anonymous = await openStream({});
  assert.equal(anonymous.response.status, 401);
  await anonymous.response.body?.cancel();
  const forged = await openStream({ cookie: 'herald_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' });
  assert.equal(forged.response.status, 401);
  await forged.response.body?.cancel();
});

test(`a workspace holds at most ${STREAMS} streams on a replica; a closed one frees its place`, async () => {
  const workspace = await createWorkspace();
  const open = [await listening(keyHeaders(workspace.apiKey)), await listening(keyHeaders(workspace.apiKey))];
  const over = await openStream(keyHeaders(workspace.apiKey));
  assert.equal(over.response.status, 429);
  const body = (await over.response.json()) as { code: string; message: string; limit: number };
  assert.deepEqual([body.code, body.limit], ['rate_limited', STREAMS]);
  assert.equal(body.message, `This workspace already has ${STREAMS} live streams open here; close one first.`);
  // Another workspace is not held back by this one's streams.
  const elsewhere = await listening(keyHeaders((await createWorkspace()).apiKey));
  elsewhere.close();

  open[0]?.close();
  // The gateway frees the place once it sees the connection close.
  for (;;) {
    const again = await openStream(keyHeaders(workspace.apiKey));
    if (again.response.status === 200) {
      assert.deepEqual(await again.next(), { event: 'ready', data: {} });
      again.close();
      break;
    }
    assert.equal(again.response.status, 429);
    await again.response.body?.cancel();
  }
  open[1]?.close();
});

test('POST /ask/{id}: an approver answers in place and the waiting agent gets it; a viewer is refused; a settled or foreign one is not answered', async () => {
  const workspace = await createWorkspace();
  const other = await createWorkspace();
  const { session: approver, memberId } = await member(workspace.workspaceId, 'approver');
  const { session: viewer } = await member(workspace.workspaceId, 'viewer');
  const stream = await listening(keyHeaders(workspace.apiKey));
  try {
    const waiting = post(workspace.apiKey, '/ask', { question: 'Ship it?', timeoutSeconds: 30 });
    const opened = await stream.next();
    const id = String(opened.data.correlationId);

    const denied = await sessions.withSession(viewer, `${SERVER_API}/ask/${id}`, { method: 'POST', body: { answer: 'yes' } });
    assert.equal(denied.status, 403);
    assert.equal(denied.body.code, 'forbidden');
    const foreign = await call<Record<string, unknown>>(running().gatewayUrl, `${SERVER_API}/ask/${id}`, { method: 'POST', key: other.apiKey, body: { answer: 'yes' } });
    assert.equal(foreign.status, 404);
    const invalid = await sessions.withSession(approver, `${SERVER_API}/ask/${id}`, { method: 'POST', body: { answer: '' } });
    assert.equal(invalid.status, 400);

    const answered = await sessions.withSession(approver, `${SERVER_API}/ask/${id}`, { method: 'POST', body: { answer: true } });
    assert.equal(answered.status, 200, JSON.stringify(answered.body));
    assert.deepEqual([answered.body.status, answered.body.value], ['answered', 'yes']);
    const agent = await waiting;
    assert.equal(agent.status, 200);
    assert.deepEqual([agent.body.correlationId, agent.body.status, agent.body.value], [id, 'answered', 'yes']);
    // Recorded as the member's answer, from the console.
    const { at, ...answeredBy } = agent.body.answeredBy as Record<string, string>;
    assert.deepEqual(answeredBy, { kind: 'member', id: memberId, displayName: 'A approver', channel: 'console' });
    assert.ok(at && Date.parse(at) > 0);

    const again = await sessions.withSession(approver, `${SERVER_API}/ask/${id}`, { method: 'POST', body: { answer: 'no' } });
    assert.equal(again.status, 409);
  } finally {
    stream.close();
  }
});

test('a decision naming a member as its approver: another member’s answer is refused (403), the named member’s is recorded', async () => {
  const workspace = await createWorkspace();
  const named = await member(workspace.workspaceId, 'approver');
  const other = await member(workspace.workspaceId, 'approver');
  const opened = await post(workspace.apiKey, '/decisions', { question: 'Promote the canary?', approvers: [{ kind: 'member', id: named.memberId }] });
  assert.equal(opened.status, 200, JSON.stringify(opened.body));
  const path = `${SERVER_API}/decisions/${String(opened.body.decisionId)}`;

  const refused = await sessions.withSession(other.session, path, { method: 'POST', body: { answer: 'yes' } });
  assert.equal(refused.status, 403, JSON.stringify(refused.body));
  assert.equal(refused.body.code, 'forbidden');
  const still = await call<Record<string, unknown>>(running().gatewayUrl, path, { key: workspace.apiKey });
  assert.deepEqual([still.body.status, still.body.answeredBy], ['pending', null]);

  const answered = await sessions.withSession(named.session, path, { method: 'POST', body: { answer: 'no' } });
  assert.equal(answered.status, 200, JSON.stringify(answered.body));
  const { at, ...answeredBy } = answered.body.answeredBy as Record<string, string>;
  assert.deepEqual([answered.body.status, answered.body.answer, answeredBy], ['answered', 'no', { kind: 'member', id: named.memberId, displayName: 'A approver', channel: 'console' }]);
  assert.ok(at && Date.parse(at) > 0);
});

test('a gateway shutting down ends its streams at once (the browser reconnects elsewhere)', async () => {
  const url = await running().addGateway({ DECISION_STREAMS_PER_WORKSPACE: String(STREAMS), DECISION_STREAM_HEARTBEAT_MS: String(HEARTBEAT_MS) });
  const gateway = running().gateways.at(-1);
  assert.ok(gateway);
  const workspace = await createWorkspace();
  const stream = await listening(keyHeaders(workspace.apiKey), url);
  const started = Date.now();
  const exited = gateway.stop();
  await assert.rejects(stream.next({ comments: true }), /the stream ended/);
  assert.ok(Date.now() - started < 5_000, `ended after ${Date.now() - started} ms`);
  assert.equal(await exited, 0);
});
