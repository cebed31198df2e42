import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Herald, type AskRecord, type SendResult } from '@herald/sdk';
import { freePort, pendingQuestionId, type SendingHarness } from '@herald/testkit';
import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { InMemoryStore } from '@mastra/core/storage';
import { MastraLanguageModelV2Mock } from '@mastra/core/test-utils/llm-mock';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';

import { HeraldGate, isPendingDecision } from '../src/index.js';
import { gateTool, heraldTools, resumeWhenDecided } from '../src/mastra/index.js';
import { linkAnswerStatus, personAnswers, policyWorkspace, reviewerOf, startAgentsHarness } from './support.js';

// A Mastra Agent's own loop with Mastra's own mock (AI SDK) language model: it calls one tool, then answers with
// the tool's result as text once it sees it. Herald runs for real.

let harness: SendingHarness;
before(async () => {
  harness = await startAgentsHarness();
});
after(() => harness?.stop());

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };

/** One tool call, or the last tool result as text. */
function scriptedModel(toolName: string, input: unknown, callId = 'call-1') {
  return new MastraLanguageModelV2Mock({
    doGenerate: async ({ prompt }) => {
      const last = prompt.at(-1);
      if (last?.role === 'tool') {
        const [part] = last.content;
        const text = part?.type === 'tool-result' ? JSON.stringify(part.output) : 'no result';
        return { content: [{ type: 'text', text }], finishReason: 'stop', usage, warnings: [] };
      }
      return { content: [{ type: 'tool-call', toolCallId: callId, toolName, input: JSON.stringify(input) }], finishReason: 'tool-calls', usage, warnings: [] };
    },
  });
}

const DEPLOY = { service: 'api', replicas: 3, labels: ['blue', 'green'] };

function deployTool(ran: unknown[]) {
  return createTool({
    id: 'deploy',
    description: 'Deploy a service',
    inputSchema: z.object({ service: z.string(), replicas: z.number(), labels: z.array(z.string()) }),
    execute: async (input) => (ran.push(input), `deployed ${input.service}`),
  });
}

const agentWith = (model: MastraLanguageModelV2Mock, tools: ConstructorParameters<typeof Agent>[0]['tools']) => new Agent({ id: 'ops-agent', name: 'ops-agent', instructions: 'Operate.', model, tools });

test('send_notification and ask_user: the model calls them, Herald sends and asks', async () => {
  const { herald } = await policyWorkspace(harness);
  const result = await agentWith(scriptedModel('send_notification', { title: 'Build finished', body: 'All green' }), heraldTools(herald)).generate('Tell them.', { maxSteps: 3 });
  const output = JSON.parse(result.text) as { type: string; value: SendResult };
  assert.deepEqual({ success: output.value.success, status: output.value.status, sent: output.value.sent }, { success: true, status: 'queued', sent: 1 });
  assert.equal((await herald.getNotification(output.value.campaignId)).title, 'Build finished');
  const asked = await agentWith(scriptedModel('ask_user', { question: 'Ship it?', wait: false }), heraldTools(herald)).generate('Ask them.', { maxSteps: 3 });
  const record = (JSON.parse(asked.text) as { value: AskRecord }).value;
  assert.deepEqual({ question: record.question, status: record.status }, { question: 'Ship it?', status: 'pending' });
});

