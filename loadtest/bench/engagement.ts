#!/usr/bin/env node
// Benchmark: engagement reports (POST /api/v1/events) through one gateway: how many a second it
// accepts (token check, rate limits, Kafka acknowledgement), and how long from a report to the
// campaign counter showing it (gateway -> Kafka -> the campaign service's consumer -> PostgreSQL).
//
//   npm run bench:engagement            (infra must be up, or this runs `deploy/infra.sh up`)
//
// Settings (environment):
//   BENCH_CONNECTIONS=32  BENCH_WARMUP_S=2  BENCH_DURATION_S=10
//   BENCH_TOKENS=200000   distinct subscribers reported on (more than the run can send: each report is new)
//   BENCH_PROBES=200      end-to-end probes after the load, one at a time
//
// After the load it checks that the campaign counted exactly the distinct reports Herald accepted.
import { randomBytes } from 'node:crypto';

import { consumers } from '@herald/bus';
import { EngagementTokens } from '@herald/domain';
import { call, connectDatabase, createKafkaNamespace, createWorkspace, SERVER_API, waitForQuiet } from '@herald/testkit';

import { atCleanup, infraEnv, intEnv, log, runBench } from './lib/bench.js';
import { percentile, postRequest, runLoad } from './lib/load.js';
import { backgroundLoad } from './lib/processes.js';
import { loadFigures, recordRun } from './lib/record.js';
import { startHerald } from './lib/stack.js';

const settings = {
  connections: intEnv('BENCH_CONNECTIONS', 32),
  warmupMs: intEnv('BENCH_WARMUP_S', 2) * 1_000,
  durationMs: intEnv('BENCH_DURATION_S', 10) * 1_000,
  tokens: intEnv('BENCH_TOKENS', 200_000),
  probes: intEnv('BENCH_PROBES', 200),
};
const HARD_DEADLINE_MS = 300_000;
const ORIGIN = 'https://shop.example.test';

async function main(): Promise<number> {
  const infra = await infraEnv();
  const idleBusy = await backgroundLoad();
  const namespace = await createKafkaNamespace();
  atCleanup(() => namespace.remove());
  const secret = randomBytes(32).toString('base64url');
  log('stack: gateway, account, audience, campaign');
  const herald = await startHerald({
    services: ['account', 'audience', 'campaign'],
    env: {
      ...infra,
      LOG_LEVEL: 'warn',
      HERALD_NAMESPACE: namespace.prefix,
      ENGAGEMENT_TOKEN_SECRET: secret,
      // One client address sends everything here: lift its limit; the site's stays as deployed.
      ENGAGEMENT_IP_RATE_LIMIT_PER_MINUTE: '1000000',
    },
  });
  const gatewayUrl = `http://127.0.0.1:${herald.gatewayPort}`;
  const workspace = await createWorkspace('enterprise', 'shop.example.test');
  const created = await call<{ id: string }>(gatewayUrl, `${SERVER_API}/campaigns`, { method: 'POST', key: workspace.apiKey, body: { name: 'Bench', title: 't', body: 'b' } });
  if (created.status !== 201) throw new Error(`POST /campaigns answered ${created.status}`);
  const campaignId = created.body.id;
  const tokens = new EngagementTokens(secret);
  const subject = (index: number) => ({ workspaceId: workspace.workspaceId, siteId: workspace.siteId, notificationId: campaignId, subscriberId: `sub_bench${index}` });

  log(`signing ${settings.tokens} tokens`);
  const requests = Array.from({ length: settings.tokens }, (_, index) =>
    postRequest('127.0.0.1', herald.gatewayPort, '/api/v1/events', { type: 'impression', token: tokens.sign(subject(index)) }, { Origin: ORIGIN }),
  );
  const accepted = new Set<number>();
  log(`load: ${settings.connections} connections, ${settings.warmupMs / 1_000} s warm-up, ${settings.durationMs / 1_000} s measured`);
  const result = await runLoad({
    host: '127.0.0.1',
    port: herald.gatewayPort,
    requests,
    connections: settings.connections,
    warmupMs: settings.warmupMs,
    durationMs: settings.durationMs,
    onResponse: (index, status) => {
      if (status === 202) accepted.add(index);
    },
  });
  if (result.totalResponses > settings.tokens) log(`warning: the run wrapped around its ${settings.tokens} tokens (repeats are counted once)`);

  log('waiting for the campaign service to consume every report');
  await waitForQuiet(namespace.prefix, [consumers.campaignEngagement], { timeoutMs: 120_000 });
  const db = await connectDatabase();
  atCleanup(() => db.end());
  const impressions = async (): Promise<number> =>
    Number((await db.query<{ n: string }>('SELECT impressions AS n FROM campaign.campaigns WHERE id = $1', [campaignId])).rows[0]?.n ?? -1);
  const counted = await impressions();

  log(`end to end: ${settings.probes} probes, one at a time`);
  const clicks = async (): Promise<number> => Number((await db.query<{ n: string }>('SELECT clicks AS n FROM campaign.campaigns WHERE id = $1', [campaignId])).rows[0]?.n ?? -1);
  const probeMs: number[] = [];
  for (let probe = 0; probe < settings.probes; probe += 1) {
    const before = await clicks();
    const started = performance.now();
    const response = await call(gatewayUrl, '/api/v1/events', { method: 'POST', headers: { origin: ORIGIN }, body: { type: 'click', token: tokens.sign(subject(probe)) } });
    if (response.status !== 202) throw new Error(`probe answered ${response.status}`);
    while ((await clicks()) <= before) await new Promise((resolve) => setTimeout(resolve, 2));
    probeMs.push(performance.now() - started);
  }
  probeMs.sort((a, b) => a - b);

  const ok = counted === accepted.size;
  console.log('');
  console.log('Engagement reports, one gateway (2-core machine, everything local)');
  console.log(`  accepted              ${result.rps.toFixed(0)} reports/s (${result.statuses[202] ?? 0} in ${(result.durationSec).toFixed(1)} s; other statuses: ${JSON.stringify(Object.fromEntries(Object.entries(result.statuses).filter(([status]) => status !== '202')))})`);
  console.log(`  answer latency        p50 ${result.p50.toFixed(1)} ms, p99 ${result.p99.toFixed(1)} ms (${settings.connections} connections)`);
  console.log(`  report -> counter     p50 ${percentile(probeMs, 50).toFixed(1)} ms, p99 ${percentile(probeMs, 99).toFixed(1)} ms, max ${(probeMs.at(-1) ?? 0).toFixed(1)} ms (${settings.probes} probes)`);
  console.log(`  counted exactly once  ${ok ? 'yes' : 'NO'}: ${accepted.size} distinct reports accepted, ${counted} impressions counted`);
  const recorded = recordRun(
    'engagement',
    [
      ...loadFigures('accepted reports', result),
      { name: 'report -> counter p99', value: Number(percentile(probeMs, 99).toFixed(1)), unit: 'ms', better: 'lower' },
      { name: 'reports not counted exactly once', value: Math.abs(counted - accepted.size), unit: 'reports', better: 'lower' },
    ],
    settings,
    idleBusy,
  );
  if (recorded) log(`recorded in ${recorded}`);
  await herald.stop();
  return ok ? 0 : 1;
}

void runBench(main, HARD_DEADLINE_MS);
