#!/usr/bin/env node
// Benchmark: GET /api/v1/server/segments/{id}/count over a large audience (1,000,000 subscribers
// by default) through one gateway and the audience service, for a few representative segments:
// p50/p99/max of the whole HTTP round trip, one request at a time.
//
//   npm run bench:segments             (infra must be up, or this runs `deploy/infra.sh up`; build first)
//
// Settings (environment):
//   BENCH_SUBSCRIBERS=1000000      audience size (seeded with COPY straight into audience.subscribers)
//   BENCH_COUNTS=100               measured counts per segment (after 3 unmeasured ones)
//
// The subscribers vary in every dimension a segment filters on (tags, externalId, status,
// browser, os, country, customData, subscription time), with skewed, realistic shares. The
// benchmark workspace's rows (subscribers, segments) are deleted at the end, also on failure or
// Ctrl-C. Loopback only.
import { randomBytes } from 'node:crypto';
import os from 'node:os';

import { admin, call, connectDatabase, createKafkaNamespace, SERVER_API, type TestWorkspace } from '@herald/testkit';

import { atCleanup, elapsedSeconds, infraEnv, intEnv, log, reportHead, runBench } from './lib/bench.js';
import { seedSubscribers } from './lib/copy.js';
import { percentile } from './lib/load.js';
import { backgroundLoad } from './lib/processes.js';
import { recordRun, type Figure } from './lib/record.js';
import { startHerald } from './lib/stack.js';
import { createKeys, deleteWorkspaceRows, type Db } from './lib/workspace.js';

const settings = {
  subscribers: intEnv('BENCH_SUBSCRIBERS', 1_000_000),
  counts: intEnv('BENCH_COUNTS', 100),
};
const WARMUP_COUNTS = 3;
/** Rows per COPY chunk. */
const COPY_CHUNK_ROWS = 5_000;
/** The goal: a count "well under a second". */
const TARGET_MS = 1_000;
/** The enterprise plan allows 1,000 requests per key per minute: counts rotate over keys, ~300 each at most. */
const COUNTS_PER_KEY = 300;
const HARD_DEADLINE_MS = 20 * 60_000;
const DAY_MS = 86_400_000;

const count = (n: number): string => n.toLocaleString('en-US');
const seconds = (ms: number): string => `${(ms / 1_000).toFixed(1)} s`;

// ---------------------------------------------------------------- the audience, straight into PostgreSQL
const BROWSERS = ['Chrome 120', 'Chrome 121', 'Firefox 128', 'Safari 17', 'Edge 120', 'Samsung Internet 23'];
const BROWSER_SHARES = [40, 20, 12, 15, 9, 4];
const SYSTEMS = ['Windows 11', 'Windows 10', 'Mac OS X', 'Android 14', 'iOS 17', 'Linux'];
const SYSTEM_SHARES = [30, 15, 15, 22, 14, 4];
const COUNTRIES = ['US', 'DE', 'FR', 'GB', 'BR', 'IN', 'JP', 'ES', 'IT', 'CA', 'NL', 'PL', 'SE', 'MX', 'AU'];
const COUNTRY_SHARES = [25, 12, 10, 9, 8, 8, 5, 5, 4, 4, 3, 2, 2, 2, 1];
const PLANS = ['free', 'pro', 'team'];
const PLAN_SHARES = [80, 15, 5];
const TOPICS = ['news', 'sports', 'tech', 'deals', 'music', 'travel', 'food', 'games'];

/** A cheap deterministic hash of (index, salt): the same audience on every run. */
function mix(index: number, salt: number): number {
  let x = (index + 1) * 0x9e3779b1 + salt * 0x85ebca6b;
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d);
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b);
  return (x ^ (x >>> 16)) >>> 0;
}

/** One of `values`, with weights `shares` (percent), by hash. */
function pick<T>(values: readonly T[], shares: readonly number[], index: number, salt: number): T {
  let roll = mix(index, salt) % 100;
  for (const [position, share] of shares.entries()) {
    if (roll < share) return values[position] as T;
    roll -= share;
  }
  return values[values.length - 1] as T;
}

/** The subscriber's tags: one to three topics, `vip` for 2%, `churned` for 10%. */
function tagsOf(index: number): string[] {
  const tags = new Set<string>();
  const topics = 1 + (mix(index, 1) % 3);
  for (let topic = 0; topic < topics; topic += 1) tags.add(TOPICS[mix(index, 10 + topic) % TOPICS.length] as string);
  if (mix(index, 2) % 100 < 2) tags.add('vip');
  if (mix(index, 3) % 100 < 10) tags.add('churned');
  return [...tags];
}

