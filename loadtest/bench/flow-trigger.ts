#!/usr/bin/env node
// Benchmark: trigger to first push. A welcome flow (subscription trigger, one send step) is active;
// browsers subscribe through the public endpoint and the time from each subscribe request to its
// welcome push accepted by a strict local push peer (VAPID checked, payload decrypted) is measured:
// first BENCH_IDLE subscriptions one at a time on an otherwise idle stack, then a burst of
// BENCH_BURST subscriptions (BENCH_CONCURRENCY requests in flight). Path: gateway -> audience
// (outbox) -> Kafka -> flow service -> campaign service (Send) -> Kafka -> delivery fleet -> peer.
//
//   npm run bench:flow-trigger          (infra must be up, or this runs `deploy/infra.sh up`)
//
// Settings: BENCH_IDLE (20), BENCH_BURST (10000), BENCH_CONCURRENCY (32).
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { startPushPeer } from '@herald/push-peer';
import { call, createKafkaNamespace, createWorkspace, infrastructureEnv, SERVER_API } from '@herald/testkit';

import { atCleanup, infraEnv, intEnv, log, runBench } from './lib/bench.js';
import { percentile } from './lib/load.js';
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

await runBench(async () => {
  // Infrastructure the environment already names (deploy/infra.sh env exported) is used as it is.
  const infra = process.env.DATABASE_URL && process.env.REDIS_URL && process.env.KAFKA_BROKERS ? infrastructureEnv() : await infraEnv();
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

  /** Subscribes one browser; resolves with when the request started and its endpoint. */
  const subscribe = async (): Promise<{ endpoint: string; startedAt: number }> => {
    const subscription = peer.createSubscription({ applicationServerKey: site.body.vapidPublicKey });
    const startedAt = now();
    const response = await call(gatewayUrl, '/api/v1/subscribe', {
      method: 'POST',
      key: workspace.siteKey,
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
        burst.push(await subscribe());
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
  return pushes === burst.length ? 0 : 1;
}, DRAIN_MS + 600_000);
