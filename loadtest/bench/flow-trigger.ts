#!/usr/bin/env node
// Benchmark: trigger to first push. A welcome flow (subscription trigger, one send step) is active;
// browsers subscribe through the public endpoint and the time from each subscribe request to its
// welcome push accepted by a strict local push peer (VAPID checked, payload decrypted) is measured:
// first BENCH_IDLE subscriptions one at a time on an otherwise idle stack, then a burst of
// BENCH_BURST subscriptions (BENCH_CONCURRENCY requests in flight), spread over as many workspaces
// as the site keys' rate limit (1,000 per minute each) needs: 800 subscriptions per site. Path: gateway -> audience
// (outbox) -> Kafka -> flow service -> campaign service (Send) -> Kafka -> delivery fleet -> peer.
// The burst's time is split from the databases: subscription written -> run started (audience
// outbox relay, Kafka, the flow trigger consumer), run started -> notification queued (the run
// loop and CampaignService.Send), notification queued -> push accepted (fan-out, delivery, peer).
//
//   npm run bench:flow-trigger          (infra must be up, or this runs `deploy/infra.sh up`)
//
// Settings: BENCH_IDLE (20), BENCH_BURST (10000), BENCH_CONCURRENCY (32).
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { startPushPeer } from '@herald/push-peer';
import { call, connectDatabase, createKafkaNamespace, createWorkspace, infrastructureEnv, SERVER_API } from '@herald/testkit';

import { atCleanup, infraEnv, intEnv, log, runBench } from './lib/bench.js';
import { percentile } from './lib/load.js';
import { backgroundLoad } from './lib/processes.js';
import { recordRun } from './lib/record.js';
import { startHerald } from './lib/stack.js';

const settings = {
  idle: intEnv('BENCH_IDLE', 20),
  burst: intEnv('BENCH_BURST', 10_000),
  concurrency: intEnv('BENCH_CONCURRENCY', 32),
};
const ORIGIN = 'https://shop.example.test';
/** How long the last welcome push may take after the last subscription before the run is called failed. */
const DRAIN_MS = 300_000;

const now = (): number => performance.timeOrigin + performance.now();
/** Subscriptions per site in a run: under the 1,000 requests per minute of a site key on the enterprise plan. */
const SUBSCRIPTIONS_PER_SITE = 800;

interface Tenant {
  workspaceId: string;
  siteKey: string;
  vapidPublicKey: string;
}

