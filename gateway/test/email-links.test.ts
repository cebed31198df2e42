import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { answerChannel } from '@herald/bus';
import { HeraldError } from '@herald/errors';
import { createClient } from '@herald/grpc';
import { DecisionServiceClient, QuestionKind } from '@herald/proto/herald/decision/v1/decision';
import { call, connectDatabase, createWorkspace, freePort, requiredEnv, SERVER_API, startMailpit, startStack, type Mailpit, type MailpitMessage, type Stack } from '@herald/testkit';
import { Redis } from 'ioredis';

// The email channel end to end: a decision (or ask) naming an email approver is mailed to it
// through a real SMTP server (Mailpit, read through its API); the message's links open a
// confirmation page at /e/<token> that changes nothing, and only the POST from that page answers,
// once, as the address. Each test has its own workspace and addresses.

const ORIGIN = 'http://localhost:8080';

let stack: Stack;
let mailpit: Mailpit;
let redis: Redis;
before(async () => {
  // Addresses at refused.example are refused for good (a 5xx reply), like a mailbox that does not exist.
  mailpit = await startMailpit({ allowedRecipients: '@example\\.test$' });
  stack = await startStack({ decisions: true, env: { SMTP_URL: mailpit.smtpUrl, MAIL_FROM: 'Herald Test <no-reply@herald.test>' } });
  redis = new Redis(requiredEnv('REDIS_URL'));
});
after(async () => {
  redis.disconnect();
  await stack.stop();
  await mailpit.stop();
});

let addresses = 0;
/** An address of this test run (Mailpit is shared by the file's tests). */
const address = (name: string): string => `${name}-${process.pid}-${(addresses += 1)}@example.test`;

interface AnsweredBy {
  kind: string;
  id: string;
  displayName: string;
  channel: string;
  at: string;
}
interface AskRecord {
  correlationId: string;
  status: string;
  value?: string;
  answeredBy: AnsweredBy | null;
}
interface QuestionRecord {
  decisionId: string;
  status: string;
  answer: string | null;
  approved: boolean;
  answeredBy: AnsweredBy | null;
  code?: string;
}

const open = async (key: string, body: Record<string, unknown>): Promise<QuestionRecord> => {
  const response = await call<QuestionRecord>(stack.gatewayUrl, `${SERVER_API}/decisions`, { method: 'POST', key, body: { question: 'Deploy 4.2?', ...body } });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body;
};
const read = (key: string, id: string, wait = false) => call<QuestionRecord>(stack.gatewayUrl, `${SERVER_API}/decisions/${id}${wait ? '?wait=true' : ''}`, { key });

/** The links of a message's plain-text part, by their label (Approve, Reject, an option, Write an answer). */
function linksOf(message: MailpitMessage): Map<string, string> {
  return new Map([...message.text.matchAll(/^(.+): (http:\/\/localhost:8080\/e\/\S+)$/gm)].map((match) => [match[1] as string, match[2] as string]));
}

const pathOf = (link: string): string => new URL(link).pathname;

/** A browser's GET of a link (Accept: text/html). */
async function getPage(link: string) {
  const response = await fetch(`${stack.gatewayUrl}${pathOf(link)}`, { headers: { accept: 'text/html' } });
  return { status: response.status, headers: response.headers, html: await response.text() };
}

/** A browser's POST of the page's form: same origin, unless the headers say otherwise. */
async function postPage(link: string, form: Record<string, string> = {}, headers: Record<string, string> = { origin: ORIGIN, 'sec-fetch-site': 'same-origin' }) {
  const response = await fetch(`${stack.gatewayUrl}${pathOf(link)}`, { method: 'POST', headers: { accept: 'text/html', ...headers }, body: new URLSearchParams(form) });
  return { status: response.status, headers: response.headers, html: await response.text() };
}

/** A POST by a program (no Accept: text/html): errors in the error shape. */
const postApi = (link: string) => call<Record<string, unknown>>(stack.gatewayUrl, pathOf(link), { method: 'POST', headers: { origin: ORIGIN } });

