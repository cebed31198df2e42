#!/usr/bin/env node
// Benchmark: Slack as a question's channel, on this machine, against the testkit's strict Slack
// Web API peer (in this process), through one gateway on account, audience and decision, in a
// workspace whose approval mode is `terminal` (no web push, so no campaign or delivery service).
//
//   npm run bench:slack                 (infra must be up, or this runs `deploy/infra.sh up`)
//
// 1. Question opened -> Slack message posted: BENCH_QUESTIONS decisions opened one after the
//    other; times t(POST /decisions written) -> t(the peer answered its chat.postMessage), through
//    the QuestionOpened event, the delivery row and the Slack call.
// 2. Slack answer -> waiting caller woken: for each posted question a GET /decisions/{id}?wait=true
//    is held, and 100 ms after it was sent a signed Approve click (as Slack sends it) is posted to
//    /api/v1/slack/interactions; times t(click written) -> t(the waiter's response complete),
//    BENCH_CONCURRENCY at once. Bar: p99 <= 50 ms (like the answer page's).
//
// Settings: BENCH_QUESTIONS=200  BENCH_CONCURRENCY=10. BENCH_RECORD=1 records the figures.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import { admin, call, createKafkaNamespace, SERVER_API, slackInteractionRequest, startSlackPeer, type TestWorkspace } from '@herald/testkit';

import { atCleanup, infraEnv, intEnv, log, runBench } from './lib/bench.js';
import { percentile } from './lib/load.js';
import { backgroundLoad } from './lib/processes.js';
import { recordRun } from './lib/record.js';
import { startHerald } from './lib/stack.js';

const settings = {
  questions: intEnv('BENCH_QUESTIONS', 200),
  concurrency: intEnv('BENCH_CONCURRENCY', 10),
};
const HARD_DEADLINE_MS = 300_000;
const LATENCY_BAR_MS = 50;
/** How long after the waiter's request is sent the click goes out (time for the gateway to subscribe). */
const SUBSCRIBE_GRACE_MS = 100;
const CHANNEL = 'C0BENCH01';

const now = (): number => performance.timeOrigin + performance.now();
const summary = (values: number[]) => `p50 ${percentile(values, 50).toFixed(1)} ms, p99 ${percentile(values, 99).toFixed(1)} ms, max ${(values.at(-1) ?? 0).toFixed(1)} ms (${values.length})`;

