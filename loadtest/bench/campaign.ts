#!/usr/bin/env node
// Benchmark: one POST /api/v1/server/send to a large audience (1,000,000 subscribers by default),
// end to end on this machine: gateway -> campaign (count, allowance, outbox) -> Kafka -> fan-out
// (StreamTargets from the audience service, one delivery job per batch) -> Kafka -> delivery fleet
// (claim in PostgreSQL, RFC 8291 encryption, VAPID, HTTP/2) -> a strict local push service in
// count mode (a separate process: VAPID checked, bodies checked, nothing decrypted).
//
//   npm run bench:send                 (infra must be up, or this runs `deploy/infra.sh up`; build first)
//
// Settings (environment):
//   BENCH_SUBSCRIBERS=1000000      audience size (seeded with COPY straight into audience.subscribers)
//   BENCH_DELIVERY_REPLICAS=1,2    one round per entry: a fresh stack with that many delivery replicas
//   BENCH_KEY_POOL=1000            receiver key pairs shared by the subscribers (endpoint /push/<n> uses key n % pool)
//   BENCH_SEND_LIMIT_S=900         a round stops waiting after this; the report then projects the rest
//   BENCH_VIA=send                 send: one POST /send; campaign: POST /campaigns, then POST /campaigns/{id}/send
//   BENCH_PLACEHOLDERS=0           1: the content holds per-subscriber placeholders ({{subscriber.id}}), filled
//                                  by the fleet for each recipient (the cost of personalizing, side by side)
//   BENCH_METRICS=compare          the cost of metrics: BENCH_METRICS_PAIRS (2) pairs of rounds, metrics off then
//                                  on (off, on, off, on), each the same send on a fresh stack with the first entry
//                                  of BENCH_DELIVERY_REPLICAS; prints CPU ms per push of both and the extra share
//                                  against the 3% bar. Off: METRICS_PORT=0 and no OTLP (no meter provider). On
//                                  (every other round too): each process's /metrics scraped every BENCH_SCRAPE_S
//                                  (15) s by this driver, as Prometheus does, and exported over OTLP/HTTP to a
//                                  local receiver every BENCH_SCRAPE_S s (production's default push is every 60 s)
//   BENCH_CPU_PROF=1               every Herald process and the push peer run with --cpu-prof; summaries of the
//                                  send window are printed (the profiler slows them down: not for the figures)
// The services' own variables pass through to them (FANOUT_BATCH_SIZE, PUSH_STREAMS_PER_ORIGIN,
// DELIVERY_JOB_CONCURRENCY, DATABASE_POOL_SIZE, ...), and BENCH_PEER_STREAMS sets the push
// service's SETTINGS_MAX_CONCURRENT_STREAMS (default 100, like large push services).
//
// Each round has its own Kafka namespace (testkit's createKafkaNamespace, removed afterwards). The
// benchmark workspace's rows (subscribers, notifications, deliveries, retries) are deleted at the
// end, also on failure or Ctrl-C. Loopback only.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Agent, get } from 'node:https';
import os from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { TELEMETRY_ARGS } from '@herald/launcher';
import { generateKeyPool, subscriptionFromPool, writeKeyPoolFile, type KeyPoolEntry, type PeerStats } from '@herald/push-peer';
import { admin, call, connectDatabase, createKafkaNamespace, eventually, freePort, SERVER_API, type TestWorkspace } from '@herald/testkit';

import { atCleanup, elapsedSeconds, infraEnv, intEnv, log, runBench } from './lib/bench.js';
import { seedSubscribers, type Seeding } from './lib/copy.js';
import { backgroundLoad, startProcess, type BenchProcess } from './lib/processes.js';
import { summarizeProfileDir, type ProfiledProcess } from './lib/profile.js';
import { scrapeEvery, startOtlpReceiver, type ScrapeCounts } from './lib/metrics.js';
import { recordRun, type Figure } from './lib/record.js';
import { startHerald, type Herald } from './lib/stack.js';
import { UsageMonitor, type UsageReport } from './lib/usage.js';
import { deleteWorkspaceRows, type Db } from './lib/workspace.js';

const run = promisify(execFile);

const settings = {
  subscribers: intEnv('BENCH_SUBSCRIBERS', 1_000_000),
  replicaRounds: replicaList(process.env.BENCH_DELIVERY_REPLICAS ?? '1,2'),
  keyPool: intEnv('BENCH_KEY_POOL', 1_000),
  sendLimitMs: intEnv('BENCH_SEND_LIMIT_S', 900) * 1_000,
  peerStreams: intEnv('BENCH_PEER_STREAMS', 100),
  cpuProfile: process.env.BENCH_CPU_PROF === '1',
  via: process.env.BENCH_VIA === 'campaign' ? ('campaign' as const) : ('send' as const),
  placeholders: process.env.BENCH_PLACEHOLDERS === '1',
  metricsCompare: process.env.BENCH_METRICS === 'compare',
  metricsPairs: intEnv('BENCH_METRICS_PAIRS', 2),
  scrapeMs: intEnv('BENCH_SCRAPE_S', 15) * 1_000,
};
/** One round: a fresh stack with this many delivery replicas, its metrics on or off. */
interface RoundSpec {
  replicas: number;
  metrics: boolean;
}
const rounds: RoundSpec[] = settings.metricsCompare
  ? Array.from({ length: settings.metricsPairs }, () => [false, true].map((metrics) => ({ replicas: settings.replicaRounds[0] ?? 1, metrics }))).flat()
  : settings.replicaRounds.map((replicas) => ({ replicas, metrics: true }));
/** The bar for what metrics may add to the CPU per push. */
const METRICS_COST_BAR = 0.03;
/** Progress polls: the notification's counters in PostgreSQL (cheap) every second. */
const POLL_MS = 1_000;
/**
 * The push peer's /__peer/stats builds a histogram over its per-endpoint counts, synchronously: at
 * a million endpoints that blocks the peer (and every push waiting on it) for a noticeable time.
 * So it is polled every 5 s, and every second only in the first 10 s and once the counters show
 * 98% delivered (for a precise end time).
 */