async function eventsOf(questionId: string, kind: string): Promise<Array<{ actor: Record<string, unknown> | null; detail: Record<string, unknown> }>> {
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<{ actor: Record<string, unknown> | null; detail: Record<string, unknown> }>(`SELECT actor, detail FROM decision.question_events WHERE question_id = $1 AND kind = $2 ORDER BY seq`, [questionId, kind]);
    return rows;
  } finally {
    await db.end();
  }
}

async function deliveriesOf(questionId: string): Promise<Array<{ channel: string; target: string; state: string; result: string | null }>> {
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<{ channel: string; target: string; state: string; result: string | null }>(
      `SELECT channel, target, state, result FROM decision.question_deliveries WHERE question_id = $1 ORDER BY channel, target`,
      [questionId],
    );
    return rows;
  } finally {
    await db.end();
  }
}

/** Waits until a gateway holds a waiter for the question. */
async function waiterHeld(questionId: string): Promise<void> {
  for (;;) {
    const [, count] = (await redis.pubsub('NUMSUB', answerChannel(stack.topicPrefix, questionId))) as [string, number];
    if (Number(count) > 0) return;
    await sleep(10);
  }
}

test('a decision with an email approver is mailed once, with its facts and one link per answer, in plain text and escaped HTML', async () => {
  const { apiKey, keyId } = await createWorkspace();
  const to = address('ops');
  const decision = await open(apiKey, {
    question: 'Deploy <4.2> & "more"?',
    context: 'Release notes: fixes.',
    agentName: 'release-bot',
    toolName: 'deploy',
    toolTarget: 'prod-eu',
    parameters: { version: '4.2', canary: false },
    approvers: [{ kind: 'email', id: to.toUpperCase() }],
  });
  const message = await mailpit.waitForMessage(to);
  assert.equal(message.from, 'no-reply@herald.test');
  assert.deepEqual(message.to, [to]);
  assert.equal(message.subject, 'release-bot asks: Deploy <4.2> & "more"?');
  for (const part of ['release-bot asks:', 'Deploy <4.2> & "more"?', 'Release notes: fixes.', 'Tool: deploy', 'Target: prod-eu', '"version": "4.2"', '"canary": false', 'Asked by: release-bot', `With key: Default dashboard key (${keyId})`, 'Expires: ']) {
    assert.ok(message.text.includes(part), `the text has ${part}`);
  }
  const links = linksOf(message);
  assert.deepEqual([...links.keys()], ['Approve', 'Reject']);
  for (const link of links.values()) assert.match(link, new RegExp(`^${ORIGIN}/e/${decision.decisionId}\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]{43}$`));
  assert.notEqual(links.get('Approve'), links.get('Reject'));
  // The HTML part: every value escaped, the links as buttons.
  assert.ok(message.html.includes('Deploy &lt;4.2&gt; &amp; &quot;more&quot;?'));
  assert.ok(!message.html.includes('<4.2>'));
  assert.ok(message.html.includes(`href="${links.get('Approve')}"`));
  assert.ok(message.html.includes(`href="${links.get('Reject')}"`));
  // Exactly one: the delivery is recorded delivered, and no second message follows.
  for (;;) {
    const deliveries = await deliveriesOf(decision.decisionId);
    if (deliveries[0]?.state !== 'pending') {
      assert.deepEqual(deliveries, [{ channel: 'email', target: to, state: 'delivered', result: message.messageId }]);
      break;
    }
    await sleep(20);
  }
  assert.equal((await mailpit.messagesTo(to)).length, 1);
  assert.deepEqual(
    (await eventsOf(decision.decisionId, 'delivered')).map((event) => event.detail),
    [{ channel: 'email', target: to, result: 'delivered', reached: 1, ref: message.messageId }],
  );
});

