import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { ValidationError, type Herald } from '@herald/sdk';
import { pendingQuestionId, type SendingHarness, type TestWorkspace } from '@herald/testkit';
import type { z } from 'zod';

import { ASK_USER, askUser, SEND_NOTIFICATION, sendNotification } from '../src/index.js';
import { linkAnswerStatus, policyWorkspace, reviewerOf, startAgentsHarness } from './support.js';

// The tools' arguments are bounded as the API bounds them (src/fields.gen.ts, generated from the
// OpenAPI document): the longest the API takes goes through; what the API refuses, the tool's
// schema refuses too, naming the same field.

let harness: SendingHarness;
let herald: Herald;
let workspace: TestWorkspace;
before(async () => {
  harness = await startAgentsHarness();
  ({ herald, workspace } = await policyWorkspace(harness));
});
after(() => harness?.stop());

/** The paths the schema finds wrong (none: it takes the input). */
function refusedAt(schema: z.ZodType, input: unknown): string[] {
  const parsed = schema.safeParse(input);
  return parsed.success ? [] : parsed.error.issues.map((issue) => issue.path.join('.'));
}

/** The fields the API names when it refuses `request` (400). */
async function apiRefusesAt(request: () => Promise<unknown>): Promise<string[]> {
  const error = await request().then(
    () => assert.fail('the API took it'),
    (err: unknown) => err,
  );
  assert.ok(error instanceof ValidationError, String(error));
  return error.fields.map((problem) => problem.field);
}

test('send_notification takes a 256-character title and refuses what the API refuses', async () => {
  const title = 't'.repeat(256);
  const input = SEND_NOTIFICATION.inputSchema.parse({ title, body: 'b', url: 'https://example.com/deploys/42' });
  const sent = await sendNotification(herald, input);
  const notification = await herald.getNotification(sent.campaignId);
  assert.deepEqual([sent.status, notification.title, notification.url], ['queued', title, 'https://example.com/deploys/42']);

  const cases: Array<[{ title: string; body: string; url?: string }, string]> = [
    [{ title: 't'.repeat(257), body: 'b' }, 'title'],
    [{ title: 't', body: 'b'.repeat(2_049) }, 'body'],
    [{ title: 't', body: 'b', url: 'https://example.com/a b' }, 'url'],
    [{ title: 't', body: 'b', url: 'ftp://example.com/a' }, 'url'],
  ];
  for (const [request, field] of cases) {
    assert.deepEqual(refusedAt(SEND_NOTIFICATION.inputSchema, request), [field], JSON.stringify(request).slice(0, 80));
    assert.deepEqual(await apiRefusesAt(() => herald.send(request)), [field]);
  }
});

test('ask_user refuses what the API refuses, naming the same field', async () => {
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ question: 'q'.repeat(501) }, 'question'],
    [{ question: 'Which?', type: 'select', options: ['eu', 'eu'] }, 'options'],
    [{ question: 'Which?', type: 'select', options: Array.from({ length: 21 }, (_, index) => String(index)) }, 'options'],
    [{ question: 'Which?', type: 'select', options: ['eu', 'o'.repeat(201)] }, 'options.1'],
    [{ question: 'Which?', type: 'choose' }, 'type'],
    [{ question: 'Why?', type: 'input', placeholder: 'p'.repeat(201) }, 'placeholder'],
    [{ question: 'Go?', context: 'c'.repeat(2_001) }, 'context'],
    [{ question: 'Go?', agentName: 'a'.repeat(101) }, 'agentName'],
    [{ question: 'Go?', approvers: Array.from({ length: 21 }, (_, index) => ({ kind: 'email', id: `ops${index}@example.com` })) }, 'approvers'],
    [{ question: 'Go?', approvers: [{ kind: 'fax', id: '555' }] }, 'approvers.0.kind'],
    [{ question: 'Go?', approvers: [{ kind: 'email', id: '' }] }, 'approvers.0.id'],
    [{ question: 'Go?', approvers: [{ kind: 'email', id: `${'o'.repeat(309)}@example.com` }] }, 'approvers.0.id'],
    [{ question: 'Go?', escalation: [{ afterSeconds: 0 }] }, 'escalation.0.afterSeconds'],
    [{ question: 'Go?', escalation: [{ afterSeconds: 60, channels: ['email', 'email'] }] }, 'escalation.0.channels'],
    [{ question: 'Go?', escalation: [{ afterSeconds: 60, approvers: [{ kind: 'pager', id: 'ops' }] }] }, 'escalation.0.approvers.0.kind'],
    [{ question: 'Go?', escalation: Array.from({ length: 6 }, (_, index) => ({ afterSeconds: 60 * (index + 1) })) }, 'escalation'],
  ];
  for (const [question, field] of cases) {
    assert.deepEqual(refusedAt(ASK_USER.inputSchema, question), [field], JSON.stringify(question).slice(0, 80));
    assert.deepEqual(await apiRefusesAt(() => herald.ask({ ...question, wait: false } as Parameters<Herald['ask']>[0])), [field]);
  }
  // How long one call may wait is the API's: 55 s.
  assert.deepEqual(refusedAt(ASK_USER.inputSchema, { question: 'Go?', timeoutMs: 55_000 }), []);
  assert.deepEqual(refusedAt(ASK_USER.inputSchema, { question: 'Go?', timeoutMs: 55_001 }), ['timeoutMs']);
});

test('ask_user with approvers: the link the agent holds is refused, the approver answers, and the result names who answered', async () => {
  const reviewer = await reviewerOf(harness, workspace);
  const input = ASK_USER.inputSchema.parse({
    question: 'Rotate the signing key?',
    approvers: [{ kind: 'key', id: reviewer.keyId }],
    escalation: [{ afterSeconds: 300, channels: ['email'], approvers: [{ kind: 'email', id: 'cto@example.com' }] }],
    timeoutMs: 30_000,
  });
  const asking = askUser(herald, input);
  const asked = await herald.getAsk(await pendingQuestionId(workspace.workspaceId, 'ask'));
  assert.deepEqual([asked.question, asked.approvers, asked.escalation], [
    'Rotate the signing key?',
    [{ kind: 'key', id: reviewer.keyId }],
    [{ afterSeconds: 300, channels: ['email'], approvers: [{ kind: 'email', id: 'cto@example.com' }] }],
  ]);
  assert.equal(await linkAnswerStatus(harness, asked, 'yes'), 403);
  assert.equal((await herald.getAsk(asked.correlationId)).status, 'pending');
  const answered = await reviewer.herald.answerAsk(asked.correlationId, 'yes');
  const record = await asking;
  const at = answered.answeredBy?.at ?? '';
  assert.match(at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.deepEqual([record.status, record.value, record.answeredBy], ['answered', 'yes', { kind: 'key', id: reviewer.keyId, displayName: reviewer.keyId, channel: 'api', at }]);
});
