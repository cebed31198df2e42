import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { APIConnectionError, Herald, type AskRecord, type SendResult } from '@herald/sdk';
import { expireQuestion, freePort, pendingQuestionId, type SendingHarness } from '@herald/testkit';
import { Agent, run, RunState, setTracingDisabled, tool, ToolCallError, Usage, type AgentInputItem, type Model, type ModelRequest, type ModelResponse } from '@openai/agents';
import { z } from 'zod';

import { HeraldGate } from '../src/index.js';
import { answerInterruptions, gateTool, heraldTools } from '../src/openai-agents/index.js';
import { linkAnswerStatus, personAnswers, policyWorkspace, reviewerOf, startAgentsHarness } from './support.js';

// The OpenAI Agents SDK's own runner with a scripted Model: it calls one tool, then answers with
// the text of the tool's output once it sees it. Herald runs for real.

setTracingDisabled(true);

let harness: SendingHarness;
before(async () => {
  harness = await startAgentsHarness();
});
after(() => harness?.stop());

const isResult = (item: AgentInputItem) => item.type === 'function_call_result';

class ScriptedModel implements Model {
  constructor(
    readonly toolName: string,
    readonly input: unknown,
    readonly callId = 'call-1',
  ) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const items = typeof request.input === 'string' ? [] : request.input;
    const result = items.findLast(isResult);
    if (result?.type === 'function_call_result') {
      const { output } = result;
      const text = typeof output === 'string' ? output : !Array.isArray(output) && output.type === 'text' ? output.text : JSON.stringify(output);
      return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] }] };
    }
    return { usage: new Usage(), output: [{ type: 'function_call', callId: this.callId, name: this.toolName, arguments: JSON.stringify(this.input), status: 'completed' }] };
  }

  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('the tests do not stream');
  }
}

const DEPLOY = { service: 'api', replicas: 3, labels: ['blue', 'green'] };

function deployTool(ran: unknown[]) {
  return tool({
    name: 'deploy',
    description: 'Deploy a service',
    parameters: z.object({ service: z.string(), replicas: z.number(), labels: z.array(z.string()) }),
    execute: async (input) => (ran.push(input), `deployed ${input.service}`),
  });
}

test('send_notification and ask_user: the model calls them, Herald sends and asks', async () => {
  const { herald } = await policyWorkspace(harness);
  const agent = new Agent({ name: 'notifier', model: new ScriptedModel('send_notification', { title: 'Build finished', body: 'All green', url: null, context: null }), tools: heraldTools(herald) });
  const result = await run(agent, 'Tell them the build finished.');
  const sent = JSON.parse(String(result.finalOutput)) as SendResult;
  assert.deepEqual({ success: sent.success, status: sent.status, sent: sent.sent }, { success: true, status: 'queued', sent: 1 });
  const notification = await herald.getNotification(sent.campaignId);
  assert.deepEqual({ title: notification.title, body: notification.body }, { title: 'Build finished', body: 'All green' });

  // A strict-mode model sends null for every argument it leaves out.
  const asker = new Agent({ name: 'asker', model: new ScriptedModel('ask_user', { question: 'Ship it?', type: null, options: null, context: null, placeholder: null, agentName: null, wait: false, timeoutMs: null }), tools: heraldTools(herald) });
  const asked = JSON.parse(String((await run(asker, 'Ask them.')).finalOutput)) as AskRecord;
  assert.deepEqual({ question: asked.question, type: asked.type, status: asked.status }, { question: 'Ship it?', type: 'confirm', status: 'pending' });
});

test("the gate interrupts the run; the state is saved, restored in a new process, answered from Herald by the named approver (the link is refused), the tool runs with the approved arguments and the model is told who approved", async () => {
  const { herald, workspace } = await policyWorkspace(harness);
  const reviewer = await reviewerOf(harness, workspace);
  const approvers = [{ kind: 'key' as const, id: reviewer.keyId }];
  const ran: unknown[] = [];
  const gate = new HeraldGate({ herald, actor: 'ops-agent', scope: 'thread-1', approvers });
  const agent = new Agent({ name: 'ops-agent', model: new ScriptedModel('deploy', DEPLOY), tools: [gateTool(gate, deployTool(ran))] });
  const first = await run(agent, 'Deploy the api.');
  assert.equal(first.interruptions.length, 1);
  assert.equal(first.interruptions[0]?.name, 'deploy');
  assert.deepEqual(ran, []);
  const saved = first.state.toString();
  // Nobody has answered: nothing is approved or rejected.
  assert.equal(await answerInterruptions(gate, first.state, { waitTimeoutMs: 500 }), false);

  const decision = await herald.getDecision(await pendingQuestionId(workspace.workspaceId, 'decision'));
  assert.deepEqual(
    { question: decision.question, toolName: decision.toolName, parameters: decision.parameters, approvers: decision.approvers },
    { question: 'Allow ops-agent to call deploy?', toolName: 'deploy', parameters: { service: 'api', replicas: 3, labels: '["blue","green"]' }, approvers },
  );
  assert.equal(await linkAnswerStatus(harness, decision, 'yes'), 403);
  await reviewer.herald.answerDecision(decision.decisionId, 'yes');

  // Another process: a new client, the agent rebuilt, the state from storage.
  const restartedGate = new HeraldGate({ herald: new Herald({ apiKey: workspace.apiKey, baseUrl: harness.stack.gatewayUrl }), actor: 'ops-agent', scope: 'thread-1', approvers });
  const restartedAgent = new Agent({ name: 'ops-agent', model: new ScriptedModel('deploy', DEPLOY), tools: [gateTool(restartedGate, deployTool(ran))] });
  const state = await RunState.fromString(restartedAgent, saved);
  assert.equal(await answerInterruptions(restartedGate, state, { waitTimeoutMs: 5_000 }), true);
  const resumed = await run(restartedAgent, state);
  assert.equal(resumed.finalOutput, JSON.stringify({ approval: `approved by ${reviewer.keyId} (key via api)`, result: 'deployed api' }));
  assert.deepEqual(ran, [DEPLOY]);
});