test('an address the mail server refuses for good: that delivery fails (recorded), the others are made', async () => {
  const { apiKey } = await createWorkspace();
  const [refused, accepted] = [`nobody-${process.pid}@refused.example`, address('colleague')];
  const decision = await open(apiKey, { approvers: [{ kind: 'email', id: refused }, { kind: 'email', id: accepted }] });
  const message = await mailpit.waitForMessage(accepted);
  for (;;) {
    const deliveries = await deliveriesOf(decision.decisionId);
    if (deliveries.every((delivery) => delivery.state !== 'pending')) {
      assert.deepEqual(deliveries, [
        { channel: 'email', target: accepted, state: 'delivered', result: message.messageId },
        { channel: 'email', target: refused, state: 'failed', result: null },
      ]);
      break;
    }
    await sleep(20);
  }
  assert.deepEqual(await mailpit.messagesTo(refused), []);
  const failed = (await eventsOf(decision.decisionId, 'delivered')).map((event) => event.detail).find((detail) => detail.target === refused);
  assert.deepEqual(failed, { channel: 'email', target: refused, result: 'failed', error: 'the mail server refused it: 550' });
  assert.equal((await read(apiKey, decision.decisionId)).body.status, 'pending');
});

test('select: one link per option; input: one link to a page with a text field', async () => {
  const { apiKey } = await createWorkspace();
  const to = address('choose');
  await open(apiKey, { question: 'Which region?', type: 'select', options: ['eu-west', 'us "east"'], approvers: [{ kind: 'email', id: to }] });
  assert.deepEqual([...linksOf(await mailpit.waitForMessage(to)).keys()], ['eu-west', 'us "east"']);

  const writer = address('write');
  const input = await open(apiKey, { question: 'Why now?', type: 'input', placeholder: 'A <reason>', approvers: [{ kind: 'email', id: writer }] });
  const links = linksOf(await mailpit.waitForMessage(writer));
  assert.deepEqual([...links.keys()], ['Write an answer']);
  const link = links.get('Write an answer') as string;
  const page = await getPage(link);
  assert.equal(page.status, 200);
  assert.ok(page.html.includes('<textarea id="answer" name="answer" rows="4" maxlength="2000" required placeholder="A &lt;reason&gt;"></textarea>'));
  const empty = await postPage(link, {});
  assert.equal(empty.status, 400);
  assert.ok(empty.html.includes('Invalid request body: answer must be 1 to 2000 characters.'));
  assert.equal((await read(apiKey, input.decisionId)).body.status, 'pending');
  const posted = await postPage(link, { answer: 'The <window> is open' });
  assert.equal(posted.status, 200, posted.html);
  assert.ok(posted.html.includes('Your answer was recorded: The &lt;window&gt; is open.'));
  const record = (await read(apiKey, input.decisionId)).body;
  assert.deepEqual([record.status, record.answer, record.answeredBy?.kind, record.answeredBy?.id, record.answeredBy?.channel], ['answered', 'The <window> is open', 'email', writer, 'email']);
});

test('opening a link changes nothing but the record (a viewed entry); its POST answers as the address and wakes the waiting caller', async () => {
  const { apiKey } = await createWorkspace();
  const to = address('approver');
  const decision = await open(apiKey, { question: 'Deploy 4.2?', toolName: 'deploy', toolTarget: 'prod', approvers: [{ kind: 'email', id: to }] });
  const approve = linksOf(await mailpit.waitForMessage(to)).get('Approve') as string;

  const page = await getPage(approve);
  assert.equal(page.status, 200);
  assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.equal(page.headers.get('cache-control'), 'no-store');
  assert.equal(page.headers.get('referrer-policy'), 'same-origin');
  assert.match(page.headers.get('content-security-policy') ?? '', /form-action 'self'/);
  assert.ok(page.html.includes("<strong>Approve &#39;Deploy 4.2?&#39;?</strong>"));
  assert.ok(page.html.includes(`<form method="post" action="${pathOf(approve)}"><button type="submit">Confirm: Approve</button></form>`));
  assert.ok(page.html.includes('<dt>Tool</dt><dd>deploy</dd><dt>Target</dt><dd>prod</dd>'));
  // A scanner's second fetch: still nothing answered.
  assert.equal((await getPage(approve)).status, 200);
  assert.deepEqual([(await read(apiKey, decision.decisionId)).body.status], ['pending']);
  const viewed = await eventsOf(decision.decisionId, 'viewed');
  assert.equal(viewed.length, 2);
  assert.deepEqual(viewed[0], { actor: { kind: 'email', id: to, displayName: to, channel: 'email' }, detail: { surface: 'email_link' } });

  const waiting = read(apiKey, decision.decisionId, true);
  await waiterHeld(decision.decisionId);
  const posted = await postPage(approve);
  assert.equal(posted.status, 200, posted.html);
  assert.ok(posted.html.includes('Your answer was recorded: Approve.'));
  const woken = (await waiting).body;
  assert.deepEqual([woken.status, woken.answer, woken.approved], ['answered', 'yes', true]);
  assert.deepEqual({ ...woken.answeredBy, at: undefined }, { kind: 'email', id: to, displayName: to, channel: 'email', at: undefined });
  assert.ok(!Number.isNaN(Date.parse(woken.answeredBy?.at ?? '')));
});