const PEER_POLL_MS = 5_000;
/** No new accepted push for this long ends a round early (something is stuck). */
const STALL_MS = 90_000;
/** After the last push: how long the counters may take to reach `completed`. */
const COMPLETION_WAIT_MS = 120_000;
/** Rows per COPY chunk. */
const COPY_CHUNK_ROWS = 5_000;
/** The goal this benchmark is held against: 1,000,000 pushes, 2 delivery replicas, this 2-core machine. */
const TARGET_MS = 120_000;
/** Herald's CPU per push outside the encryption (every Herald process, PostgreSQL, Kafka, Redis): the bar. */
const OUTSIDE_ENCRYPTION_BAR_MS = 0.06;
/** Messages the encryption's own cost is timed over, and their payload: about a benchmark push with its engagement token (the ECDH dominates, not the size). */
const ENCRYPTION_MESSAGES = 20_000;
const PUSH_PAYLOAD_BYTES = 512;
const PEER_ENTRY = 'tools/push-peer/dist/src/cli.js';
/** Kafka topics per round: testkit's namespace creates every topic with this many partitions. */
const NAMESPACE_PARTITIONS = 4;
/** The services' variables that shape throughput, printed with the results (default when unset). */
const TUNING: Array<[string, string]> = [
  ['FANOUT_BATCH_SIZE', '500'],
  ['PUSH_STREAMS_PER_ORIGIN', '100'],
  ['DELIVERY_JOB_CONCURRENCY', '4'],
  ['DATABASE_POOL_SIZE', '10'],
  ['KAFKA_SESSION_TIMEOUT_MS', '30000'],
];
/** Every wait has a bound; the whole run too (seeding, then each round, then clean-up). */
const HARD_DEADLINE_MS = 20 * 60_000 + rounds.length * (settings.sendLimitMs + COMPLETION_WAIT_MS + 8 * 60_000);

function replicaList(value: string): number[] {
  const list = value.split(',').map((part) => Number(part.trim()));
  if (list.length === 0 || list.some((n) => !Number.isInteger(n) || n < 1 || n > 8)) {
    throw new Error('BENCH_DELIVERY_REPLICAS must be a comma-separated list of replica counts (1-8), e.g. "1,2"');
  }
  return list;
}

const seconds = (ms: number): string => `${(ms / 1_000).toFixed(1)} s`;
const mib = (kb: number | null): string => (kb === null ? '-' : (kb / 1_024).toFixed(0));
const count = (n: number): string => n.toLocaleString('en-US');

// ---------------------------------------------------------------- the push service (a separate process)
interface Peer {
  process: BenchProcess;
  origin: string;
  ca: string;
  stats(): Promise<PeerStats>;
}

async function startPeer(port: number, keyPoolFile: string, nodeArgs: string[]): Promise<Peer> {
  const peer = await startProcess({
    name: 'push-peer',
    entry: PEER_ENTRY,
    port,
    nodeArgs,
    args: ['--mode', 'count', '--tls', '--port', String(port), '--key-pool-file', keyPoolFile, '--subscriptions', String(settings.subscribers), '--max-concurrent-streams', String(settings.peerStreams)],
  });
  // The ready line follows the listen by a moment.
  const readyLine = await eventually(
    'push peer ready line',
    async () => /^\{.*"origin".*\}$/m.exec(peer.output())?.[0],
    (line) => line !== undefined,
    10_000,
  );
  const ready = JSON.parse(readyLine as string) as { origin: string; ca?: string };
  if (!ready.ca) throw new Error(`the push peer printed no CA: ${readyLine}`);
  const agent = new Agent({ ca: ready.ca, keepAlive: true, maxSockets: 1 });
  atCleanup(async () => agent.destroy());
  const stats = (retried = false): Promise<PeerStats> =>
    new Promise<PeerStats>((resolve, reject) => {
      const request = get(`${ready.origin}/__peer/stats`, { agent, timeout: 10_000 }, (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => {
          if (response.statusCode !== 200) reject(new Error(`/__peer/stats answered ${response.statusCode}: ${body.slice(0, 200)}`));
          else resolve(JSON.parse(body) as PeerStats);
        });
      });
      request.on('timeout', () => request.destroy(new Error('/__peer/stats timed out')));
      // A kept-alive connection the peer closed as the request went out (Node's documented race): once more on a new one.
      request.on('error', (err: NodeJS.ErrnoException) => (request.reusedSocket && err.code === 'ECONNRESET' && !retried ? stats(true).then(resolve, reject) : reject(err)));
    });
  return { process: peer, origin: ready.origin, ca: ready.ca, stats };
}

// ---------------------------------------------------------------- the audience, straight into PostgreSQL

/** COPY text format: these values must not need escaping. */
const PLAIN = /^[A-Za-z0-9_.:/-]+$/;

async function* subscriberRows(workspace: TestWorkspace, origin: string, pool: readonly KeyPoolEntry[], idPrefix: string): AsyncGenerator<string> {
  for (const value of [workspace.workspaceId, workspace.siteId, origin, idPrefix, ...pool.flatMap((entry) => [entry.p256dh, entry.auth])]) {
    if (!PLAIN.test(value)) throw new Error(`unexpected characters for COPY in ${value}`);
  }
  const createdAt = new Date().toISOString();
  const fixed = `\t${workspace.workspaceId}\t${workspace.siteId}\tactive\t`;
  let chunk = '';
  for (let index = 0; index < settings.subscribers; index += 1) {
    const { endpoint, keys } = subscriptionFromPool(origin, pool, index);
    chunk += `${idPrefix}${index.toString(32).padStart(6, '0')}${fixed}${endpoint}\t${keys.p256dh}\t${keys.auth}\t${createdAt}\n`;
    if ((index + 1) % COPY_CHUNK_ROWS === 0) {
      yield chunk;
      chunk = '';
    }
  }
  if (chunk) yield chunk;
}

async function seedAudience(db: Db, workspace: TestWorkspace, origin: string, pool: readonly KeyPoolEntry[]): Promise<Seeding> {
  // Ids look like Herald's (sub_ + 16 lowercase characters), unique to this run.
  const idPrefix = `sub_${randomBytes(5).toString('hex')}`;
  const columns = ['id', 'workspace_id', 'site_id', 'status', 'endpoint', 'p256dh', 'auth', 'created_at'];
  return seedSubscribers(db, columns, subscriberRows(workspace, origin, pool, idPrefix), settings.subscribers);
}