test('without storage to resume from, the gate waits for the person inside the call: yes runs the tool with those arguments; no, cancel and silence run nothing', async () => {
  const { herald, workspace } = await policyWorkspace(harness);
  const ran: unknown[] = [];
  const gate = new HeraldGate({ herald, actor: 'ops-agent', waitTimeoutMs: 30_000 });
  const agent = (callId: string, waiting = gate) => agentWith(scriptedModel('deploy', DEPLOY, callId), { deploy: gateTool(waiting, deployTool(ran)) });

  const approving = agent('call-yes').generate('Deploy the api.', { maxSteps: 3 });
  const decision = await herald.getDecision(await pendingQuestionId(workspace.workspaceId, 'decision'));
  assert.deepEqual({ toolName: decision.toolName, parameters: decision.parameters }, { toolName: 'deploy', parameters: { service: 'api', replicas: 3, labels: '["blue","green"]' } });
  assert.deepEqual(ran, []);
  await personAnswers(harness, decision, 'yes');
  assert.equal((await approving).text, JSON.stringify({ type: 'json', value: { approval: 'approved by the holder of the answer link', result: 'deployed api' } }));
  assert.deepEqual(ran, [DEPLOY]);

  const refusing = agent('call-no').generate('Deploy the api.', { maxSteps: 3 });
  await personAnswers(harness, await herald.getDecision(await pendingQuestionId(workspace.workspaceId, 'decision')), 'no');
  const cancelling = agent('call-cancel').generate('Deploy the api.', { maxSteps: 3 });
  await herald.cancelDecision(await pendingQuestionId(workspace.workspaceId, 'decision'));
  const silent = agent('call-silent', new HeraldGate({ herald, waitTimeoutMs: 1_000 })).generate('Deploy the api.', { maxSteps: 3 });
  const texts = [(await refusing).text, (await cancelling).text, (await silent).text];
  assert.deepEqual(texts, [
    JSON.stringify({ type: 'error-text', value: 'Herald refused deploy: the holder of the answer link answered "no"' }),
    JSON.stringify({ type: 'error-text', value: 'Herald refused deploy: the decision was cancelled' }),
    JSON.stringify({ type: 'error-text', value: 'Herald refused deploy: the decision was cancelled' }),
  ]);
  assert.deepEqual(ran, [DEPLOY]);
});

test('allow runs at once, deny refuses with the policy reason, and an error from Herald runs nothing', async () => {
  const { herald } = await policyWorkspace(harness);
  const ran: unknown[] = [];
  const readFile = createTool({ id: 'read_file', description: 'Read a file', inputSchema: z.object({ path: z.string() }), execute: async (input) => (ran.push(input), `contents of ${input.path}`) });
  const dropDatabase = createTool({ id: 'drop_database', description: 'Drop a database', inputSchema: z.object({ name: z.string() }), execute: async (input) => (ran.push(input), 'dropped') });
  const gate = new HeraldGate({ herald });
  const allowed = await agentWith(scriptedModel('read_file', { path: 'README.md' }), { read_file: gateTool(gate, readFile) }).generate('Read it.', { maxSteps: 3 });
  assert.equal(allowed.text, JSON.stringify({ type: 'text', value: 'contents of README.md' }));
  const denied = await agentWith(scriptedModel('drop_database', { name: 'prod' }), { drop_database: gateTool(gate, dropDatabase) }).generate('Drop it.', { maxSteps: 3 });
  assert.equal(denied.text, JSON.stringify({ type: 'error-text', value: 'Herald refused drop_database: denied by policy: no policy permits this call' }));

  const unreachable = new HeraldGate({ herald: new Herald({ apiKey: 'pk_aaaaaaaaaaaaaaaa.bbbb', baseUrl: `http://127.0.0.1:${await freePort()}` }) });
  const broken = await agentWith(scriptedModel('read_file', { path: 'secrets' }), { read_file: gateTool(unreachable, readFile) }).generate('Read it.', { maxSteps: 3 });
  assert.equal(broken.text, JSON.stringify({ type: 'error-text', value: 'fetch failed' }));
  assert.deepEqual(ran, [{ path: 'README.md' }]);
});

/** The agent registered with a Mastra whose storage keeps suspended runs (what a restart resumes from). */
function registered(model: MastraLanguageModelV2Mock, tools: ConstructorParameters<typeof Agent>[0]['tools'], storage: InMemoryStore): Agent {
  const agent = agentWith(model, tools);
  new Mastra({ agents: { ops: agent }, storage, logger: false });
  return agent;
}

