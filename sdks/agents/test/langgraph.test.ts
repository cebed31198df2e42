import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Herald, type AskRecord, type SendResult } from '@herald/sdk';
import { expireQuestion, freePort, pendingQuestionId, type SendingHarness } from '@herald/testkit';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { tool } from '@langchain/core/tools';
import { Command, MemorySaver } from '@langchain/langgraph';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';

import { HeraldGate, isPendingDecision, type PendingDecision } from '../src/index.js';
import { gateTool, heraldTools, resumeWhenDecided } from '../src/langgraph/index.js';
import { linkAnswerStatus, personAnswers, policyWorkspace, reviewerOf, startAgentsHarness } from './support.js';

// LangGraph's prebuilt ReAct agent (a real graph: model node, ToolNode, checkpointer) with a
// scripted LangChain chat model: it calls one tool, then repeats the tool's output as its answer.

let harness: SendingHarness;
before(async () => {
  harness = await startAgentsHarness();
});
after(() => harness?.stop());

class ScriptedChatModel extends BaseChatModel {
  constructor(
    readonly toolName: string,
    readonly args: Record<string, unknown>,
    readonly callId = 'call-1',
  ) {
    super({});
  }

  _llmType(): string {
    return 'scripted';
  }

  override bindTools(): this {
    return this;
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const last = messages.at(-1);
    const message = ToolMessage.isInstance(last)
      ? new AIMessage(typeof last.content === 'string' ? last.content : JSON.stringify(last.content))
      : new AIMessage({ content: '', tool_calls: [{ id: this.callId, name: this.toolName, args: this.args, type: 'tool_call' }] });
    return { generations: [{ text: '', message }] };
  }
}

const DEPLOY = { service: 'api', replicas: 3, labels: ['blue', 'green'] };

function deployTool(ran: unknown[]) {
  return tool(async (input) => (ran.push(input), `deployed ${input.service}`), {
    name: 'deploy',
    description: 'Deploy a service',
    schema: z.object({ service: z.string(), replicas: z.number(), labels: z.array(z.string()) }),
  });
}

const PROMPT = { messages: [{ role: 'user', content: 'Deploy the api.' }] };
const thread = (id: string) => ({ configurable: { thread_id: id } });

/** The answer the agent ended with: the last message's text. */
function answerOf(state: { messages: BaseMessage[] }): unknown {
  return state.messages.at(-1)?.content;
}

test('send_notification and ask_user: the model calls them, Herald sends and asks', async () => {
  const { herald } = await policyWorkspace(harness);
  const agent = createReactAgent({ llm: new ScriptedChatModel('send_notification', { title: 'Build finished', body: 'All green' }), tools: heraldTools(herald) });
  const sent = JSON.parse(String(answerOf(await agent.invoke({ messages: [{ role: 'user', content: 'Tell them.' }] })))) as SendResult;
  assert.deepEqual({ success: sent.success, status: sent.status, sent: sent.sent }, { success: true, status: 'queued', sent: 1 });
  assert.equal((await herald.getNotification(sent.campaignId)).title, 'Build finished');
  const asker = createReactAgent({ llm: new ScriptedChatModel('ask_user', { question: 'Ship it?', wait: false }), tools: heraldTools(herald) });
  const asked = JSON.parse(String(answerOf(await asker.invoke({ messages: [{ role: 'user', content: 'Ask them.' }] })))) as AskRecord;
  assert.deepEqual({ question: asked.question, status: asked.status }, { question: 'Ship it?', status: 'pending' });
});