const DELIVERY_TABLES = ['delivery.deliveries', 'delivery.retries'];
const WORKSPACE_TABLES = [...DELIVERY_TABLES, 'campaign.campaigns', 'audience.subscribers'];
const OUTBOX_SCHEMAS = ['account', 'audience', 'campaign', 'delivery'];

/** The content sent: the same size either way; with placeholders, the fleet fills one per recipient. */
function content(): { title: string; body: string; url: string } {
  const audience = `One send to ${count(settings.subscribers)} subscribers.`;
  return settings.placeholders
    ? { title: 'Herald benchmark', body: `${audience} Yours, {{subscriber.id}}.`, url: 'https://bench.test/campaign?for={{subscriber.id}}' }
    : { title: 'Herald benchmark', body: audience, url: 'https://bench.test/campaign' };
}

/** Starts the send (POST /send, or a campaign created and sent); its id and how many it targets. */
async function startSend(gatewayUrl: string, apiKey: string): Promise<{ notificationId: string; sent: number }> {
  const { title, body, url } = content();
  if (settings.via === 'send') {
    const response = await call<{ campaignId?: string; sent?: number }>(gatewayUrl, `${SERVER_API}/send`, { method: 'POST', key: apiKey, body: { title, body, url } });
    if (response.status !== 200 || !response.body.campaignId) throw new Error(`POST /send answered ${response.status}: ${JSON.stringify(response.body)}`);
    return { notificationId: response.body.campaignId, sent: Number(response.body.sent) };
  }
  const created = await call<{ id?: string }>(gatewayUrl, `${SERVER_API}/campaigns`, { method: 'POST', key: apiKey, body: { name: 'Herald benchmark', title, body, actionUrl: url } });
  if (created.status !== 201 || !created.body.id) throw new Error(`POST /campaigns answered ${created.status}: ${JSON.stringify(created.body)}`);
  const started = await call<{ totalTargeted?: number }>(gatewayUrl, `${SERVER_API}/campaigns/${created.body.id}/send`, { method: 'POST', key: apiKey });
  if (started.status !== 200) throw new Error(`POST /campaigns/{id}/send answered ${started.status}: ${JSON.stringify(started.body)}`);
  return { notificationId: created.body.id, sent: Number(started.body.totalTargeted) };
}

// ---------------------------------------------------------------- one round: a fresh stack, one send
interface Progress {
  at: number;
  /** The push peer's count, when it was polled at this tick. */
  accepted: number | null;
  queued: number;
  delivered: number;
  fanoutDone: boolean;
}

interface RoundResult {
  replicas: number;
  /** Metrics served, scraped and exported (null: off), and what this driver read of them in the round. */
  metrics: { scrape: ScrapeCounts; otlp: { exports: number; bytes: number } } | null;
  /** The 1-minute load average when the send started and when its last push was accepted. */
  load: [number, number];
  postMs: number;
  sent: number;
  reachedAll: boolean;
  /** From the POST to: first accepted push, fan-out finished, last accepted push, notification completed. */
  firstPushMs: number | null;
  fanoutDoneMs: number | null;
  lastPushMs: number | null;
  completedMs: number | null;
  accepted: number;
  overallRate: number;
  steadyRate: number | null;
  lastMinuteRate: number | null;
  peer: PeerStats;
  deliveries: Record<string, number>;
  retries: number;
  outboxLeft: number;
  usage: UsageReport;
  /** Samples at 25/50/75% of the time, to see whether fan-out or delivery leads. */
  timeline: Progress[];
  /** The slowest /__peer/stats round trip (ms) and how many were made. */
  peerStatsMs: { max: number; calls: number };
  /** pid -> label and send window, for the CPU profiles. */
  profiled: Record<string, ProfiledProcess>;
}

/** When `accepted` first reached `target` (linear between samples), ms after the POST. */
function timeToReach(all: Progress[], target: number): number | null {
  const progress = all.filter((sample): sample is Progress & { accepted: number } => sample.accepted !== null);
  for (let index = 0; index < progress.length; index += 1) {
    const sample = progress[index] as Progress & { accepted: number };
    if (sample.accepted < target) continue;
    const before = progress[index - 1];
    if (!before || sample.accepted === before.accepted) return sample.at;
    return before.at + ((target - before.accepted) / (sample.accepted - before.accepted)) * (sample.at - before.at);
  }
  return null;
}

interface RoundContext {
  db: Db;
  infra: Record<string, string>;
  workspace: TestWorkspace;
  peerPort: number;
  keyPoolFile: string;
  caFile: string;
  /** Where --cpu-prof writes, when profiling. */
  profileDir: string | undefined;
  seed: (origin: string) => Promise<void>;
}

const monotonicMicros = (): number => Number(process.hrtime.bigint() / 1000n);

const roundName = ({ replicas, metrics }: RoundSpec): string =>
  `${replicas} delivery replica${replicas > 1 ? 's' : ''}${settings.metricsCompare ? `, metrics ${metrics ? 'on' : 'off'}` : ''}`;