test('an ask with an email approver: GET /ask/{id}?wait is woken by the link', async () => {
  const { apiKey } = await createWorkspace();
  const to = address('asked');
  const asked = await call<AskRecord>(stack.gatewayUrl, `${SERVER_API}/ask`, { method: 'POST', key: apiKey, body: { question: 'Merge the branch?', wait: false, approvers: [{ kind: 'email', id: to }] } });
  assert.equal(asked.status, 200, JSON.stringify(asked.body));
  const reject = linksOf(await mailpit.waitForMessage(to)).get('Reject') as string;
  const waiting = call<AskRecord>(stack.gatewayUrl, `${SERVER_API}/ask/${asked.body.correlationId}?wait=30`, { key: apiKey });
  await waiterHeld(asked.body.correlationId);
  assert.equal((await postPage(reject)).status, 200);
  const woken = (await waiting).body;
  assert.deepEqual([woken.status, woken.value, woken.answeredBy?.kind, woken.answeredBy?.id, woken.answeredBy?.channel], ['answered', 'no', 'email', to, 'email']);
});

test('a used link is 409; the other link of an answered question is 409 too; nothing changes', async () => {
  const { apiKey } = await createWorkspace();
  const to = address('once');
  const decision = await open(apiKey, { approvers: [{ kind: 'email', id: to }] });
  const links = linksOf(await mailpit.waitForMessage(to));
  const approve = links.get('Approve') as string;
  // The link gives its own answer: another one in the form is refused.
  const other = await call<Record<string, unknown>>(stack.gatewayUrl, pathOf(approve), { method: 'POST', rawBody: 'answer=no', headers: { origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' } });
  assert.deepEqual([other.status, other.body.code, other.body.fields], [400, 'invalid_request', [{ field: 'answer', in: 'body', problem: 'must be the answer the link names' }]]);
  assert.equal((await postPage(approve)).status, 200);

  const again = await postPage(approve);
  assert.equal(again.status, 409);
  assert.ok(again.html.includes('This link was already used'));
  const api = await postApi(approve);
  assert.deepEqual([api.status, api.body.code, api.body.error, api.body.reason], [409, 'conflict', 'Link already used', 'link_used']);
  const opened = await getPage(approve);
  assert.equal(opened.status, 409);
  assert.ok(!opened.html.includes('<form'));

  const reject = await postPage(links.get('Reject') as string);
  assert.equal(reject.status, 409);
  assert.ok(reject.html.includes(`This decision was already answered by ${to}: Approve.`));
  const record = (await read(apiKey, decision.decisionId)).body;
  assert.deepEqual([record.status, record.answer], ['answered', 'yes']);
  assert.equal((await eventsOf(decision.decisionId, 'answered')).length, 1);
});

test('a forged or altered link is 404, as a page and in the error shape', async () => {
  const { apiKey } = await createWorkspace();
  const to = address('forged');
  const decision = await open(apiKey, { approvers: [{ kind: 'email', id: to }] });
  const approve = linksOf(await mailpit.waitForMessage(to)).get('Approve') as string;
  const [id, recipient, , mac] = pathOf(approve).slice(3).split('.');
  const rejectChoice = Buffer.from('c:no').toString('base64url');
  const forgeries = [
    `${id}.${recipient}.${rejectChoice}.${mac}`, // the answer changed
    `${id}.${Buffer.from(`email:${address('mallory')}`).toString('base64url')}.${rejectChoice}.${mac}`, // the recipient changed
    `${id}.${'A'.repeat(43)}`,
    'nothing',
  ];
  // A genuine answer-page link is not an email link: its page is /a/.
  const answerPage = (await read(apiKey, decision.decisionId)).body as unknown as { decisionPageUrl: string };
  const pageToken = new URL(answerPage.decisionPageUrl).pathname.slice(3);
  const wrongPage = await getPage(`${ORIGIN}/e/${pageToken}`);
  assert.equal(wrongPage.status, 404);
  assert.ok(wrongPage.html.includes('This link is not valid'));
  for (const token of forgeries) {
    const link = `${ORIGIN}/e/${token}`;
    const page = await getPage(link);
    assert.equal(page.status, 404, token);
    assert.ok(page.html.includes('This link is not valid'));
    assert.equal((await postPage(link)).status, 404);
    const api = await postApi(link);
    assert.deepEqual([api.status, api.body.code], [404, 'not_found']);
  }
  assert.equal((await read(apiKey, decision.decisionId)).body.status, 'pending');
  // Nothing was opened: a forged link records no view.
  assert.deepEqual(await eventsOf(decision.decisionId, 'viewed'), []);
});

test('an expired question: the page says so and its POST is 409', async () => {
  const { apiKey } = await createWorkspace();
  const to = address('late');
  const decision = await open(apiKey, { approvers: [{ kind: 'email', id: to }] });
  const approve = linksOf(await mailpit.waitForMessage(to)).get('Approve') as string;
  const db = await connectDatabase();
  try {
    await db.query(`UPDATE decision.questions SET expires_at = now() - interval '1 second', created_at = now() - interval '2 seconds' WHERE id = $1`, [decision.decisionId]);
  } finally {
    await db.end();
  }
  const page = await getPage(approve);
  assert.equal(page.status, 200);
  assert.ok(page.html.includes('This decision expired without an answer; it can no longer be answered.'));
  assert.ok(!page.html.includes('<form'));
  const posted = await postPage(approve);
  assert.equal(posted.status, 409);
  assert.ok(posted.html.includes('This decision expired without an answer'));
  const api = await postApi(approve);
  assert.deepEqual([api.status, api.body.code, api.body.error], [409, 'conflict', 'Expired']);
  assert.equal((await read(apiKey, decision.decisionId)).body.status, 'expired');
});

test('a cross-site POST is refused (403) and answers nothing', async () => {
  const { apiKey } = await createWorkspace();
  const to = address('csrf');
  const decision = await open(apiKey, { approvers: [{ kind: 'email', id: to }] });
  const approve = linksOf(await mailpit.waitForMessage(to)).get('Approve') as string;
  for (const headers of [{ 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }, { origin: 'https://evil.example' }, { origin: 'null' }]) {
    const refused = await fetch(`${stack.gatewayUrl}${pathOf(approve)}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: '' });
    assert.equal(refused.status, 403, JSON.stringify(headers));
    const body = (await refused.json()) as Record<string, unknown>;
    assert.deepEqual([body.code, body.error], ['forbidden', 'CSRF check failed']);
  }
  assert.equal((await read(apiKey, decision.decisionId)).body.status, 'pending');
  // The page's own post (Origin null from a no-referrer page is accepted only with Sec-Fetch-Site: same-origin).
  assert.equal((await postPage(approve, {}, { origin: 'null', 'sec-fetch-site': 'same-origin' })).status, 200);
});

test('an address no longer among the approvers is refused (403), recorded as a refused attempt', async () => {
  const { apiKey } = await createWorkspace();
  const [first, second] = [address('former'), address('current')];
  const decision = await open(apiKey, { approvers: [{ kind: 'email', id: first }] });
  const approve = linksOf(await mailpit.waitForMessage(first)).get('Approve') as string;
  const db = await connectDatabase();
  try {
    await db.query(`UPDATE decision.questions SET approvers = $2 WHERE id = $1`, [decision.decisionId, JSON.stringify([{ kind: 'email', id: second }])]);
  } finally {
    await db.end();
  }
  const page = await postPage(approve);
  assert.equal(page.status, 403);
  assert.ok(page.html.includes('Your address is no longer among the people who may answer this question.'));
  const api = await postApi(approve);
  assert.deepEqual([api.status, api.body.code], [403, 'forbidden']);
  assert.equal((await read(apiKey, decision.decisionId)).body.status, 'pending');
  const refused = await eventsOf(decision.decisionId, 'refused');
  assert.equal(refused.length, 2);
  assert.deepEqual(refused[0]?.actor, { kind: 'email', id: first, displayName: first, channel: 'email' });
});

test('the answer page records a viewed entry too', async () => {
  const { apiKey } = await createWorkspace();
  const decision = await open(apiKey, {});
  const token = (await read(apiKey, decision.decisionId)).body as unknown as { decisionPageUrl: string };
  const response = await fetch(`${stack.gatewayUrl}${new URL(token.decisionPageUrl).pathname}`);
  assert.equal(response.status, 200);
  const viewed = await eventsOf(decision.decisionId, 'viewed');
  assert.deepEqual(viewed, [{ actor: { kind: 'link', id: '', displayName: 'the holder of the answer link', channel: 'answer_page' }, detail: { surface: 'answer_page' } }]);
});

test('RecordQuestionView over gRPC: only by a token, only for a known surface; a forged token is not found', async () => {
  // A replica of the decision service on a known port, for the gRPC side.
  const port = await freePort();
  await stack.startService('decision', { GRPC_PORT: String(port) });
  const decision = createClient(DecisionServiceClient, `127.0.0.1:${port}`);
  try {
    const { apiKey, workspaceId } = await createWorkspace();
    const opened = await open(apiKey, {});
    const page = (await read(apiKey, opened.decisionId)).body as unknown as { decisionPageUrl: string };
    const token = new URL(page.decisionPageUrl).pathname.slice(3);
    const refused = async (request: Parameters<typeof decision.recordQuestionView>[0], code: string, message: string) => {
      const err = await decision.recordQuestionView(request).then(
        () => undefined,
        (error: unknown) => error,
      );
      assert.ok(err instanceof HeraldError, String(err));
      assert.deepEqual([err.code, err.message], [code, message]);
    };
    await refused(
      { ref: { by: { $case: 'owned', value: { workspaceId, kind: QuestionKind.QUESTION_KIND_DECISION, id: opened.decisionId, externalIdScope: '' } } }, surface: 'answer_page' },
      'invalid_request',
      'ref must be a token: a view is of a page opened by its link',
    );
    await refused({ ref: { by: { $case: 'token', value: token } }, surface: 'inbox' }, 'invalid_request', 'surface must be one of answer_page, email_link');
    await refused({ ref: { by: { $case: 'token', value: `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}` } }, surface: 'answer_page' }, 'not_found', 'No such question.');
    await refused({ ref: { by: { $case: 'token', value: token } }, surface: 'email_link' }, 'not_found', 'No such link.');
    const viewed = await decision.recordQuestionView({ ref: { by: { $case: 'token', value: token } }, surface: 'answer_page' });
    assert.deepEqual([viewed.question?.id, viewed.emailLink], [opened.decisionId, undefined]);
    assert.equal((await eventsOf(opened.decisionId, 'viewed')).length, 1);
  } finally {
    decision.close();
  }
});