await runBench(async () => {
  // Infrastructure the environment already names (deploy/infra.sh env exported) is used as it is.
  const infra = process.env.DATABASE_URL && process.env.REDIS_URL && process.env.KAFKA_BROKERS ? infrastructureEnv() : await infraEnv();
  const idleBusy = await backgroundLoad();
  const namespace = await createKafkaNamespace();
  atCleanup(() => namespace.remove());
  const peer = await startPushPeer({ tls: true });
  atCleanup(() => peer.close());
  const caFile = join(await mkdtemp(join(tmpdir(), 'herald-bench-peer-')), 'ca.pem');
  await writeFile(caFile, peer.ca ?? '');
  const herald = await startHerald({
    services: ['account', 'audience', 'campaign', 'delivery', 'flow'],
    env: { ...infra, LOG_LEVEL: 'warn', HERALD_NAMESPACE: namespace.prefix },
    processEnv: {
      delivery: { PUSH_CA_FILE: caFile },
      gateway: { ALLOW_ANY_PUSH_SERVICE: 'true', IP_RATE_LIMIT_PER_MINUTE: '100000' },
    },
  });
  atCleanup(() => herald.stop());
  const gatewayUrl = `http://127.0.0.1:${herald.gatewayPort}`;
  /** A workspace (its one site) with the welcome flow active. */
  const tenant = async (): Promise<Tenant> => {
    const workspace = await createWorkspace('enterprise', 'shop.example.test');
    const site = await call<{ vapidPublicKey: string }>(gatewayUrl, `${SERVER_API}/site`, { key: workspace.apiKey });
    const flow = await call<{ id: string }>(gatewayUrl, `${SERVER_API}/flows`, {
      method: 'POST',
      key: workspace.apiKey,
      body: { name: 'Welcome', triggerType: 'subscription', steps: [{ stepType: 'send_notification', config: { notification: { title: 'Welcome', body: 'Thanks for subscribing' } } }] },
    });
    if (flow.status !== 201) throw new Error(`POST /flows answered ${flow.status}: ${JSON.stringify(flow.body)}`);
    const activated = await call(gatewayUrl, `${SERVER_API}/flows/${flow.body.id}/activate`, { method: 'POST', key: workspace.apiKey });
    if (activated.status !== 200) throw new Error(`activate answered ${activated.status}`);
    return { workspaceId: workspace.workspaceId, siteKey: workspace.siteKey, vapidPublicKey: site.body.vapidPublicKey };
  };
  // A site key takes its plan's 1,000 requests per minute: a burst larger than that spreads over sites.
  const tenants: Tenant[] = [];
  for (let count = Math.max(1, Math.ceil((settings.burst + settings.idle + 1) / SUBSCRIPTIONS_PER_SITE)); tenants.length < count; ) tenants.push(await tenant());

  /** Subscribes one browser; resolves with when the request started and its endpoint. */
  const subscribe = async ({ siteKey, vapidPublicKey }: Tenant = tenants[0] as Tenant): Promise<{ endpoint: string; startedAt: number }> => {
    const subscription = peer.createSubscription({ applicationServerKey: vapidPublicKey });
    const startedAt = now();
    const response = await call(gatewayUrl, '/api/v1/subscribe', {
      method: 'POST',
      key: siteKey,
      headers: { origin: ORIGIN },
      body: { endpoint: subscription.endpoint, keys: subscription.keys },
    });
    if (response.status !== 201) throw new Error(`subscribe answered ${response.status}: ${JSON.stringify(response.body)}`);
    return { endpoint: subscription.endpoint, startedAt };
  };
  /** Each subscriber's trigger-to-push latency, once every welcome push arrived. */
  const latencies = async (subscribed: Array<{ endpoint: string; startedAt: number }>): Promise<number[]> => {
    const deadline = Date.now() + DRAIN_MS;
    for (;;) {
      const arrived = subscribed.map(({ endpoint, startedAt }) => {
        const first = peer.received(endpoint)[0];
        return first === undefined ? undefined : first.at - startedAt;
      });
      const missing = arrived.filter((value) => value === undefined).length;
      if (missing === 0) return (arrived as number[]).sort((a, b) => a - b);
      if (Date.now() > deadline) throw new Error(`${missing} welcome pushes missing ${DRAIN_MS} ms after the last subscription`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const report = (label: string, sorted: number[]) =>
    console.log(`${label.padEnd(28)} p50 ${Math.round(percentile(sorted, 50))} ms, p99 ${Math.round(percentile(sorted, 99))} ms, max ${Math.round(sorted.at(-1) ?? 0)} ms (${sorted.length})`);

  // A first subscriber warms the path (consumer groups joined, connections open); not counted.
  await latencies([await subscribe()]);
  log(`idle: ${settings.idle} subscriptions one at a time`);
  const idle: number[] = [];
  for (let index = 0; index < settings.idle; index += 1) idle.push(...(await latencies([await subscribe()])));
  idle.sort((a, b) => a - b);

  log(`burst: ${settings.burst} subscriptions, ${settings.concurrency} in flight`);
  const burst: Array<{ endpoint: string; startedAt: number }> = [];
  let next = 0;
  const burstStarted = now();
  await Promise.all(
    Array.from({ length: settings.concurrency }, async () => {
      while (next < settings.burst) {
        next += 1;
        burst.push(await subscribe(tenants[next % tenants.length]));
      }
    }),
  );
  const subscribedIn = now() - burstStarted;
  const underBurst = await latencies(burst);
  const pushes = burst.reduce((sum, { endpoint }) => sum + peer.received(endpoint).length, 0);
  const lastArrival = Math.max(...burst.map(({ endpoint }) => peer.received(endpoint)[0]?.at ?? 0));
  console.log(`\ntrigger (POST /subscribe) to the welcome push accepted by the push peer; one flow, one send step`);
  report('idle, one at a time', idle);
  report(`burst of ${settings.burst}`, underBurst);
  console.log(
    `burst: subscribed in ${(subscribedIn / 1_000).toFixed(1)} s, the last welcome push ${((lastArrival - burstStarted) / 1_000).toFixed(1)} s after the burst began; ${pushes} pushes for ${burst.length} subscribers`,
  );
  // A push can arrive before the flow service has recorded its run's send (its outcomes are written
  // in groups): the legs are read once every run has been recorded.
  const workspaceIds = tenants.map((one) => one.workspaceId);
  await runsRecorded(infra.DATABASE_URL ?? '', workspaceIds);
  console.log(`burst: every run recorded ${((now() - lastArrival) / 1_000).toFixed(1)} s after the last welcome push`);
  const stages = await burstStages(infra.DATABASE_URL ?? '', workspaceIds, burst.map(({ endpoint }) => ({ endpoint, at: peer.received(endpoint)[0]?.at ?? 0 })));
  for (const [label, sorted] of stages) report(label, sorted);
  const recorded = recordRun(
    'flow-trigger',
    [
      { name: 'idle: subscription -> welcome push p99', value: Math.round(percentile(idle, 99)), unit: 'ms', better: 'lower' },
      { name: `burst of ${settings.burst}: subscription -> welcome push p50`, value: Math.round(percentile(underBurst, 50)), unit: 'ms', better: 'lower' },
      { name: `burst of ${settings.burst}: subscription -> welcome push p99`, value: Math.round(percentile(underBurst, 99)), unit: 'ms', better: 'lower' },
      { name: 'welcome pushes beyond one per subscriber', value: Math.abs(pushes - burst.length), unit: 'pushes', better: 'lower' },
    ],
    settings,
    idleBusy,
  );
  if (recorded) log(`recorded in ${recorded}`);
  return pushes === burst.length ? 0 : 1;
}, DRAIN_MS + 600_000);

/** Waits (at most DRAIN_MS) until no run of these workspaces is in flight. */
async function runsRecorded(databaseUrl: string, workspaceIds: string[]): Promise<void> {
  const db = await connectDatabase(databaseUrl);
  const started = now();
  try {
    for (;;) {
      const { rows } = await db.query<{ in_flight: number }>(`SELECT count(*)::int AS in_flight FROM flow.flow_runs WHERE workspace_id = ANY($1) AND state IN ('running', 'waiting')`, [workspaceIds]);
      if (rows[0]?.in_flight === 0) return;
      if (now() - started > DRAIN_MS) throw new Error(`${rows[0]?.in_flight} runs still in flight ${DRAIN_MS} ms after the last welcome push`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    await db.end();
  }
}

/** Each burst subscriber's time in the three legs of the path, from the rows the services wrote (ascending per leg). */
async function burstStages(databaseUrl: string, workspaceIds: string[], arrivals: Array<{ endpoint: string; at: number }>): Promise<Array<[string, number[]]>> {
  const db = await connectDatabase(databaseUrl);
  try {
    const { rows } = await db.query<{ to_run: number; to_queued: number; to_push: number }>(
      `SELECT extract(epoch FROM r.created_at - s.created_at)::float8 * 1000 AS to_run,
              extract(epoch FROM n.created_at - r.created_at)::float8 * 1000 AS to_queued,
              a.at - extract(epoch FROM n.created_at)::float8 * 1000 AS to_push
         FROM unnest($2::text[], $3::float8[]) AS a(endpoint, at)
         JOIN audience.subscribers s ON s.workspace_id = ANY($1) AND s.endpoint = a.endpoint
         JOIN flow.flow_runs r ON r.workspace_id = s.workspace_id AND r.subscriber_id = s.id
         JOIN campaign.campaigns n ON n.id = r.notification_ids[1]`,
      [workspaceIds, arrivals.map((arrival) => arrival.endpoint), arrivals.map((arrival) => arrival.at)],
    );
    const leg = (pick: (row: { to_run: number; to_queued: number; to_push: number }) => number): number[] => rows.map(pick).sort((a, b) => a - b);
    return [
      ['  subscribed -> run started', leg((row) => row.to_run)],
      ['  run started -> queued', leg((row) => row.to_queued)],
      ['  queued -> push accepted', leg((row) => row.to_push)],
    ];
  } finally {
    await db.end();
  }
}