async function runRound(spec: RoundSpec, context: RoundContext): Promise<RoundResult> {
  const { db, infra, workspace, profileDir } = context;
  const { replicas } = spec;
  const profArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  const name = roundName(spec);
  log(`round "${name}": Kafka namespace, stack`);
  const namespace = await createKafkaNamespace();
  let removed: Promise<void> | undefined;
  const removeNamespace = (): Promise<void> => (removed ??= namespace.remove());
  atCleanup(removeNamespace);
  let herald: Herald | undefined;
  let peer: Peer | undefined;
  const otlp = spec.metrics ? await startOtlpReceiver() : undefined;
  let scraper: { stop(): Promise<ScrapeCounts> } | undefined;
  try {
    // The peer first: the delivery service reads its CA (a new one each start) when it starts.
    peer = await startPeer(context.peerPort, context.keyPoolFile, profArgs);
    if (peer.origin !== `https://127.0.0.1:${context.peerPort}`) throw new Error(`the push peer serves ${peer.origin}, not port ${context.peerPort}`);
    await writeFile(context.caFile, peer.ca);
    herald = await startHerald({
      services: ['account', 'audience', 'campaign', 'delivery'],
      env: {
        ...infra,
        LOG_LEVEL: 'warn',
        HERALD_NAMESPACE: namespace.prefix,
        // The metrics endpoint alone: traces stay unexported (OTEL_EXPORTER_OTLP_ENDPOINT would export them too).
        ...(otlp ? { OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: otlp.endpoint, OTEL_METRIC_EXPORT_INTERVAL: String(settings.scrapeMs) } : {}),
      },
      metrics: spec.metrics,
      processEnv: { delivery: { PUSH_CA_FILE: context.caFile }, gateway: { ALLOW_ANY_PUSH_SERVICE: 'true' } },
      nodeArgs: () => [...TELEMETRY_ARGS, ...profArgs],
    });
    // One after the other: each joins the consumer group (and waits out the rebalance) before its port opens.
    for (let index = 1; index < replicas; index += 1) await herald.addReplica('delivery');
    await context.seed(peer.origin);

    const deliveries = herald.instances.filter((instance) => instance.name === 'delivery');
    const watched = [
      { label: 'gateway', pid: herald.gateway.pid },
      ...(['account', 'audience', 'campaign'] as const).map((service) => ({ label: service, pid: herald?.services[service]?.pid })),
      ...deliveries.map((instance, index) => ({ label: `delivery #${index + 1}`, pid: instance.pid })),
      { label: 'push peer', pid: peer.process.pid },
    ];
    const monitor = new UsageMonitor(watched, [
      { label: 'postgres (all)', comm: 'postgres' },
      { label: 'kafka', comm: 'java' },
      { label: 'redis', comm: 'redis-server' },
    ]);
    const died = Promise.race([...herald.instances, herald.gateway, peer.process].map((instance) => instance.exited.then((code) => ({ instance, code }))));
    let dead: { instance: BenchProcess; code: number | string } | undefined;
    void died.then((value) => (dead = value));

    const gatewayUrl = `http://127.0.0.1:${herald.gatewayPort}`;
    log(`round "${name}": ${settings.via === 'send' ? 'POST /send' : 'POST /campaigns + /send'} to ${count(settings.subscribers)} subscribers${settings.placeholders ? ', per-subscriber placeholders' : ''}`);
    if (spec.metrics) {
      const urls = [herald.gateway, ...herald.instances].map((instance) => instance.metricsUrl);
      if (urls.some((url) => url === undefined)) throw new Error('a process was started without a metrics endpoint');
      scraper = scrapeEvery(urls as string[], settings.scrapeMs);
    }
    const loadAtStart = os.loadavg()[0] ?? 0;
    monitor.start();
    const windowFrom = monotonicMicros();
    const postStarted = performance.now();
    const { notificationId, sent } = await startSend(gatewayUrl, workspace.apiKey);
    const postMs = performance.now() - postStarted;
    log(`round "${name}": 200 in ${postMs.toFixed(0)} ms, sent ${count(sent)}, ${notificationId}`);

    const readNotification = async () => {
      const { rows } = await db.query<{ status: string; queued: string; delivered: string; fanout_done: boolean }>(
        'SELECT status, queued, delivered, fanout_done FROM campaign.campaigns WHERE id = $1',
        [notificationId],
      );
      return rows[0];
    };
    const progress: Progress[] = [];
    const peerStatsMs = { max: 0, calls: 0 };
    const { stats: readPeerStats } = peer;
    const pollPeer = async (): Promise<PeerStats> => {
      const started = performance.now();
      const stats = await readPeerStats();
      peerStatsMs.max = Math.max(peerStatsMs.max, performance.now() - started);
      peerStatsMs.calls += 1;
      return stats;
    };
    let peerStats = await pollPeer();
    let peerPolledAt = 0;
    let lastGrowthAt = performance.now();
    let lastDelivered = 0;
    let lastLog = 0;
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      if (dead) throw new Error(`${dead.instance.name} exited (${dead.code}) during the send:\n${dead.instance.output().slice(-4_000)}`);
      const row = await readNotification();
      const delivered = Number(row?.delivered ?? 0);
      let at = performance.now() - postStarted;
      const nearEnd = delivered >= sent * 0.98 || peerStats.accepted >= sent * 0.98;
      let accepted: number | null = null;
      if (at < 10_000 || nearEnd || at - peerPolledAt >= PEER_POLL_MS) {
        const stats = await pollPeer();
        at = performance.now() - postStarted;
        peerPolledAt = at;
        if (stats.accepted > peerStats.accepted) lastGrowthAt = performance.now();
        peerStats = stats;
        accepted = stats.accepted;
      }
      if (delivered > lastDelivered) lastGrowthAt = performance.now();
      lastDelivered = delivered;
      progress.push({ at, accepted, queued: Number(row?.queued ?? 0), delivered, fanoutDone: row?.fanout_done ?? false });
      if (at - lastLog >= 10_000) {
        lastLog = at;
        log(`  +${seconds(at)}: accepted ${count(peerStats.accepted)}, fanned out ${count(Number(row?.queued ?? 0))}${row?.fanout_done ? ' (done)' : ''}, counted delivered ${count(delivered)}`);
      }
      if (peerStats.accepted >= sent) break;
      if (at > settings.sendLimitMs) {
        log(`round "${name}": time limit of ${seconds(settings.sendLimitMs)} reached at ${count(peerStats.accepted)} accepted`);
        break;
      }
      if (performance.now() - lastGrowthAt > STALL_MS) {
        log(`round "${name}": no accepted push for ${seconds(STALL_MS)}; stopping the round`);
        break;
      }
    }
    const usage = monitor.stop();
    const load: [number, number] = [loadAtStart, os.loadavg()[0] ?? 0];
    const scrapes = await scraper?.stop();
    scraper = undefined;
    const window = { fromMicros: windowFrom, toMicros: monotonicMicros() };
    const reachedAll = peerStats.accepted >= sent;
    const last = progress.at(-1) as Progress;
    const lastAccepted = peerStats.accepted;
    log(`round "${name}": ${count(peerStats.accepted)} accepted after ${seconds(last.at)}; waiting for the notification to complete`);

    let completedMs: number | null = null;
    if (reachedAll) {
      const row = await eventually('notification completed', readNotification, (value) => value?.status === 'completed', COMPLETION_WAIT_MS).catch((err: unknown) => {
        log(`  ${err instanceof Error ? err.message : String(err)}`);
        return undefined;
      });
      if (row?.status === 'completed') completedMs = performance.now() - postStarted;
    }
    const { rows: statusRows } = await db.query<{ status: string; n: string }>(
      'SELECT status, count(*) AS n FROM delivery.deliveries WHERE notification_id = $1 GROUP BY status ORDER BY status',
      [notificationId],
    );
    const { rows: retryRows } = await db.query<{ n: string }>('SELECT count(*) AS n FROM delivery.retries WHERE notification_id = $1', [notificationId]);
    const finalStats = await peer.stats();

    const firstPushMs = progress.find((sample) => (sample.accepted ?? 0) > 0)?.at ?? null;
    const fanoutDoneMs = progress.find((sample) => sample.fanoutDone)?.at ?? null;
    const lastPushMs = reachedAll ? timeToReach(progress, sent) : null;
    const t10 = timeToReach(progress, sent * 0.1);
    const t90 = timeToReach(progress, sent * 0.9);
    const minuteAgo = progress.filter((sample) => sample.accepted !== null && sample.at <= last.at - 60_000).at(-1);
    const timeline = [0.25, 0.5, 0.75].map((share) => progress.find((sample) => sample.at >= share * last.at)).filter((sample): sample is Progress => sample !== undefined);

    // Before the processes stop: VmHWM is read by monitor.stop() above; now the stack goes.
    await herald.stop();
    await peer.process.stop();
    herald = undefined;
    peer = undefined;
    let outboxLeft = 0;
    for (const schema of OUTBOX_SCHEMAS) {
      const result = await db.query(`DELETE FROM ${schema}.outbox WHERE namespace = $1`, [namespace.prefix]).catch(() => ({ rowCount: 0 }));
      outboxLeft += result.rowCount ?? 0;
    }
    await removeNamespace();
    return {
      replicas,
      metrics: scrapes && otlp ? { scrape: scrapes, otlp: otlp.counts() } : null,
      load,
      postMs,
      sent,
      reachedAll,
      firstPushMs,
      fanoutDoneMs,
      lastPushMs,
      completedMs,
      accepted: peerStats.accepted,
      overallRate: peerStats.accepted / ((lastPushMs ?? last.at) / 1_000),
      steadyRate: t10 !== null && t90 !== null && t90 > t10 ? (sent * 0.8) / ((t90 - t10) / 1_000) : null,
      lastMinuteRate: minuteAgo ? (lastAccepted - (minuteAgo.accepted ?? 0)) / ((last.at - minuteAgo.at) / 1_000) : null,
      peer: finalStats,
      deliveries: Object.fromEntries(statusRows.map((row) => [row.status, Number(row.n)])),
      retries: Number(retryRows[0]?.n ?? 0),
      outboxLeft,
      usage,
      timeline,
      peerStatsMs,
      profiled: Object.fromEntries(watched.map(({ label, pid }) => [String(pid), { label: `${name}: ${label}`, window }])),
    };
  } finally {
    await scraper?.stop();
    await herald?.stop();
    await peer?.process.stop();
    await otlp?.close();
    await removeNamespace();
  }
}