test("with storage the call suspends the run; a new process resumes it once the named approver says yes (the link is refused), the tool runs with those arguments and the model is told who approved", async () => {
  const { herald, workspace } = await policyWorkspace(harness);
  const reviewer = await reviewerOf(harness, workspace);
  const approvers = [{ kind: 'key' as const, id: reviewer.keyId }];
  const ran: unknown[] = [];
  const storage = new InMemoryStore();
  const gate = new HeraldGate({ herald, actor: 'ops-agent', scope: 'thread-m', approvers });
  const first = await registered(scriptedModel('deploy', DEPLOY), { deploy: gateTool(gate, deployTool(ran)) }, storage).generate('Deploy the api.', { maxSteps: 3 });
  assert.equal(first.finishReason, 'suspended');
  const pending: unknown = (first.suspendPayload as { suspendPayload?: unknown } | undefined)?.suspendPayload;
  assert.ok(isPendingDecision(pending));
  const decision = await herald.getDecision(await pendingQuestionId(workspace.workspaceId, 'decision'));
  assert.deepEqual({ id: pending.decisionId, toolName: pending.toolName, toolCallId: pending.toolCallId }, { id: decision.decisionId, toolName: 'deploy', toolCallId: 'call-1' });
  assert.deepEqual(ran, []);
  assert.deepEqual(decision.approvers, approvers);
  assert.equal(await resumeWhenDecided(gate, pending, { waitTimeoutMs: 500 }), null);
  assert.equal(await linkAnswerStatus(harness, decision, 'yes'), 403);
  await reviewer.herald.answerDecision(decision.decisionId, 'yes');

  // Another process: new client, agent and Mastra on the same storage.
  const restartedGate = new HeraldGate({ herald: new Herald({ apiKey: workspace.apiKey, baseUrl: harness.stack.gatewayUrl }), actor: 'ops-agent', scope: 'thread-m', approvers });
  const restarted = registered(scriptedModel('deploy', DEPLOY), { deploy: gateTool(restartedGate, deployTool(ran)) }, storage);
  const [suspended] = (await restarted.listSuspendedRuns({})).runs;
  assert.equal(suspended?.runId, first.runId);
  const resumeData = await resumeWhenDecided(restartedGate, pending, { waitTimeoutMs: 5_000 });
  assert.deepEqual(resumeData, { decisionId: decision.decisionId, status: 'answered' });
  const resumed = await restarted.resumeGenerate(resumeData, { runId: first.runId, maxSteps: 3 });
  assert.equal(resumed.text, JSON.stringify({ type: 'json', value: { approval: `approved by ${reviewer.keyId} (key via api)`, result: 'deployed api' } }));
  assert.deepEqual(ran, [DEPLOY]);
});

test('with storage: no, and a resume before anyone answered, run nothing', async () => {
  const { herald, workspace } = await policyWorkspace(harness);
  const ran: unknown[] = [];
  const storage = new InMemoryStore();
  const gate = new HeraldGate({ herald });
  const agent = (callId: string) => registered(scriptedModel('deploy', DEPLOY, callId), { deploy: gateTool(gate, deployTool(ran)) }, storage);

  const refused = await agent('call-no').generate('Deploy the api.', { maxSteps: 3 });
  await personAnswers(harness, await herald.getDecision(await pendingQuestionId(workspace.workspaceId, 'decision')), 'no');
  const afterNo = await agent('call-no').resumeGenerate({ status: 'answered' }, { runId: refused.runId, maxSteps: 3 });
  assert.equal(afterNo.text, JSON.stringify({ type: 'error-text', value: 'Herald refused deploy: the holder of the answer link answered "no"' }));

  // Resumed with made-up data while the decision is still open: silence, not approval.
  const early = await agent('call-early').generate('Deploy the api.', { maxSteps: 3 });
  const resumedEarly = await agent('call-early').resumeGenerate({ decisionId: 'dec_forged', status: 'answered' }, { runId: early.runId, maxSteps: 3 });
  assert.equal(resumedEarly.text, JSON.stringify({ type: 'error-text', value: 'Herald refused deploy: no answer yet; silence is never approval' }));
  assert.deepEqual(ran, []);
});