test("the gate interrupts the graph; a new process resumes the checkpointed thread once the named approver says yes (the link is refused), the tool runs with those arguments and the model is told who approved", async () => {
  const { herald, workspace } = await policyWorkspace(harness);
  const reviewer = await reviewerOf(harness, workspace);
  const approvers = [{ kind: 'key' as const, id: reviewer.keyId }];
  const ran: unknown[] = [];
  const checkpointer = new MemorySaver();
  const gate = new HeraldGate({ herald, actor: 'ops-agent', scope: 'thread-a', approvers });
  const agent = createReactAgent({ llm: new ScriptedChatModel('deploy', DEPLOY), tools: [gateTool(gate, deployTool(ran))], checkpointer });
  await agent.invoke(PROMPT, thread('thread-a'));
  const paused = await agent.getState(thread('thread-a'));
  const interrupts = paused.tasks.flatMap((task) => task.interrupts.map((raised) => raised.value as unknown));
  assert.equal(interrupts.length, 1);
  const [pending] = interrupts;
  assert.ok(isPendingDecision(pending));
  const decision = await herald.getDecision(await pendingQuestionId(workspace.workspaceId, 'decision'));
  assert.deepEqual(pending, { herald: 'decision', decisionId: decision.decisionId, toolName: 'deploy', toolCallId: 'call-1', decisionPageUrl: decision.decisionPageUrl, question: 'Allow ops-agent to call deploy?' });
  assert.deepEqual([decision.parameters, decision.approvers], [{ service: 'api', replicas: 3, labels: '["blue","green"]' }, approvers]);
  assert.deepEqual(ran, []);
  assert.equal(await resumeWhenDecided(gate, pending, { waitTimeoutMs: 500 }), null);

  assert.equal(await linkAnswerStatus(harness, decision, 'yes'), 403);
  await reviewer.herald.answerDecision(decision.decisionId, 'yes');
  // Another process: new client and graph on the same checkpoints.
  const restartedGate = new HeraldGate({ herald: new Herald({ apiKey: workspace.apiKey, baseUrl: harness.stack.gatewayUrl }), actor: 'ops-agent', scope: 'thread-a', approvers });
  const restarted = createReactAgent({ llm: new ScriptedChatModel('deploy', DEPLOY), tools: [gateTool(restartedGate, deployTool(ran))], checkpointer });
  const resume = await resumeWhenDecided(restartedGate, pending, { waitTimeoutMs: 5_000 });
  assert.ok(resume);
  assert.equal(answerOf(await restarted.invoke(resume, thread('thread-a'))), JSON.stringify({ approval: `approved by ${reviewer.keyId} (key via api)`, result: 'deployed api' }));
  assert.deepEqual(ran, [DEPLOY]);
});

test('no, expiry, cancel and resuming early refuse; deny refuses with the policy reason; an error from Herald runs nothing', async () => {
  const { herald, workspace } = await policyWorkspace(harness);
  const ran: unknown[] = [];
  const checkpointer = new MemorySaver();
  const gate = new HeraldGate({ herald });
  const agentFor = (callId: string) => createReactAgent({ llm: new ScriptedChatModel('deploy', DEPLOY, callId), tools: [gateTool(gate, deployTool(ran))], checkpointer });

  const answers: unknown[] = [];
  for (const [callId, act] of [
    ['call-no', (decisionId: string) => herald.getDecision(decisionId).then((decision) => personAnswers(harness, decision, 'no'))],
    ['call-expired', (decisionId: string) => expireQuestion(decisionId)],
    ['call-cancelled', (decisionId: string) => herald.cancelDecision(decisionId).then(() => undefined)],
  ] as const) {
    const agent = agentFor(callId);
    await agent.invoke(PROMPT, thread(callId));
    await act(await pendingQuestionId(workspace.workspaceId, 'decision'));
    const [pending] = (await agent.getState(thread(callId))).tasks.flatMap((task) => task.interrupts.map((raised) => raised.value as PendingDecision));
    assert.ok(pending);
    const resume = await resumeWhenDecided(gate, pending);
    assert.ok(resume);
    answers.push(answerOf(await agent.invoke(resume, thread(callId))));
  }
  // Resumed by hand while the person has not answered: the resume value is not an approval.
  const early = agentFor('call-early');
  await early.invoke(PROMPT, thread('call-early'));
  answers.push(answerOf(await early.invoke(new Command({ resume: { status: 'answered', approved: true } }), thread('call-early'))));
  assert.deepEqual(answers, [
    'Error: Herald refused deploy: the holder of the answer link answered "no"\n Please fix your mistakes.',
    'Error: Herald refused deploy: the decision expired unanswered\n Please fix your mistakes.',
    'Error: Herald refused deploy: the decision was cancelled\n Please fix your mistakes.',
    'Error: Herald refused deploy: no answer yet; silence is never approval\n Please fix your mistakes.',
  ]);

  const dropDatabase = tool(async (input) => (ran.push(input), 'dropped'), { name: 'drop_database', description: 'Drop a database', schema: z.object({ name: z.string() }) });
  const denied = createReactAgent({ llm: new ScriptedChatModel('drop_database', { name: 'prod' }), tools: [gateTool(gate, dropDatabase)] });
  assert.equal(answerOf(await denied.invoke(PROMPT)), 'Error: Herald refused drop_database: denied by policy: no policy permits this call\n Please fix your mistakes.');

  const unreachable = new HeraldGate({ herald: new Herald({ apiKey: 'pk_aaaaaaaaaaaaaaaa.bbbb', baseUrl: `http://127.0.0.1:${await freePort()}` }) });
  const broken = createReactAgent({ llm: new ScriptedChatModel('deploy', DEPLOY), tools: [gateTool(unreachable, deployTool(ran))] });
  assert.equal(answerOf(await broken.invoke(PROMPT)), 'Error: fetch failed\n Please fix your mistakes.');
  assert.deepEqual(ran, []);
});