// ---------------------------------------------------------------- report
/** The encryption's own CPU per push, timed in a process of its own on the services' Node (bench/encryption-cost.ts). */
async function encryptionCost(keyPoolFile: string): Promise<{ messages: number; payloadBytes: number; cpuMsPerPush: number }> {
  const worker = new URL('./encryption-cost.js', import.meta.url).pathname;
  const { stdout } = await run(process.execPath, [worker, keyPoolFile, String(ENCRYPTION_MESSAGES), String(PUSH_PAYLOAD_BYTES)]);
  return JSON.parse(stdout) as { messages: number; payloadBytes: number; cpuMsPerPush: number };
}

/** Herald's CPU per push outside the encryption: every process watched but the push peer, less the encryption's own cost. */
function outsideEncryptionMs(result: RoundResult, encryptionMsPerPush: number): number {
  const peer = result.usage.processes.find((process) => process.label === 'push peer')?.cpuSeconds ?? 0;
  return ((roundCpu(result).all - Math.max(0, peer)) * 1_000) / Math.max(1, result.accepted) - encryptionMsPerPush;
}

function roundReport(result: RoundResult, encryptionMsPerPush: number): string[] {
  const lines: string[] = [];
  const name = roundName({ replicas: result.replicas, metrics: result.metrics !== null });
  lines.push(`== ${name}`);
  if (result.metrics) {
    const { scrape, otlp } = result.metrics;
    lines.push(
      `metrics: ${scrape.scrapes} scrapes of /metrics (${count(Math.round(scrape.bytes / 1_024))} KiB, ${scrape.failures} failed), ${otlp.exports} OTLP exports received (${count(Math.round(otlp.bytes / 1_024))} KiB), every ${seconds(settings.scrapeMs)}`,
    );
  } else lines.push('metrics: off (METRICS_PORT=0, no OTLP endpoint: no meter provider)');
  lines.push(`${settings.via === 'send' ? 'POST /send' : 'POST /campaigns + /send'}: answered in ${result.postMs.toFixed(0)} ms, sent ${count(result.sent)}`);
  const at = (ms: number | null): string => (ms === null ? 'not reached' : `+${seconds(ms)}`);
  lines.push(
    `first push accepted ${at(result.firstPushMs)}; fan-out finished ${at(result.fanoutDoneMs)}; last push accepted ${at(result.lastPushMs)}; notification completed ${at(result.completedMs)}`,
  );
  const rate = (value: number | null): string => (value === null ? '-' : `${count(Math.round(value))}/s`);
  lines.push(`pushes/s: overall ${rate(result.overallRate)}, steady middle (10% -> 90%) ${rate(result.steadyRate)}, last minute ${rate(result.lastMinuteRate)}`);
  if (!result.reachedAll) {
    const remaining = result.sent - result.accepted;
    const pace = result.lastMinuteRate ?? result.overallRate;
    lines.push(`NOT FINISHED: ${count(result.accepted)} of ${count(result.sent)} accepted within the limit; at ${rate(pace)} the rest needs ~${seconds((remaining / pace) * 1_000)} more, ~${seconds((result.sent / pace) * 1_000)} for the whole send`);
  }
  lines.push(
    `push service: ${count(result.peer.accepted)} accepted of ${count(result.peer.requests)} requests, by status ${JSON.stringify(result.peer.byStatus)}, errors ${JSON.stringify(result.peer.errors)}, resets ${result.peer.resets}, pushes per endpoint ${JSON.stringify(result.peer.acceptedHistogram)}`,
  );
  lines.push(`deliveries by status ${JSON.stringify(result.deliveries)}, retries pending ${result.retries}, outbox rows left in the namespace ${result.outboxLeft}`);
  lines.push(
    `progress (fanned out / counted delivered): ${result.timeline.map((sample) => `+${seconds(sample.at)} ${count(sample.queued)} / ${count(sample.delivered)}`).join(', ')}`,
  );
  lines.push(`the driver polled /__peer/stats ${result.peerStatsMs.calls} times, the slowest round trip ${result.peerStatsMs.max.toFixed(0)} ms (the peer is blocked meanwhile); end times are ±1 s`);
  const { usage } = result;
  lines.push(`CPU and memory from the POST to the last accepted push (${seconds(usage.seconds * 1_000)}; cores: 1 = one core, per 1 s interval):`);
  const header = ['process', 'CPU s', 'share', 'CPU ms/push', 'cores mean', 'p90', 'max', 'peak RSS MiB', 'VmHWM MiB'];
  const perPush = (cpu: number | null): string => (cpu === null || result.accepted === 0 ? '-' : ((cpu * 1_000) / result.accepted).toFixed(3));
  const totalCpu = usage.processes.reduce((sum, p) => sum + (p.cpuSeconds ?? 0), 0) + usage.selfCpuSeconds;
  const rows = usage.processes.map((p) => [
    p.group ? `${p.label} (${p.group.processes} processes)` : p.label,
    p.cpuSeconds === null ? '-' : p.cpuSeconds.toFixed(1),
    p.cpuSeconds === null ? '-' : `${((100 * p.cpuSeconds) / totalCpu).toFixed(0)}%`,
    perPush(p.cpuSeconds),
    p.cores ? p.cores.mean.toFixed(2) : '-',
    p.cores ? p.cores.p90.toFixed(2) : '-',
    p.cores ? p.cores.max.toFixed(2) : '-',
    mib(p.peakRssKb),
    mib(p.hwmKb),
  ]);
  rows.push(['bench driver (this process)', usage.selfCpuSeconds.toFixed(1), `${((100 * usage.selfCpuSeconds) / totalCpu).toFixed(0)}%`, perPush(usage.selfCpuSeconds), (usage.selfCpuSeconds / usage.seconds).toFixed(2), '', '', '', '']);
  rows.push(['all of the above', totalCpu.toFixed(1), '100%', perPush(totalCpu), (totalCpu / usage.seconds).toFixed(2), '', '', '', '']);
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: string[]): string => `  ${cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0))).join('  ')}`;
  lines.push(line(header));
  for (const row of rows) lines.push(line(row));
  if (usage.machineBusyShare !== null) {
    const busyCores = usage.machineBusyShare * os.availableParallelism();
    lines.push(
      `  machine busy ${(usage.machineBusyShare * 100).toFixed(0)}% of ${os.availableParallelism()} cores (${busyCores.toFixed(2)} cores); listed processes ${(totalCpu / usage.seconds).toFixed(2)} cores; the rest (kernel, other users' processes) ${Math.max(0, busyCores - totalCpu / usage.seconds).toFixed(2)} cores`,
    );
  }
  const outside = outsideEncryptionMs(result, encryptionMsPerPush);
  lines.push(
    `  Herald's CPU per push outside the encryption: ${outside.toFixed(3)} ms (every process above but the push peer and this driver, less the encryption's own ${encryptionMsPerPush.toFixed(3)} ms); bar ${OUTSIDE_ENCRYPTION_BAR_MS} ms: ${outside <= OUTSIDE_ENCRYPTION_BAR_MS ? 'met' : 'NOT met'}`,
  );
  const postgres = usage.processes.find((p) => p.group && p.label.startsWith('postgres'));
  if (postgres?.group) {
    lines.push(
      `  postgres peak RSS = Σ private (RssAnon) of all its processes + the largest shared (RssShmem, shared buffers) once; Σ VmRSS (shared counted per process) peaked at ${mib(postgres.group.peakSumRssKb)} MiB; VmHWM = its largest process's. Kafka/Redis/PostgreSQL VmHWM are lifetime peaks of the long-running servers.`,
    );
  }
  return lines;
}

