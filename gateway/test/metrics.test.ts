import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  connectDatabase,
  call,
  createKey,
  createWorkspace,
  eventually,
  histogramsOf,
  metricValue,
  scrapeMetrics,
  SERVER_API,
  startStack,
  type RunningProcess,
  type Stack,
} from '@herald/testkit';

// The edge's and the approvals' metrics, scraped over HTTP from each process's Prometheus endpoint
// after driving the behaviour through the public API: refusals by plan and reason, /authorize
// verdicts, questions by what happened to them, callers held and their wake-ups.

let stack: Stack;

before(async () => {
  stack = await startStack({ decisions: true, policy: true });
});
after(() => stack.stop());

function processNamed(name: string): RunningProcess {
  const found = [...stack.gateways, ...stack.services].find((running) => running.name === name);
  assert.ok(found, `no ${name} in the stack`);
  return found;
}

const gatewayMetrics = () => scrapeMetrics(processNamed('gateway').metricsUrl);

test('refusals at the edge: authentication failures by reason, rate-limit rejections by plan', async () => {
  const workspace = await createWorkspace('starter'); // 200 requests per minute
  const connector = await createKey(workspace.workspaceId, 'connector');
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/identity`)).status, 401);
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/identity`, { key: 'pk_0000000000000000.not-a-secret' })).status, 401);
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/identity`, { key: 'pk_nonsense' })).status, 401);
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/policy`, { key: connector.apiKey })).status, 403);

  const statuses: number[] = [];
  for (let index = 0; index < 202; index += 1) statuses.push((await call(stack.gatewayUrl, `${SERVER_API}/identity`, { key: workspace.apiKey })).status);
  assert.deepEqual([statuses.filter((status) => status === 200).length, statuses.filter((status) => status === 429).length], [200, 2]);

  const metrics = await gatewayMetrics();
  assert.equal(metrics.herald_authentication_failures_total?.type, 'counter');
  assert.equal(metricValue(metrics, 'herald_authentication_failures_total', { reason: 'missing' }), 1);
  assert.equal(metricValue(metrics, 'herald_authentication_failures_total', { reason: 'rejected' }), 2);
  assert.equal(metricValue(metrics, 'herald_authentication_failures_total', { reason: 'forbidden' }), 1);
  assert.equal(metricValue(metrics, 'herald_rate_limit_rejections_total', { plan: 'starter' }), 2);
  assert.equal(metricValue(metrics, 'herald_rate_limit_rejections_total', { plan: 'public' }), 0);
  // Each request of a known key ran the rate-limit script in Redis once: the connector's and the 202.
  const redis = histogramsOf(metrics, 'herald_redis_command_duration', { command: 'rate_limit' });
  assert.deepEqual(redis.map((series) => [series.labels.outcome, series.count]), [['ok', 203]]);
});

