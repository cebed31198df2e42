import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { ValidationError, type Herald } from '@herald/sdk';
import { type SendingHarness } from '@herald/testkit';
import type { z } from 'zod';

import { ASK_USER, SEND_NOTIFICATION, sendNotification } from '../src/index.js';
import { policyWorkspace, startAgentsHarness } from './support.js';

// The tools' arguments are bounded as the API bounds them (src/fields.gen.ts, generated from the
// OpenAPI document): the longest the API takes goes through; what the API refuses, the tool's
// schema refuses too, naming the same field.

let harness: SendingHarness;
let herald: Herald;
before(async () => {
  harness = await startAgentsHarness();
  ({ herald } = await policyWorkspace(harness));
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
  ];
  for (const [question, field] of cases) {
    assert.deepEqual(refusedAt(ASK_USER.inputSchema, question), [field], JSON.stringify(question).slice(0, 80));
    assert.deepEqual(await apiRefusesAt(() => herald.ask({ ...question, wait: false } as Parameters<Herald['ask']>[0])), [field]);
  }
  // How long one call may wait is the API's: 55 s.
  assert.deepEqual(refusedAt(ASK_USER.inputSchema, { question: 'Go?', timeoutMs: 55_000 }), []);
  assert.deepEqual(refusedAt(ASK_USER.inputSchema, { question: 'Go?', timeoutMs: 55_001 }), ['timeoutMs']);
});
