import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { Herald, type AskRecord, type SendResult } from '@herald/sdk';
import { freePort, pendingQuestionId, type SendingHarness, type TestWorkspace } from '@herald/testkit';

import { linkAnswerStatus, personAnswers, policyWorkspace, POLICY, reviewerOf, startAgentsHarness } from './support.js';

// Eve's own loop: the agent in sdks/agents/eve-fixture (a scripted mockModel, Herald's tools
// from @herald/agents/eve, tools behind Herald's gate) is built with `eve build` and served with
// `eve start`, and driven over Eve's session API. Herald runs for real; each tool that runs writes
// a line to a file this test reads.

const FIXTURE = fileURLToPath(new URL('../../eve-fixture/', import.meta.url));
const EVE = join(dirname(createRequire(import.meta.url).resolve('eve/package.json')), 'bin', 'eve.js');
const PASSWORD = 'eve-test-password';

/** deploy_unattended: as deploy, behind a gate that waits only 1 s for the person; deploy_reviewed: as deploy, behind a gate naming the reviewer's key as its only approver. */
const EVE_POLICY = `${POLICY}
@id("deploy-unattended-reviewed")
@requires_human
permit(principal, action, resource) when { resource.name == "deploy_unattended" };

@id("deploy-reviewed-by-key")
@requires_human
permit(principal, action, resource) when { resource.name == "deploy_reviewed" };
`;

let harness: SendingHarness;
let herald: Herald;
let workspace: TestWorkspace;
let agent: ChildProcess;
let agentUrl: string;
let toolLog: string;
/** The reviewer: another API key of the workspace, the only approver of deploy_reviewed. */
let reviewer: { keyId: string; herald: Herald };

before(async () => {
  harness = await startAgentsHarness();
  ({ herald, workspace } = await policyWorkspace(harness));
  await herald.putPolicy(EVE_POLICY);
  reviewer = await reviewerOf(harness, workspace);
  const env = { ...process.env, EVE_TELEMETRY_DISABLED: '1' };
  await promisify(execFile)(process.execPath, [EVE, 'build'], { cwd: FIXTURE, env, maxBuffer: 64 * 1024 * 1024 });
  toolLog = join(await mkdtemp(join(tmpdir(), 'herald-eve-')), 'ran.jsonl');
  await writeFile(toolLog, '');
  const port = await freePort();
  agentUrl = `http://127.0.0.1:${port}`;
  agent = spawn(process.execPath, [EVE, 'start', '--host', '127.0.0.1', '--port', String(port)], {
    cwd: FIXTURE,
    detached: true,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...env,
      EVE_TEST_PASSWORD: PASSWORD,
      EVE_TOOL_LOG: toolLog,
      HERALD_API_KEY: workspace.apiKey,
      HERALD_URL: harness.stack.gatewayUrl,
      HERALD_REVIEWER_KEY_ID: reviewer.keyId,
      HERALD_UNREACHABLE_URL: `http://127.0.0.1:${await freePort()}`,
    },
  });
  let output = '';
  for await (const chunk of agent.stdout!) {
    output += String(chunk);
    if (output.includes('server listening')) break;
  }
  assert.match(output, /server listening/);
  agent.stdout!.resume();
});

after(async () => {
  if (agent?.pid !== undefined && agent.exitCode === null) {
    process.kill(-agent.pid, 'SIGTERM');
    await once(agent, 'exit');
  }
  await harness?.stop();
});

interface EveEvent {
  type: string;
  data: Record<string, unknown>;
}

interface ActionResult {
  status: string;
  result: { toolName: string; output: unknown; isError?: boolean };
}

const authorization = `Basic ${Buffer.from(`herald-test:${PASSWORD}`).toString('base64')}`;

/** One turn of a new session: the scripted model calls `tool` with `input`; the tool's result and the model's reply. */
async function turn(tool: string, input: unknown): Promise<{ result: ActionResult; reply: string }> {
  const started = await fetch(`${agentUrl}/eve/v1/session`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({ message: JSON.stringify({ tool, input }) }),
  });
  assert.equal(started.status, 202);
  const { sessionId } = (await started.json()) as { sessionId: string };
  const stream = await fetch(`${agentUrl}/eve/v1/session/${sessionId}/stream`, { headers: { authorization } });
  assert.equal(stream.status, 200);
  const events: EveEvent[] = [];
  let buffered = '';
  for await (const chunk of stream.body!.pipeThrough(new TextDecoderStream())) {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    events.push(...lines.filter((line) => line.trim() !== '').map((line) => JSON.parse(line) as EveEvent));
    if (events.some((event) => event.type === 'session.waiting' || event.type === 'session.failed')) break;
  }
  await stream.body!.cancel().catch(() => undefined);
  const types = events.map((event) => event.type);
  assert.ok(types.includes('turn.completed'), types.join(' '));
  const results = events.filter((event) => event.type === 'action.result').map((event) => event.data as unknown as ActionResult);
  assert.equal(results.length, 1);
  const reply = events.find((event) => event.type === 'message.completed')?.data.message;
  assert.equal(typeof reply, 'string');
  return { result: results[0]!, reply: reply as string };
}