async function* subscriberRows(workspace: TestWorkspace, idPrefix: string, now: number): AsyncGenerator<string> {
  const statuses = ['active', 'unsubscribed', 'expired', 'bounced'];
  let chunk = '';
  for (let index = 0; index < settings.subscribers; index += 1) {
    const id = `${idPrefix}${index.toString(32).padStart(6, '0')}`;
    const status = pick(statuses, [94, 3, 2, 1], index, 4);
    // 60% are identified users.
    const externalId = mix(index, 5) % 100 < 60 ? `user-${index}` : '\\N';
    const customData = JSON.stringify({ plan: pick(PLANS, PLAN_SHARES, index, 6), score: mix(index, 7) % 100 });
    // Spread over the last year.
    const createdAt = new Date(now - (mix(index, 8) % 365) * DAY_MS - (mix(index, 9) % DAY_MS)).toISOString();
    const columns = [
      id,
      workspace.workspaceId,
      workspace.siteId,
      status,
      externalId,
      `{${tagsOf(index).join(',')}}`,
      customData,
      `https://push.bench.test/${id}`,
      'p256dh',
      'auth',
      pick(BROWSERS, BROWSER_SHARES, index, 11),
      pick(SYSTEMS, SYSTEM_SHARES, index, 12),
      pick(COUNTRIES, COUNTRY_SHARES, index, 13),
      createdAt,
    ];
    chunk += `${columns.join('\t')}\n`;
    if ((index + 1) % COPY_CHUNK_ROWS === 0) {
      yield chunk;
      chunk = '';
    }
  }
  if (chunk) yield chunk;
}

const COLUMNS = ['id', 'workspace_id', 'site_id', 'status', 'external_id', 'tags', 'custom_data', 'endpoint', 'p256dh', 'auth', 'browser', 'os', 'country', 'created_at'];

// ---------------------------------------------------------------- the segments measured
const monthAgo = new Date(Date.now() - 30 * DAY_MS).toISOString();
const SEGMENTS: Array<{ name: string; filter: Record<string, unknown> }> = [
  { name: 'everyone', filter: {} },
  { name: 'rare tag (vip)', filter: { tags: { all: ['vip'] } } },
  { name: 'tags any + none', filter: { tags: { any: ['news', 'sports'], none: ['churned'] } } },
  { name: 'country + browser', filter: { country: ['FR', 'DE'], browser: ['Chrome'] } },
  { name: 'customData plan=pro', filter: { customData: { plan: 'pro' } } },
  { name: 'last 30 days, identified', filter: { createdAfter: monthAgo, hasExternalId: true } },
  { name: 'os + status', filter: { os: ['iOS', 'Mac OS'], status: ['active', 'unsubscribed'] } },
  {
    name: 'every dimension',
    filter: {
      tags: { all: ['tech'], any: ['deals', 'games'], none: ['churned'] },
      hasExternalId: true,
      status: ['active'],
      browser: ['Chrome', 'Edge'],
      os: ['Windows'],
      country: ['US', 'GB', 'CA'],
      customData: { plan: 'free' },
      createdAfter: new Date(Date.now() - 180 * DAY_MS).toISOString(),
    },
  },
];