/**
 * CPU seconds of a round's processes: every one watched (not this driver), and Herald's own (not
 * the push peer, PostgreSQL, Kafka, Redis). A group whose processes exited inside the window (a
 * Kafka or PostgreSQL of other work on the machine restarted) comes out negative: it is left out.
 */
function roundCpu(result: RoundResult): { all: number; herald: number } {
  const cpu = (processes: UsageReport['processes']): number => processes.reduce((sum, process) => sum + Math.max(0, process.cpuSeconds ?? 0), 0);
  return { all: cpu(result.usage.processes), herald: cpu(result.usage.processes.filter((process) => !process.group && process.label !== 'push peer')) };
}

/** BENCH_METRICS=compare: CPU per push with metrics off and on, round by round and over all rounds of each, against the bar. */
function metricsCostReport(results: RoundResult[]): { lines: string[]; figures: Figure[] } {
  const perPush = (cpuSeconds: number, pushes: number): number => (cpuSeconds * 1_000) / Math.max(1, pushes);
  const lines = ['', `== the cost of metrics: CPU ms per push, off (METRICS_PORT=0, no OTLP) against on (scraped and exported every ${seconds(settings.scrapeMs)})`];
  const header = ['round', 'metrics', 'pushes', 'window', 'load avg', 'every process', 'Herald only', 'postgres', 'kafka'];
  const rows = results.map((result, index) => {
    const { all, herald } = roundCpu(result);
    const group = (prefix: string): string => {
      const found = result.usage.processes.find((process) => process.label.startsWith(prefix));
      return found?.cpuSeconds == null || found.cpuSeconds < 0 ? 'left out' : perPush(found.cpuSeconds, result.accepted).toFixed(4);
    };
    return [
      String(index + 1),
      result.metrics ? 'on' : 'off',
      count(result.accepted),
      seconds(result.usage.seconds * 1_000),
      `${result.load[0].toFixed(1)} -> ${result.load[1].toFixed(1)}`,
      perPush(all, result.accepted).toFixed(4),
      perPush(herald, result.accepted).toFixed(4),
      group('postgres'),
      group('kafka'),
    ];
  });
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: string[]): string => `  ${cells.map((cell, column) => cell.padStart(widths[column] ?? 0)).join('  ')}`;
  lines.push(line(header), ...rows.map(line));
  const total = (on: boolean) => {
    const chosen = results.filter((result) => (result.metrics !== null) === on);
    const pushes = chosen.reduce((sum, result) => sum + result.accepted, 0);
    const cpu = chosen.map(roundCpu);
    return { all: perPush(cpu.reduce((sum, value) => sum + value.all, 0), pushes), herald: perPush(cpu.reduce((sum, value) => sum + value.herald, 0), pushes) };
  };
  const off = total(false);
  const on = total(true);
  const extra = (a: number, b: number): string => `${b >= a ? '+' : ''}${((b / a - 1) * 100).toFixed(1)}%`;
  const pairs: string[] = [];
  const heraldPairs: string[] = [];
  for (let index = 0; index + 1 < results.length; index += 2) {
    const [first, second] = [results[index], results[index + 1]] as [RoundResult, RoundResult];
    pairs.push(extra(perPush(roundCpu(first).all, first.accepted), perPush(roundCpu(second).all, second.accepted)));
    heraldPairs.push(extra(perPush(roundCpu(first).herald, first.accepted), perPush(roundCpu(second).herald, second.accepted)));
  }
  const met = on.all / off.all - 1 <= METRICS_COST_BAR;
  lines.push(
    `  every process: off ${off.all.toFixed(4)}, on ${on.all.toFixed(4)} ms per push: ${extra(off.all, on.all)} (bar <= +${METRICS_COST_BAR * 100}%: ${met ? 'met' : 'NOT met'}); pair by pair ${pairs.join(', ')}`,
    `  Herald's processes only: off ${off.herald.toFixed(4)}, on ${on.herald.toFixed(4)} ms per push: ${extra(off.herald, on.herald)}; pair by pair ${heraldPairs.join(', ')}`,
    '  (PostgreSQL and Kafka are shared with whatever else runs on the machine: their CPU in a window includes it)',
  );
  return {
    lines,
    figures: [
      { name: 'CPU per push (every process), metrics off', value: Number(off.all.toFixed(4)), unit: 'ms', better: 'lower' },
      { name: 'CPU per push (every process), metrics on', value: Number(on.all.toFixed(4)), unit: 'ms', better: 'lower' },
      { name: 'CPU per push with metrics on / off', value: Number((on.all / off.all).toFixed(4)), unit: 'x', better: 'lower' },
      { name: "CPU per push (Herald's processes), metrics off", value: Number(off.herald.toFixed(4)), unit: 'ms', better: 'lower' },
      { name: "CPU per push (Herald's processes), metrics on", value: Number(on.herald.toFixed(4)), unit: 'ms', better: 'lower' },
    ],
  };
}