async function ran(): Promise<unknown[]> {
  return (await readFile(toolLog, 'utf8'))
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as unknown);
}

const DEPLOY = { service: 'api', replicas: 3, labels: ['blue', 'green'] };

test('send_notification and ask_user: the model calls them, Herald sends and asks', async () => {
  const sent = await turn('send_notification', { title: 'Build finished', body: 'All green' });
  assert.equal(sent.result.status, 'completed');
  const output = sent.result.result.output as SendResult;
  assert.deepEqual({ success: output.success, status: output.status, sent: output.sent }, { success: true, status: 'queued', sent: 1 });
  assert.equal((await herald.getNotification(output.campaignId)).title, 'Build finished');
  assert.deepEqual(JSON.parse(sent.reply), output);

  const asked = await turn('ask_user', { question: 'Ship it?', wait: false });
  const record = asked.result.result.output as AskRecord;
  assert.deepEqual({ question: record.question, status: record.status }, { question: 'Ship it?', status: 'pending' });
  assert.equal((await herald.getAsk(record.correlationId)).question, 'Ship it?');
});

test('a call that needs a person waits inside the call: yes runs the tool with those arguments; no, cancel and silence run nothing', { timeout: 120_000 }, async () => {
  const approving = turn('deploy', DEPLOY);
  const decision = await herald.getDecision(await pendingQuestionId(workspace.workspaceId, 'decision'));
  assert.deepEqual({ toolName: decision.toolName, parameters: decision.parameters }, { toolName: 'deploy', parameters: { service: 'api', replicas: 3, labels: '["blue","green"]' } });
  assert.deepEqual(await ran(), []);
  await personAnswers(harness, decision, 'yes');
  const approved = await approving;
  assert.deepEqual(
    { status: approved.result.status, output: approved.result.result.output },
    { status: 'completed', output: { approval: 'approved by the holder of the answer link', result: 'deploy ran' } },
  );
  assert.deepEqual(await ran(), [{ tool: 'deploy', input: DEPLOY }]);

  const refusing = turn('deploy', DEPLOY);
  await personAnswers(harness, await herald.getDecision(await pendingQuestionId(workspace.workspaceId, 'decision')), 'no');
  const cancelling = turn('deploy', DEPLOY);
  await herald.cancelDecision(await pendingQuestionId(workspace.workspaceId, 'decision'));
  const silent = turn('deploy_unattended', DEPLOY);
  const refused = await Promise.all([refusing, cancelling, silent]);
  assert.deepEqual(
    refused.map(({ result }) => ({ status: result.status, output: result.result.output, isError: result.result.isError })),
    [
      { status: 'failed', output: 'Herald refused deploy: the holder of the answer link answered "no"', isError: true },
      { status: 'failed', output: 'Herald refused deploy: the decision was cancelled', isError: true },
      { status: 'failed', output: 'Herald refused deploy_unattended: the decision was cancelled', isError: true },
    ],
  );
  assert.deepEqual(await ran(), [{ tool: 'deploy', input: DEPLOY }]);
});

test("a gate naming its approvers: the link is refused, the approver's yes runs the tool, and the model is told who approved", { timeout: 120_000 }, async () => {
  const before = (await ran()).length;
  const approving = turn('deploy_reviewed', DEPLOY);
  const decision = await herald.getDecision(await pendingQuestionId(workspace.workspaceId, 'decision'));
  assert.deepEqual(decision.approvers, [{ kind: 'key', id: reviewer.keyId }]);
  assert.equal(await linkAnswerStatus(harness, decision, 'yes'), 403);
  await reviewer.herald.answerDecision(decision.decisionId, 'yes');
  const approved = await approving;
  const told = { approval: `approved by ${reviewer.keyId} (key via api)`, result: 'deploy_reviewed ran' };
  assert.deepEqual({ status: approved.result.status, output: approved.result.result.output }, { status: 'completed', output: told });
  assert.deepEqual(JSON.parse(approved.reply), told);
  assert.deepEqual((await ran()).slice(before), [{ tool: 'deploy_reviewed', input: DEPLOY }]);
});

test('allow runs at once, deny refuses with the policy reason, and an error from Herald runs nothing', async () => {
  const before = (await ran()).length;
  const allowed = await turn('read_file', { path: 'README.md' });
  assert.deepEqual({ status: allowed.result.status, output: allowed.result.result.output }, { status: 'completed', output: 'read_file ran' });
  const denied = await turn('drop_database', { name: 'prod' });
  assert.deepEqual(
    { status: denied.result.status, output: denied.result.result.output },
    { status: 'failed', output: 'Herald refused drop_database: denied by policy: no policy permits this call' },
  );
  const broken = await turn('read_secrets', { path: 'secrets' });
  assert.deepEqual({ status: broken.result.status, output: broken.result.result.output }, { status: 'failed', output: 'fetch failed' });
  assert.deepEqual((await ran()).slice(before), [{ tool: 'read_file', input: { path: 'README.md' } }]);
});