test('no, expiry and cancel reject the interruption with the reason the model sees; a forged approval still runs nothing', async () => {
  const { herald, workspace } = await policyWorkspace(harness);
  const ran: unknown[] = [];
  const gate = new HeraldGate({ herald, waitTimeoutMs: 1_000 });
  const agentFor = (callId: string) => new Agent({ name: 'ops-agent', model: new ScriptedModel('deploy', DEPLOY, callId), tools: [gateTool(gate, deployTool(ran))] });

  const refusals: string[] = [];
  for (const [callId, act] of [
    ['call-no', (id: string) => herald.getDecision(id).then((decision) => personAnswers(harness, decision, 'no'))],
    ['call-expired', (id: string) => expireQuestion(id)],
    ['call-cancelled', (id: string) => herald.cancelDecision(id).then(() => undefined)],
  ] as const) {
    const agent = agentFor(callId);
    const first = await run(agent, 'Deploy the api.');
    assert.equal(first.interruptions.length, 1);
    await act(await pendingQuestionId(workspace.workspaceId, 'decision'));
    assert.equal(await answerInterruptions(gate, first.state), true);
    refusals.push(String((await run(agent, first.state)).finalOutput));
  }
  assert.deepEqual(refusals, [
    'Herald refused deploy: the holder of the answer link answered "no"',
    'Herald refused deploy: the decision expired unanswered',
    'Herald refused deploy: the decision was cancelled',
  ]);

  // The application approves on its own: the gate finds Herald's decision still open, waits, withdraws it and refuses.
  const agent = agentFor('call-forged');
  const forging = await run(agent, 'Deploy the api.');
  const [item] = forging.interruptions;
  assert.ok(item);
  forging.state.approve(item);
  assert.equal((await run(agent, forging.state)).finalOutput, 'Herald refused deploy: the decision was cancelled');
  assert.deepEqual(ran, []);
});

test('allow runs at once, deny is refused with the policy reason, and an error from Herald fails the run with the typed error', async () => {
  const { herald } = await policyWorkspace(harness);
  const ran: unknown[] = [];
  const readFile = tool({ name: 'read_file', description: 'Read a file', parameters: z.object({ path: z.string() }), execute: async (input) => (ran.push(input), `contents of ${input.path}`) });
  const dropDatabase = tool({ name: 'drop_database', description: 'Drop a database', parameters: z.object({ name: z.string() }), execute: async (input) => (ran.push(input), 'dropped') });
  const gate = new HeraldGate({ herald });
  const allowed = await run(new Agent({ name: 'a', model: new ScriptedModel('read_file', { path: 'README.md' }), tools: [gateTool(gate, readFile)] }), 'Read it.');
  assert.deepEqual({ output: allowed.finalOutput, interruptions: allowed.interruptions.length }, { output: 'contents of README.md', interruptions: 0 });
  const denied = await run(new Agent({ name: 'a', model: new ScriptedModel('drop_database', { name: 'prod' }), tools: [gateTool(gate, dropDatabase)] }), 'Drop it.');
  assert.equal(denied.finalOutput, 'Herald refused drop_database: denied by policy: no policy permits this call');
  assert.deepEqual(ran, [{ path: 'README.md' }]);

  const unreachable = new HeraldGate({ herald: new Herald({ apiKey: 'pk_aaaaaaaaaaaaaaaa.bbbb', baseUrl: `http://127.0.0.1:${await freePort()}` }) });
  await assert.rejects(run(new Agent({ name: 'a', model: new ScriptedModel('read_file', { path: 'secrets' }), tools: [gateTool(unreachable, readFile)] }), 'Read it.'), (err: unknown) => {
    // The SDK wraps what a tool throws; the gate's own error is Herald's typed one.
    assert.ok(err instanceof ToolCallError, String(err));
    assert.ok(err.error instanceof APIConnectionError, String(err.error));
    return true;
  });
  assert.deepEqual(ran, [{ path: 'README.md' }]);
});