// ---------------------------------------------------------------- main
async function main(): Promise<number> {
  const infra = await infraEnv();
  const idleBusy = await backgroundLoad();
  if (idleBusy !== null) log(`machine busy before the run: ${(idleBusy * 100).toFixed(0)}% of ${os.availableParallelism()} cores`);
  if (idleBusy !== null && idleBusy > 0.15) log('warning: the machine is already busy (other processes); figures will be lower and noisier');

  const dir = await mkdtemp(join(os.tmpdir(), 'herald-bench-send-'));
  // Kept after the run, like the identity benchmark's.
  const profileDir = settings.cpuProfile ? await mkdtemp(join(os.tmpdir(), 'herald-bench-prof-')) : undefined;
  atCleanup(() => rm(dir, { recursive: true, force: true }));
  const keyPoolFile = join(dir, 'key-pool.json');
  const pool = generateKeyPool(settings.keyPool);
  await writeKeyPoolFile(keyPoolFile, pool);
  // Timed before the rounds, on the machine as quiet as it will be.
  const encryption = await encryptionCost(keyPoolFile);
  log(`encryption alone: ${encryption.cpuMsPerPush.toFixed(4)} ms CPU per push (${count(encryption.messages)} messages of ${encryption.payloadBytes} bytes, a process of its own)`);
  // Fixed for the whole run: the seeded endpoints carry it; each round's push peer listens on it.
  const peerPort = await freePort();

  const db = await connectDatabase();
  atCleanup(() => db.end());
  log('workspace on the enterprise plan via the admin CLI');
  const workspace = await admin<TestWorkspace>('workspace', 'create', '--name', `Bench send ${process.pid}-${Date.now()}`, '--plan', 'enterprise', '--domain', 'bench.test');
  atCleanup(async () => {
    log(`deleting the benchmark workspace's rows (${WORKSPACE_TABLES.join(', ')})`);
    const started = performance.now();
    const deleted = await deleteWorkspaceRows(db, workspace.workspaceId, WORKSPACE_TABLES);
    log(`deleted ${JSON.stringify(deleted)} in ${seconds(performance.now() - started)}`);
  });

  let seeding: Seeding | undefined;
  const results: RoundResult[] = [];
  for (const [index, spec] of rounds.entries()) {
    if (index > 0) {
      // Every round starts from the same state: no deliveries of the earlier send.
      const started = performance.now();
      const deleted = await deleteWorkspaceRows(db, workspace.workspaceId, DELIVERY_TABLES);
      log(`between rounds: deleted ${JSON.stringify(deleted)} and vacuumed in ${seconds(performance.now() - started)}`);
    }
    results.push(
      await runRound(spec, {
        db,
        infra,
        workspace,
        peerPort,
        keyPoolFile,
        caFile: join(dir, 'peer-ca.pem'),
        profileDir,
        seed: async (origin) => {
          // The audience service has migrated its schema by now (it is running).
          seeding ??= await seedAudience(db, workspace, origin, pool);
        },
      }),
    );
  }

  // ---------------------------------------------------------------- report
  const cpus = os.cpus();
  const lines: string[] = [''];
  lines.push(`Herald campaign send benchmark  ${new Date().toISOString()}`);
  lines.push(
    `machine: nproc ${os.availableParallelism()} (${cpus[0]?.model?.trim() ?? 'unknown cpu'}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}, load avg ${os
      .loadavg()
      .map((value) => value.toFixed(2))
      .join(' ')}`,
  );
  if (idleBusy !== null) lines.push(`machine busy before the run (background): ${(idleBusy * 100).toFixed(0)}%${idleBusy > 0.15 ? '  <- NOT idle: figures are depressed' : ''}`);
  lines.push(
    `settings: ${settings.via === 'send' ? 'POST /send' : 'a campaign'}${settings.placeholders ? ' with per-subscriber placeholders' : ''}, ${count(settings.subscribers)} subscribers, key pool ${settings.keyPool}, Kafka ${NAMESPACE_PARTITIONS} partitions per topic, push service count mode over TLS + HTTP/2 (max ${settings.peerStreams} streams), ${TUNING.map(([variable, fallback]) => `${variable}=${process.env[variable] ?? `${fallback} (default)`}`).join(', ')}, LOG_LEVEL=warn`,
  );
  lines.push(`encryption alone (RFC 8291 encrypt() in a process of its own, ${count(encryption.messages)} messages of ${encryption.payloadBytes} bytes): ${encryption.cpuMsPerPush.toFixed(4)} ms CPU per push`);
  if (seeding) {
    lines.push(`seeding: COPY ${count(seeding.rows)} rows in ${seconds(seeding.copyMs)} (${count(Math.round(seeding.rows / (seeding.copyMs / 1_000)))} rows/s), VACUUM ANALYZE ${seconds(seeding.vacuumMs)}`);
  }
  lines.push('');
  const summaryHeader = ['round', 'POST ms', 'last push', 'completed', 'pushes/s overall', 'steady', `<= ${TARGET_MS / 60_000} min`];
  const summary = results.map((result) => [
    roundName({ replicas: result.replicas, metrics: result.metrics !== null }),
    result.postMs.toFixed(0),
    result.lastPushMs === null ? `not in ${seconds(settings.sendLimitMs)}` : seconds(result.lastPushMs),
    result.completedMs === null ? '-' : seconds(result.completedMs),
    count(Math.round(result.overallRate)),
    result.steadyRate === null ? '-' : count(Math.round(result.steadyRate)),
    result.lastPushMs !== null && result.lastPushMs <= TARGET_MS ? 'yes' : 'no',
  ]);
  const widths = summaryHeader.map((title, column) => Math.max(title.length, ...summary.map((row) => (row[column] ?? '').length)));
  const line = (cells: string[]): string => cells.map((cell, column) => cell.padStart(widths[column] ?? 0)).join('  ');
  lines.push(line(summaryHeader));
  lines.push(widths.map((width) => '-'.repeat(width)).join('  '));
  for (const row of summary) lines.push(line(row));
  for (const result of results) lines.push('', ...roundReport(result, encryption.cpuMsPerPush));
  const metricsCost = settings.metricsCompare ? metricsCostReport(results) : undefined;
  if (metricsCost) lines.push(...metricsCost.lines);
  lines.push('');
  lines.push(
    `caveat: every process (services, gateway, push peer, PostgreSQL, Kafka, this driver) shares these ${os.availableParallelism()} cores; the push service is local and free, so the figures are Herald's own cost on one small box.`,
  );
  console.log(lines.join('\n'));
  if (profileDir) console.log(await summarizeProfileDir(profileDir, Object.assign({}, ...results.map((result) => result.profiled)) as Record<string, ProfiledProcess>));
  const recorded = recordRun(
    settings.metricsCompare ? 'send-metrics' : 'send',
    metricsCost?.figures ??
      results.flatMap((result): Figure[] => {
        const cpuSeconds = result.usage.processes.reduce((sum, process) => sum + (process.cpuSeconds ?? 0), 0);
        return [
          ...(result.lastPushMs === null ? [] : [{ name: `last push accepted, ${result.replicas} delivery replicas`, value: result.lastPushMs / 1_000, unit: 's', better: 'lower' as const }]),
          { name: `pushes/s overall, ${result.replicas} delivery replicas`, value: Math.round(result.overallRate), unit: '/s', better: 'higher' },
          { name: `CPU per push (every process), ${result.replicas} delivery replicas`, value: Number(((cpuSeconds * 1_000) / Math.max(1, result.accepted)).toFixed(4)), unit: 'ms', better: 'lower' },
          { name: `Herald CPU per push outside the encryption, ${result.replicas} delivery replicas`, value: Number(outsideEncryptionMs(result, encryption.cpuMsPerPush).toFixed(4)), unit: 'ms', better: 'lower' },
        ];
      }),
    { ...settings, rounds, tuning: Object.fromEntries(TUNING.map(([variable, fallback]) => [variable, process.env[variable] ?? fallback])) },
    idleBusy,
  );
  if (recorded) log(`recorded in ${recorded}`);
  log(`total ${seconds(elapsedSeconds() * 1_000)} before clean-up`);
  return results.every((result) => result.reachedAll && result.peer.accepted === result.sent && result.retries === 0) ? 0 : 1;
}

await runBench(main, HARD_DEADLINE_MS);
