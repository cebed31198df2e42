#!/usr/bin/env node
// The dashboard preview: Herald's Grafana dashboard (charts/herald/files/grafana/herald.json) drawn
// from a live Prometheus, without Grafana. It starts a local stack (testkit's sending harness: two
// gateways' worth of services, the strict push peer, the policy and decision services), a real
// Prometheus scraping every process's /metrics with the labels the chart's PodMonitor gives a pod,
// drives traffic that every panel is about, runs each panel's exact PromQL over the HTTP API
// (query_range), draws the panels in their grid as SVG and takes a screenshot in Chromium.
//
//   npm run dashboard:preview                         writes docs/images/dashboard.png
//   npm run dashboard:preview -- --out /tmp/d.png     elsewhere
//
// A target whose query returns no series (or only NaN) fails the run (exit 1) and names the panel:
// the dashboard asks for a metric or a label that the processes do not serve. The screenshot is
// then written to a temporary file, not to docs. Needs the infrastructure (deploy/infra.sh env),
// a build, and deploy/tools.sh's prometheus (PROMETHEUS_BIN) and Chromium (HERALD_CHROMIUM).
import { readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

import { consumers, topics } from '@herald/bus';
import {
  call,
  chromiumPath,
  connectDatabase,
  createKey,
  createWorkspace,
  eventually,
  metricValue,
  repoRoot,
  requiredEnv,
  scrapeMetrics,
  seedAudience,
  SERVER_API,
  startSendingHarness,
  type RunningProcess,
  type SendingHarness,
} from '@herald/testkit';
import { Kafka, logLevel } from 'kafkajs';
import { chromium } from 'playwright-core';

import { atCleanup, infraEnv, log, runBench } from '../bench/lib/bench.js';
import { startPrometheus, type Target } from './prometheus.js';
import { legendOf, renderPage, type Panel, type PanelData } from './render.js';

const DASHBOARD = join(repoRoot, 'charts', 'herald', 'files', 'grafana', 'herald.json');
/** Scrape interval and query step; Grafana's $__rate_interval for it is max(step + scrape, 4 x scrape). */
const SCRAPE_S = 2;
const RATE_INTERVAL = `${4 * SCRAPE_S}s`;
/** Rounds of traffic, one every ROUND_MS: a counter's first sample shows no rate; the later rounds do. */
const ROUNDS = 5;
const ROUND_MS = 10_000;
const NAMESPACE = 'herald-preview';

const { values: options } = parseArgs({ options: { out: { type: 'string', default: join(repoRoot, 'docs', 'images', 'dashboard.png') } } });

interface Dashboard {
  title: string;
  panels: Panel[];
}

function processNamed(harness: SendingHarness, name: string): RunningProcess {
  const found = [...harness.stack.gateways, ...harness.stack.services].find((running) => running.name === name);
  if (!found) throw new Error(`no ${name} in the stack`);
  return found;
}

/** The traffic every panel is about, in rounds; returns when the last round's effects are settled. */
async function driveTraffic(harness: SendingHarness): Promise<void> {
  const gatewayUrl = harness.stack.gatewayUrl;
  const expect = (what: string, status: number, wanted: number): void => {
    if (status !== wanted) throw new Error(`${what} answered ${status}, not ${wanted}`);
  };
  // Pushes: every round one subscriber answers 429 once (then accepted), one 400 (failed), one goes
  // 410 (expired: a fresh one each round), one is held 1.5 s (in flight at a scrape), the rest accepted.
  const audience = await seedAudience(harness, 4 + ROUNDS);
  const [slowed, failing, held, , ...goneEach] = audience.subscribers;
  if (!slowed || !failing || !held) throw new Error('the audience is short');
  harness.peer.respondWith(failing.endpoint, { status: 400 });
  // /authorize verdicts, the edge's refusals, and questions.
  const policyWorkspace = await createWorkspace('partner');
  const policy = '@id("read")\npermit(principal, action == Herald::Action::"call", resource) when { resource.name == "read_file" };\n\n@id("deploy")\n@requires_human\npermit(principal, action, resource) when { resource.name == "deploy" };\n';
  expect('PUT /policy', (await call(gatewayUrl, `${SERVER_API}/policy`, { method: 'PUT', key: policyWorkspace.apiKey, body: { policy } })).status, 200);
  const limited = await createWorkspace('starter'); // 200 requests per minute
  const connector = await createKey(policyWorkspace.workspaceId, 'connector');
  const asker = await createWorkspace();
  const db = await connectDatabase();
  atCleanup(() => db.end());
  const kafka = new Kafka({ clientId: 'dashboard-preview', brokers: requiredEnv('KAFKA_BROKERS').split(','), logLevel: logLevel.NOTHING });
  const producer = kafka.producer();
  await producer.connect();
  atCleanup(() => producer.disconnect());
  const gatewayMetrics = () => scrapeMetrics(processNamed(harness, 'gateway').metricsUrl);

  for (let round = 0; round < ROUNDS; round += 1) {
    const started = performance.now();
    log(`round ${round + 1} of ${ROUNDS}`);
    harness.peer.respondWith(slowed.endpoint, { status: 429, retryAfter: 1, times: 1 });
    harness.peer.respondWith(held.endpoint, { delayMs: 1_500, times: 1 });
    const gone = goneEach[round];
    if (gone) harness.peer.respondWith(gone.endpoint, { status: 410 });
    const sent = await call<{ campaignId: string }>(gatewayUrl, `${SERVER_API}/send`, { method: 'POST', key: audience.workspace.apiKey, body: { title: `Round ${round + 1}`, body: 'Preview' } });
    expect('POST /send', sent.status, 200);

    for (const toolName of ['read_file', 'read_file', 'rm_rf', 'deploy']) {
      expect('POST /authorize', (await call(gatewayUrl, `${SERVER_API}/authorize`, { method: 'POST', key: policyWorkspace.apiKey, body: { toolName } })).status, 200);
    }
    expect('no key', (await call(gatewayUrl, `${SERVER_API}/identity`)).status, 401);
    expect('a wrong key', (await call(gatewayUrl, `${SERVER_API}/identity`, { key: 'pk_0000000000000000.not-a-secret' })).status, 401);
    expect("a connector key on the dashboard's route", (await call(gatewayUrl, `${SERVER_API}/policy`, { key: connector.apiKey })).status, 403);
    // Over the starter plan's 200 a minute: the first round fills it, every round goes 5 over.
    for (let index = 0; index < (round === 0 ? 205 : 5); index += 1) await call(gatewayUrl, `${SERVER_API}/identity`, { key: limited.apiKey });

    // Three questions: one answered while its caller waits, one withdrawn, one expired.
    const open = async (): Promise<{ correlationId: string; liveUrl: string }> => {
      const response = await call<{ correlationId: string; liveUrl: string }>(gatewayUrl, `${SERVER_API}/ask`, { method: 'POST', key: asker.apiKey, body: { question: 'Deploy?', wait: false } });
      expect('POST /ask', response.status, 200);
      return response.body;
    };
    const [answered, withdrawn, expiring] = [await open(), await open(), await open()];
    const waiting = call<{ status: string }>(gatewayUrl, `${SERVER_API}/ask/${answered.correlationId}?wait=10`, { key: asker.apiKey });
    await eventually('the caller held', gatewayMetrics, (metrics) => metricValue(metrics, 'herald_approvals_waiters') === 1);
    const token = answered.liveUrl.slice(answered.liveUrl.indexOf('/a/') + 3);
    expect('the answer', (await call(gatewayUrl, `/api/v1/answer/${token}`, { method: 'POST', body: { answer: 'yes' } })).status, 200);
    const woken = await waiting;
    // On a loaded machine a wait can end in a 503 (the gateway's call to the decision service past its
    // deadline): shown on the dashboard as it happened, not a reason to stop drawing it.
    if (woken.status !== 200 || woken.body.status !== 'answered') log(`  the waiting caller got ${woken.status} ${JSON.stringify(woken.body)}`);
    expect('DELETE /ask', (await call(gatewayUrl, `${SERVER_API}/ask/${withdrawn.correlationId}`, { method: 'DELETE', key: asker.apiKey })).status, 200);
    await db.query(`UPDATE decision.questions SET expires_at = now() - interval '1 second' WHERE id = $1`, [expiring.correlationId]);

    // A message the audience service's results consumer cannot read: dead-lettered after its attempts.
    if (round % 2 === 0) await producer.send({ topic: harness.stack.topicPrefix + topics.deliveryResults.name, messages: [{ key: 'preview-poison', value: Buffer.from([0xff, 0xff, 0xff]) }] });

    await eventually(
      `round ${round + 1}'s send completed`,
      () => call<{ status: string }>(gatewayUrl, `${SERVER_API}/notifications/${sent.body.campaignId}`, { key: audience.workspace.apiKey }),
      (reply) => reply.body.status === 'completed',
      30_000,
    );
    // The schedule of the rounds, so each shows up in its own rate windows.
    const left = ROUND_MS - (performance.now() - started);
    if (left > 0 && round < ROUNDS - 1) await new Promise((resolve) => setTimeout(resolve, left));
  }
  const audienceMetrics = () => scrapeMetrics(processNamed(harness, 'audience').metricsUrl);
  const deadLettered = { group: consumers.audienceExpiry.group, topic: topics.deliveryResults.name, outcome: 'dead_lettered' };
  await eventually('the poison messages dead-lettered', audienceMetrics, (metrics) => metricValue(metrics, 'herald_kafka_messages_total', deadLettered) === Math.ceil(ROUNDS / 2), 60_000);
}

async function main(): Promise<number> {
  const infra = await infraEnv();
  Object.assign(process.env, infra);
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
  log('stack: gateway, account, audience, campaign, delivery, policy, decision; the strict push peer');
  const harness = await startSendingHarness({ policy: true, decisions: true, deliveryEnv: { PUSH_MAX_ATTEMPTS: '3' } });
  atCleanup(() => harness.stop());
  const processes = [...harness.stack.gateways, ...harness.stack.services];
  const targets: Target[] = processes.map((running, index) => {
    if (!running.metricsUrl) throw new Error(`${running.name} serves no metrics`);
    return { address: new URL(running.metricsUrl).host, labels: { namespace: NAMESPACE, component: running.name, pod: `${running.name}-${index}` } };
  });
  const prometheus = await startPrometheus(targets, SCRAPE_S);
  atCleanup(() => prometheus.stop());
  await prometheus.targetsUp(targets.length);
  log(`Prometheus ${prometheus.url} scraping ${targets.length} processes every ${SCRAPE_S} s`);

  const from = Math.floor(Date.now() / 1_000);
  await driveTraffic(harness);
  // Two more scrapes, so the last round's effects are stored.
  await new Promise((resolve) => setTimeout(resolve, 2 * SCRAPE_S * 1_000 + 500));
  const to = Math.floor(Date.now() / 1_000);

  const failures: string[] = [];
  const drawn: PanelData[] = [];
  for (const panel of dashboard.panels) {
    const series: PanelData['series'] = [];
    for (const target of panel.targets ?? []) {
      // What Grafana sends for "All" namespaces and this scrape interval.
      const expr = target.expr.replaceAll('$namespace', '.*').replaceAll('$__rate_interval', RATE_INTERVAL);
      const result = await prometheus.queryRange(expr, from, to, SCRAPE_S);
      if (!result.some((one) => one.values.some(([, value]) => Number.isFinite(value)))) failures.push(`"${panel.title}": ${target.expr} returned ${result.length === 0 ? 'no series' : 'only NaN'}`);
      series.push(...result.map((one) => ({ legend: legendOf(target.legendFormat, one.metric), values: one.values })));
    }
    drawn.push({ panel, series });
  }
  const caption = `Rendered by Herald's dashboard preview (npm run dashboard:preview) from a live Prometheus, not Grafana: ${ROUNDS} rounds of traffic on a local stack, ${new Date(from * 1_000).toISOString().slice(0, 16)}Z`;
  const html = renderPage(dashboard.title, caption, drawn, from, to);
  const out = failures.length === 0 ? resolve(options.out) : join(os.tmpdir(), `herald-dashboard-failed-${process.pid}.png`);
  await mkdir(dirname(out), { recursive: true });
  const browser = await chromium.launch({ executablePath: chromiumPath() });
  try {
    const page = await browser.newPage({ viewport: { width: 24 * 60 + 24, height: 800 } });
    await page.setContent(html);
    await page.screenshot({ path: out, fullPage: true });
  } finally {
    await browser.close();
  }
  const panels = drawn.filter(({ panel }) => panel.type !== 'row');
  log(`${panels.length} panels, ${panels.reduce((sum, { series }) => sum + series.length, 0)} series: ${out}`);
  for (const failure of failures) log(`NO DATA ${failure}`);
  return failures.length === 0 ? 0 : 1;
}

await runBench(main, 10 * 60_000);