test('/authorize verdicts are counted by verdict', async () => {
  const workspace = await createWorkspace('partner');
  const policy = `
@id("read-anything")
permit(principal, action == Herald::Action::"call", resource) when { resource.name == "read_file" };

@id("deploy-reviewed")
@requires_human
permit(principal, action, resource) when { resource.name == "deploy" };
`;
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/policy`, { method: 'PUT', key: workspace.apiKey, body: { policy } })).status, 200);
  const authorize = async (toolName: string) => {
    const response = await call<{ verdict: string }>(stack.gatewayUrl, `${SERVER_API}/authorize`, { method: 'POST', key: workspace.apiKey, body: { toolName } });
    assert.equal(response.status, 200);
    return response.body.verdict;
  };
  assert.deepEqual([await authorize('read_file'), await authorize('read_file'), await authorize('rm_rf'), await authorize('deploy')], ['allow', 'allow', 'deny', 'requires_human']);

  const metrics = await scrapeMetrics(processNamed('policy').metricsUrl);
  assert.equal(metricValue(metrics, 'herald_authorize_verdicts_total', { verdict: 'allow' }), 2);
  assert.equal(metricValue(metrics, 'herald_authorize_verdicts_total', { verdict: 'deny' }), 1);
  assert.equal(metricValue(metrics, 'herald_authorize_verdicts_total', { verdict: 'requires_human' }), 1);
});

interface AskRecord {
  correlationId: string;
  status: string;
  liveUrl: string;
}

test('questions opened, answered and cancelled; a waiting caller is held, then woken by the answer', async () => {
  const { apiKey } = await createWorkspace();
  const open = async (): Promise<AskRecord> => {
    const response = await call<AskRecord>(stack.gatewayUrl, `${SERVER_API}/ask`, { method: 'POST', key: apiKey, body: { question: 'Deploy?', wait: false } });
    assert.equal(response.status, 200);
    return response.body;
  };
  const [answered, withdrawn, unanswered] = [await open(), await open(), await open()];

  const waiting = call<AskRecord>(stack.gatewayUrl, `${SERVER_API}/ask/${answered.correlationId}?wait=4`, { key: apiKey });
  await eventually('one caller held', gatewayMetrics, (metrics) => metricValue(metrics, 'herald_approvals_waiters') === 1);
  const token = answered.liveUrl.slice(answered.liveUrl.indexOf('/a/') + 3);
  assert.equal((await call(stack.gatewayUrl, `/api/v1/answer/${token}`, { method: 'POST', body: { answer: 'yes' } })).status, 200);
  const woken = await waiting;
  assert.equal(woken.status, 200);
  assert.equal(woken.body.status, 'answered');
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/ask/${withdrawn.correlationId}`, { method: 'DELETE', key: apiKey })).status, 200);

  const gateway = await gatewayMetrics();
  assert.equal(metricValue(gateway, 'herald_approvals_waiters'), 0);
  const wakeUps = histogramsOf(gateway, 'herald_approvals_wakeup_latency');
  assert.equal(wakeUps.length, 1);
  assert.equal(wakeUps[0]?.count, 1);
  assert.equal(wakeUps[0]?.buckets['1'], 1, 'woken within a second of the answer');

  const decision = await scrapeMetrics(processNamed('decision').metricsUrl);
  assert.equal(metricValue(decision, 'herald_questions_total', { event: 'opened', kind: 'ask' }), 3);
  assert.equal(metricValue(decision, 'herald_questions_total', { event: 'answered', kind: 'ask' }), 1);
  assert.equal(metricValue(decision, 'herald_questions_total', { event: 'cancelled', kind: 'ask' }), 1);
  assert.equal(metricValue(decision, 'herald_questions_total', { event: 'opened', kind: 'decision' }), 0);
  assert.equal(metricValue(decision, 'herald_question_answers_total', { channel: 'answer_page', outcome: 'answered' }), 1);
  // This stack runs no campaign service: each ask's web push is tried again after a backoff, and
  // those of the answered and the withdrawn ask are skipped once they are closed.
  const pushes = (metrics: Awaited<ReturnType<typeof scrapeMetrics>>, outcome: string) => metricValue(metrics, 'herald_question_deliveries_total', { channel: 'web_push', outcome });
  const counted = await eventually('the closed asks\' pushes skipped', () => scrapeMetrics(processNamed('decision').metricsUrl), (metrics) => pushes(metrics, 'skipped') === 2);
  assert.ok(pushes(counted, 'retried') >= 1);
  assert.equal(pushes(counted, 'delivered'), 0);

  // The third ask's lifetime runs out: the expiry sweep counts it, once.
  const db = await connectDatabase();
  try {
    await db.query(`UPDATE decision.questions SET expires_at = now() - interval '1 second' WHERE id = $1`, [unanswered?.correlationId]);
  } finally {
    await db.end();
  }
  await eventually('the expiry counted', () => scrapeMetrics(processNamed('decision').metricsUrl), (metrics) => metricValue(metrics, 'herald_questions_total', { event: 'expired', kind: 'ask' }) === 1);
});

test('a METRICS_PORT that is not a port number stops the process at start, naming the variable', async () => {
  await assert.rejects(stack.startService('policy', { METRICS_PORT: 'nine' }), /METRICS_PORT must be a port number \(0: off\), not "nine"/);
  await assert.rejects(stack.startService('policy', { METRICS_PORT: '70000' }), /METRICS_PORT must be a port number \(0: off\), not "70000"/);
});