interface Measured {
  name: string;
  active: number;
  total: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

// ---------------------------------------------------------------- main
async function main(): Promise<number> {
  const infra = await infraEnv();
  const idleBusy = await backgroundLoad();
  if (idleBusy !== null) log(`machine busy before the run: ${(idleBusy * 100).toFixed(0)}% of ${os.availableParallelism()} cores`);
  if (idleBusy !== null && idleBusy > 0.15) log('warning: the machine is already busy (other processes); figures will be higher and noisier');

  const db = await connectDatabase();
  atCleanup(() => db.end());
  log('workspace on the enterprise plan via the admin CLI');
  const workspace = await admin<TestWorkspace>('workspace', 'create', '--name', `Bench segments ${process.pid}-${Date.now()}`, '--plan', 'enterprise', '--domain', 'bench.test');
  atCleanup(async () => {
    log('deleting the benchmark workspace\'s subscribers and segments');
    const deleted = await deleteWorkspaceRows(db, workspace.workspaceId, ['audience.segments', 'audience.subscribers']);
    log(`deleted ${JSON.stringify(deleted)}`);
  });
  const requests = SEGMENTS.length * (settings.counts + WARMUP_COUNTS) + SEGMENTS.length;
  const keys = [workspace.apiKey, ...(await createKeys(workspace.workspaceId, Math.max(1, Math.ceil(requests / COUNTS_PER_KEY))))];

  const namespace = await createKafkaNamespace();
  atCleanup(() => namespace.remove());
  // The audience service migrates its schema (segments, indexes) before its port opens.
  const herald = await startHerald({ services: ['account', 'audience'], env: { ...infra, LOG_LEVEL: 'warn', HERALD_NAMESPACE: namespace.prefix } });
  const seeding = await seedSubscribers(db, COLUMNS, subscriberRows(workspace, `sub_${randomBytes(5).toString('hex')}`, Date.now()), settings.subscribers);
  const gatewayUrl = `http://127.0.0.1:${herald.gatewayPort}`;
  let sent = 0;
  const api = async <T>(path: string, options: { method?: string; body?: unknown } = {}): Promise<{ status: number; body: T }> => {
    sent += 1;
    return call<T & Record<string, unknown>>(gatewayUrl, `${SERVER_API}${path}`, { key: keys[sent % keys.length] as string, ...options });
  };

  const results: Measured[] = [];
  for (const segment of SEGMENTS) {
    const created = await api<{ id: string }>('/segments', { method: 'POST', body: segment });
    if (created.status !== 201) throw new Error(`POST /segments answered ${created.status}: ${JSON.stringify(created.body)}`);
    const path = `/segments/${created.body.id}/count`;
    const timings: number[] = [];
    let last = { active: 0, total: 0 };
    for (let round = 0; round < WARMUP_COUNTS + settings.counts; round += 1) {
      const started = performance.now();
      const response = await api<{ active: number; total: number }>(path);
      const ms = performance.now() - started;
      if (response.status !== 200) throw new Error(`GET ${path} answered ${response.status}: ${JSON.stringify(response.body)}`);
      last = response.body;
      if (round >= WARMUP_COUNTS) timings.push(ms);
    }
    timings.sort((a, b) => a - b);
    const result = {
      name: segment.name,
      ...last,
      p50: percentile(timings, 50),
      p99: percentile(timings, 99),
      max: timings.at(-1) ?? Number.NaN,
      mean: timings.reduce((sum, ms) => sum + ms, 0) / timings.length,
    };
    log(`${segment.name}: active ${count(result.active)}, total ${count(result.total)}, p50 ${result.p50.toFixed(1)} ms, p99 ${result.p99.toFixed(1)} ms`);
    results.push(result);
  }

  // ---------------------------------------------------------------- report
  const lines: string[] = ['', ...reportHead('Herald segment count benchmark', idleBusy)];
  lines.push(
    `settings: ${count(settings.subscribers)} subscribers in one workspace, ${settings.counts} measured counts per segment (after ${WARMUP_COUNTS}), one at a time through one gateway; seeding: COPY ${seconds(seeding.copyMs)}, VACUUM ANALYZE ${seconds(seeding.vacuumMs)}`,
  );
  lines.push('');
  const header = ['segment', 'active', 'total', 'p50 ms', 'p99 ms', 'max ms', 'mean ms', `< ${TARGET_MS} ms`];
  const rows = results.map((result) => [
    result.name,
    count(result.active),
    count(result.total),
    result.p50.toFixed(1),
    result.p99.toFixed(1),
    result.max.toFixed(1),
    result.mean.toFixed(1),
    result.p99 < TARGET_MS ? 'yes' : 'no',
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: string[]): string => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0))).join('  ');
  lines.push(line(header));
  lines.push(widths.map((width) => '-'.repeat(width)).join('  '));
  for (const row of rows) lines.push(line(row));
  lines.push('');
  lines.push(`caveat: the gateway, the services, PostgreSQL, Kafka and this driver share these ${os.availableParallelism()} cores.`);
  console.log(lines.join('\n'));
  const recorded = recordRun(
    'segments',
    results.flatMap((result): Figure[] => [
      { name: `${result.name}: count p50`, value: Number(result.p50.toFixed(1)), unit: 'ms', better: 'lower' },
      { name: `${result.name}: count p99`, value: Number(result.p99.toFixed(1)), unit: 'ms', better: 'lower' },
    ]),
    settings,
    idleBusy,
  );
  if (recorded) log(`recorded in ${recorded}`);
  log(`total ${seconds(elapsedSeconds() * 1_000)} before clean-up`);
  return results.every((result) => result.p99 < TARGET_MS) ? 0 : 1;
}

await runBench(main, HARD_DEADLINE_MS);