async function main(): Promise<number> {
  const infra = await infraEnv();
  const idleBusy = await backgroundLoad();
  const namespace = await createKafkaNamespace();
  atCleanup(() => namespace.remove());
  const peer = await startSlackPeer();
  atCleanup(() => peer.close());
  log('stack: gateway, account, audience, decision; the Slack peer in this process');
  const herald = await startHerald({
    services: ['account', 'audience', 'decision'],
    env: {
      ...infra,
      LOG_LEVEL: 'warn',
      HERALD_NAMESPACE: namespace.prefix,
      ANSWER_TOKEN_SECRET: randomBytes(32).toString('base64url'),
      CHANNEL_SECRET_KEYS: `k1:${randomBytes(32).toString('base64')}`,
      SLACK_API_URL: peer.apiUrl,
    },
  });
  const gatewayUrl = `http://127.0.0.1:${herald.gatewayPort}`;
  const workspace = await admin<TestWorkspace>('workspace', 'create', '--name', `Bench slack ${process.pid}-${Date.now()}`, '--plan', 'enterprise', '--domain', 'bench.test', '--approval-mode', 'terminal');
  const team = peer.addTeam([CHANNEL]);
  const connected = await call(gatewayUrl, `${SERVER_API}/channels/slack`, { method: 'PUT', key: workspace.apiKey, body: { botToken: team.botToken, signingSecret: team.signingSecret, defaultChannel: CHANNEL } });
  if (connected.status !== 200) throw new Error(`PUT /channels/slack answered ${connected.status}: ${JSON.stringify(connected.body)}`);

  log(`part 1: ${settings.questions} decisions opened one after the other`);
  const postedMs: number[] = [];
  const ids: string[] = [];
  for (let index = 0; index < settings.questions; index += 1) {
    const started = now();
    const opened = await call<{ decisionId: string }>(gatewayUrl, `${SERVER_API}/decisions`, { method: 'POST', key: workspace.apiKey, body: { question: `Deploy build ${index}?`, agentName: 'bench' } });
    if (opened.status !== 200) throw new Error(`POST /decisions answered ${opened.status}`);
    const id = opened.body.decisionId;
    const [posted] = await peer.waitForCalls('chat.postMessage', 1, (c) => JSON.stringify(c.args.blocks).includes(`herald:${id}`));
    if (!posted) throw new Error('no chat.postMessage');
    postedMs.push(posted.at - started);
    ids.push(id);
  }
  postedMs.sort((a, b) => a - b);

  log(`part 2: each answered by a Slack click while its caller waits, ${settings.concurrency} at once`);
  const wokenMs: number[] = [];
  const clickMs: number[] = [];
  let wrong = 0;
  const queue = [...ids];
  const worker = async (): Promise<void> => {
    for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
      const waiting = call<{ status: string; answer: string }>(gatewayUrl, `${SERVER_API}/decisions/${id}?wait=true`, { key: workspace.apiKey }).then((response) => ({ response, at: now() }));
      await sleep(SUBSCRIBE_GRACE_MS);
      const payload = {
        type: 'block_actions',
        team: { id: team.teamId },
        user: { id: 'U0BENCH', username: 'bench', name: 'bench', team_id: team.teamId },
        channel: { id: CHANNEL },
        trigger_id: peer.triggerId(),
        actions: [{ action_id: 'herald_yes', block_id: `herald:${id}`, value: 'yes', type: 'button' }],
      };
      const signed = slackInteractionRequest(team.signingSecret, payload);
      const clicked = now();
      const click = await call(gatewayUrl, '/api/v1/slack/interactions', { method: 'POST', rawBody: signed.body, headers: signed.headers });
      clickMs.push(now() - clicked);
      const { response, at } = await waiting;
      if (click.status !== 200 || response.status !== 200 || response.body.status !== 'answered' || response.body.answer !== 'yes') wrong += 1;
      wokenMs.push(at - clicked);
    }
  };
  await Promise.all(Array.from({ length: settings.concurrency }, worker));
  wokenMs.sort((a, b) => a - b);
  clickMs.sort((a, b) => a - b);

  const woken99 = percentile(wokenMs, 99);
  const ok = wrong === 0 && woken99 <= LATENCY_BAR_MS;
  console.log('');
  console.log('Slack (one gateway; account, audience, decision; the strict Slack peer; everything local)');
  console.log(`  opened -> message posted   ${summary(postedMs)}`);
  console.log(`  click round trip           ${summary(clickMs)}`);
  console.log(`  click -> waiter woken      ${summary(wokenMs)}  bar p99 <= ${LATENCY_BAR_MS} ms: ${woken99 <= LATENCY_BAR_MS ? 'met' : 'NOT MET'}`);
  console.log(`  answers wrong or missing   ${wrong}`);
  const recorded = recordRun(
    'slack',
    [
      { name: 'opened -> slack message p50', value: Number(percentile(postedMs, 50).toFixed(1)), unit: 'ms', better: 'lower' },
      { name: 'opened -> slack message p99', value: Number(percentile(postedMs, 99).toFixed(1)), unit: 'ms', better: 'lower' },
      { name: 'slack click -> waiter woken p99', value: Number(woken99.toFixed(1)), unit: 'ms', better: 'lower' },
    ],
    settings,
    idleBusy,
  );
  if (recorded) log(`recorded in ${recorded}`);
  await herald.stop();
  return ok ? 0 : 1;
}

void runBench(main, HARD_DEADLINE_MS);
