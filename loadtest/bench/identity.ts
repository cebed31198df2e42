#!/usr/bin/env node
// Benchmark: authenticated GET /api/v1/server/identity through one gateway
// (HTTP -> cached key auth -> Redis Lua rate limiter -> gRPC -> account service -> PostgreSQL),
// side by side with a bare fastify GET / as the baseline, same load settings, same run.
//
//   npm run bench                      (infra must be up, or this runs `deploy/infra.sh up`)
//
// Settings (environment):
//   BENCH_CONNECTIONS=32  BENCH_WARMUP_S=3  BENCH_DURATION_S=15  BENCH_KEYS=64 (initial key count)
//   BENCH_TELEMETRY_OFF=1   adds a row: the same stack with OTEL_SDK_DISABLED=true
//   BENCH_CPU_PROF=1        runs the gateway (and account service) with --cpu-prof and prints a summary
//
// The rate limiter stays on. The enterprise plan allows 1000 requests per key per sliding minute
// and the whole run is shorter than a minute, so every request a key makes counts against it:
// requests rotate round-robin over many keys, enough that none nears 1000 (checked; more keys are
// created after the warm-up if the measured rate needs them). Any non-2xx is counted and printed.
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';

import { TELEMETRY_ARGS } from '@herald/launcher';
import { admin, freePort, type TestWorkspace } from '@herald/testkit';

import { atCleanup, infraEnv, intEnv, log, reportHead, runBench } from './lib/bench.js';
import { getRequest, runLoad, type LoadResult } from './lib/load.js';
import { backgroundLoad, cpuSeconds, cpuSecondsByName, machineJiffies, startProcess, type BenchProcess, type Jiffies } from './lib/processes.js';
import { summarizeProfileDir, type ProfiledProcess, type ProfileWindow } from './lib/profile.js';
import { loadFigures, recordRun } from './lib/record.js';
import { startHerald } from './lib/stack.js';
import { createKeys, KEY_BUDGET, keysNeeded, PLAN_LIMIT } from './lib/workspace.js';

const settings = {
  connections: intEnv('BENCH_CONNECTIONS', 32),
  warmupMs: intEnv('BENCH_WARMUP_S', 3) * 1_000,
  durationMs: intEnv('BENCH_DURATION_S', 15) * 1_000,
  initialKeys: intEnv('BENCH_KEYS', 64),
  telemetryOffRow: process.env.BENCH_TELEMETRY_OFF === '1',
  cpuProfile: process.env.BENCH_CPU_PROF === '1',
};
/** Re-warm at the start of the measured run (new sockets; auth cache of keys added after the warm-up). */
const REWARM_MS = 1_000;
const HARD_DEADLINE_MS = 150_000;
const IDENTITY_PATH = '/api/v1/server/identity';
/** The baseline server, compiled from bench/bare-server.ts; relative to the repository root. */
const BARE_SERVER_ENTRY = 'loadtest/dist/bench/bare-server.js';
/** Infrastructure processes whose CPU is reported too: [command name, label]. */
const INFRA_PROCESSES = [
  ['postgres', 'postgres'],
  ['redis-server', 'redis'],
  ['java', 'kafka'],
] as const;

// ---------------------------------------------------------------- the Herald stack
interface HeraldStack {
  gatewayPort: number;
  processes: { gateway: BenchProcess; account: BenchProcess; audience: BenchProcess };
  stop(): Promise<void>;
}

async function startIdentityStack(infra: Record<string, string>, { telemetry, profileDir }: { telemetry: boolean; profileDir: string | undefined }): Promise<HeraldStack> {
  const profArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  const herald = await startHerald({
    services: ['account', 'audience'],
    env: { ...infra, LOG_LEVEL: 'warn', ...(telemetry ? {} : { OTEL_SDK_DISABLED: 'true' }) },
    // Profiles of the gateway and the account service only.
    nodeArgs: (name) => [...TELEMETRY_ARGS, ...(name === 'audience' ? [] : profArgs)],
  });
  const { account, audience } = herald.services;
  if (!account || !audience) throw new Error('account and audience services were not started');
  return { gatewayPort: herald.gatewayPort, processes: { gateway: herald.gateway, account, audience }, stop: () => herald.stop() };
}

// ---------------------------------------------------------------- one scenario
interface ScenarioOptions {
  name: string;
  port: number;
  makeRequests: () => Buffer[];
  processes: Record<string, BenchProcess>;
  beforeMeasure?: (warm: LoadResult) => Promise<Buffer[]>;
  watchHeader?: string;
}

interface Sample {
  values: Record<string, number | null>;
  loadgen: NodeJS.CpuUsage;
  machine: Jiffies | null;
  at: number;
  monotonicMicros: number;
}

interface ScenarioResult {
  name: string;
  warm: LoadResult;
  measured: LoadResult;
  /** Cores busy (1 = one core) per label over the measured window. */
  cpu: Record<string, number>;
  machine: { busyCores: number; busyShare: number } | null;
  requests: Buffer[];
  window: ProfileWindow | undefined;
  keys?: { count: number; maxPerKey: number; minRemaining: number | null };
  /** pid -> label and measured window, for the CPU profiles. */
  pids?: Record<string, ProfiledProcess>;
}

/**
 * Warm-up run, then (optionally) `beforeMeasure` (e.g. to add keys), then the measured run with a
 * short re-warm. CPU use of `processes` and of the whole machine is sampled over the measured window.
 */
async function scenario({ name, port, makeRequests, processes, beforeMeasure, watchHeader }: ScenarioOptions): Promise<ScenarioResult> {
  log(`${name}: warm-up ${settings.warmupMs / 1_000} s x ${settings.connections} connections`);
  let requests = makeRequests();
  const warm = await runLoad({ host: '127.0.0.1', port, requests, connections: settings.connections, warmupMs: 0, durationMs: settings.warmupMs, watchHeader });
  log(`${name}: warm-up ${warm.rps.toFixed(0)} req/s, statuses ${JSON.stringify(warm.statuses)}`);
  if (beforeMeasure) requests = await beforeMeasure(warm);

  const sample = (): Sample => {
    const values: Record<string, number | null> = {};
    for (const [label, proc] of Object.entries(processes)) values[label] = cpuSeconds(proc.pid);
    const infra = cpuSecondsByName(INFRA_PROCESSES.map(([comm]) => comm));
    for (const [comm, label] of INFRA_PROCESSES) values[label] = infra?.[comm] ?? null;
    return { values, loadgen: process.cpuUsage(), machine: machineJiffies(), at: performance.now(), monotonicMicros: Number(process.hrtime.bigint() / 1000n) };
  };
  // Filled by the load generator's window callbacks.
  const samples: { before?: Sample; after?: Sample } = {};
  log(`${name}: measuring ${settings.durationMs / 1_000} s (after ${REWARM_MS / 1_000} s re-warm)`);
  const measured = await runLoad({
    host: '127.0.0.1',
    port,
    requests,
    connections: settings.connections,
    warmupMs: REWARM_MS,
    durationMs: settings.durationMs,
    watchHeader,
    onWindowStart: () => (samples.before = sample()),
    onWindowEnd: () => (samples.after = sample()),
  });
  const { before, after } = samples;
  const cpu: Record<string, number> = {};
  let machine: ScenarioResult['machine'] = null;
  if (before && after) {
    const seconds = (after.at - before.at) / 1_000;
    for (const [label, start] of Object.entries(before.values)) {
      const end = after.values[label];
      if (start !== null && end !== null && end !== undefined) cpu[label] = Math.max(0, end - start) / seconds;
    }
    const loadgenMicros = after.loadgen.user + after.loadgen.system - before.loadgen.user - before.loadgen.system;
    cpu.loadgen = loadgenMicros / 1e6 / seconds;
    if (before.machine && after.machine) {
      const busy = after.machine.busy - before.machine.busy;
      const total = after.machine.total - before.machine.total;
      machine = { busyCores: (busy / total) * os.availableParallelism(), busyShare: busy / total };
    }
  }
  log(`${name}: ${measured.rps.toFixed(0)} req/s, p50 ${measured.p50.toFixed(2)} ms, p99 ${measured.p99.toFixed(2)} ms, statuses ${JSON.stringify(measured.statuses)}`);
  const window = before && after ? { fromMicros: before.monotonicMicros, toMicros: after.monotonicMicros } : undefined;
  return { name, warm, measured, cpu, machine, requests, window };
}

interface GatewayScenarioOptions {
  name: string;
  infra: Record<string, string>;
  workspaceId: string;
  /** The workspace's own dashboard key, used as the first key when given. */
  firstKey?: string;
  telemetry: boolean;
  profileDir: string | undefined;
}

async function gatewayScenario({ name, infra, workspaceId, firstKey, telemetry, profileDir }: GatewayScenarioOptions): Promise<ScenarioResult> {
  let keys = [...(firstKey ? [firstKey] : []), ...(await createKeys(workspaceId, settings.initialKeys - (firstKey ? 1 : 0)))];
  log(`${name}: ${keys.length} keys ready; starting account + audience + gateway`);
  const stack = await startIdentityStack(infra, { telemetry, profileDir });
  try {
    // One request by hand first: it must succeed, and must carry the limiter's headers.
    const response = await fetch(`http://127.0.0.1:${stack.gatewayPort}${IDENTITY_PATH}`, { headers: { authorization: `Bearer ${keys[0]}` } });
    const body = (await response.json()) as { plan?: { name?: string } };
    if (response.status !== 200) throw new Error(`sanity request failed: ${response.status} ${JSON.stringify(body)}`);
    const limitHeader = response.headers.get('x-ratelimit-limit');
    if (body.plan?.name !== 'enterprise' || Number(limitHeader) !== PLAN_LIMIT) {
      throw new Error(`expected the enterprise plan with x-ratelimit-limit ${PLAN_LIMIT}, got plan ${body.plan?.name}, header ${limitHeader}`);
    }
    const makeRequests = (): Buffer[] => keys.map((key) => getRequest('127.0.0.1', stack.gatewayPort, IDENTITY_PATH, { Authorization: `Bearer ${key}` }));
    const result = await scenario({
      name,
      port: stack.gatewayPort,
      makeRequests,
      processes: { gateway: stack.processes.gateway, account: stack.processes.account },
      watchHeader: 'x-ratelimit-remaining',
      beforeMeasure: async (warm) => {
        const needed = keysNeeded({
          rps: warm.rps,
          usedPerKey: Math.max(...warm.perRequestIndex),
          keyCount: keys.length,
          runMs: REWARM_MS + settings.durationMs,
          connections: settings.connections,
        });
        if (needed > keys.length) {
          log(`${name}: warm-up rate needs ${needed} keys to stay under ${KEY_BUDGET}/key: creating ${needed - keys.length} more`);
          keys = [...keys, ...(await createKeys(workspaceId, needed - keys.length))];
        }
        // New keys join the rotation; from here on every key gets the same share.
        return makeRequests();
      },
    });
    // Requests per key over the whole run (warm-up + measured): the limiter counts all of them.
    const perKey = keys.map(
      (_, index) => (result.warm.perRequestIndex[index] ?? 0) + (result.measured.perRequestIndex[index] ?? 0) + (index === 0 ? 1 : 0),
    );
    result.keys = { count: keys.length, maxPerKey: Math.max(...perKey), minRemaining: result.measured.watchedMin };
    result.pids = Object.fromEntries(
      Object.entries(stack.processes).map(([label, proc]) => [String(proc.pid), { label: `${name}: ${label}`, window: result.window }]),
    );
    return result;
  } finally {
    await stack.stop();
  }
}

// ---------------------------------------------------------------- main
function fmt(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : '-';
}

async function main(): Promise<number> {
  const infra = await infraEnv();
  const idleBusy = await backgroundLoad();
  if (idleBusy !== null) log(`machine busy before the run: ${(idleBusy * 100).toFixed(0)}% of ${os.availableParallelism()} cores`);
  if (idleBusy !== null && idleBusy > 0.15) log('warning: the machine is already busy (other processes); figures will be lower and noisier');
  const profileDir = settings.cpuProfile ? await mkdtemp(join(os.tmpdir(), 'herald-bench-prof-')) : undefined;
  log(`workspace on the enterprise plan via the admin CLI`);
  const workspace = await admin<TestWorkspace>('workspace', 'create', '--name', `Bench ${process.pid}-${Date.now()}`, '--plan', 'enterprise', '--domain', 'bench.test');

  const results: ScenarioResult[] = [];

  // Baseline first: a bare fastify app in its own process.
  const barePort = await freePort();
  const bare = await startProcess({ name: 'bare', entry: BARE_SERVER_ENTRY, port: barePort, env: { PORT: String(barePort) } });
  try {
    const request = getRequest('127.0.0.1', barePort, '/');
    results.push(await scenario({ name: 'bare fastify GET /', port: barePort, makeRequests: () => [request], processes: { bare } }));
  } finally {
    await bare.stop();
  }

  results.push(
    await gatewayScenario({
      name: 'gateway GET /identity',
      infra,
      workspaceId: workspace.workspaceId,
      firstKey: workspace.apiKey,
      telemetry: true,
      profileDir,
    }),
  );
  if (settings.telemetryOffRow) {
    // Fresh keys: the previous ones still carry their last minute of requests in Redis.
    results.push(await gatewayScenario({ name: 'gateway, OTel SDK off', infra, workspaceId: workspace.workspaceId, telemetry: false, profileDir }));
  }

  // ---------------------------------------------------------------- report
  const lines: string[] = ['', ...reportHead('Herald identity benchmark', idleBusy)];
  lines.push(
    `load: ${settings.connections} keep-alive connections, closed loop (1 request in flight per connection), ${settings.warmupMs / 1_000} s warm-up + ${REWARM_MS / 1_000} s re-warm, ${settings.durationMs / 1_000} s measured; 127.0.0.1 only`,
  );
  lines.push('');
  const header = ['scenario', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'requests', 'errors'];
  const rows = results.map((result) => {
    const { measured } = result;
    const errors = measured.nonOk + measured.socketErrors + measured.timeouts + measured.dropped;
    return [result.name, fmt(measured.rps, 0), fmt(measured.p50, 2), fmt(measured.p90, 2), fmt(measured.p99, 2), fmt(measured.max, 1), String(measured.requests), String(errors)];
  });
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: string[]): string =>
    cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0))).join('  ');
  lines.push(line(header));
  lines.push(widths.map((width) => '-'.repeat(width)).join('  '));
  for (const row of rows) lines.push(line(row));
  lines.push('');
  for (const result of results) {
    const { measured } = result;
    const parts = [`statuses ${JSON.stringify(measured.statuses)}`, `non-2xx ${measured.nonOk}`];
    if (measured.statuses[429]) parts.push(`429s ${measured.statuses[429]} (RATE LIMITED)`);
    else parts.push('429s 0');
    parts.push(`socket errors ${measured.socketErrors}, timeouts ${measured.timeouts}, dropped ${measured.dropped}`);
    lines.push(`${result.name}: ${parts.join('; ')}`);
    if (result.keys) {
      lines.push(
        `  rate limiter on: ${result.keys.count} keys round-robin, at most ${result.keys.maxPerKey} requests on one key in the run (limit ${PLAN_LIMIT}/min), lowest x-ratelimit-remaining seen ${result.keys.minRemaining}`,
      );
    }
    const cpuParts = Object.entries(result.cpu).map(([label, cores]) => `${label} ${(cores * 100).toFixed(0)}%`);
    if (result.machine) {
      const known = Object.values(result.cpu).reduce((sum, cores) => sum + cores, 0);
      cpuParts.push(`everything else (audience, kernel, other users' processes) ${(Math.max(0, result.machine.busyCores - known) * 100).toFixed(0)}%`);
      cpuParts.push(`machine busy ${(result.machine.busyShare * 100).toFixed(0)}% of ${os.availableParallelism()} cores`);
    }
    const perRequest = Object.entries(result.cpu)
      .filter(([label, cores]) => label !== 'kafka' && label !== 'loadgen' && cores > 0.005)
      .map(([label, cores]) => `${label} ${((cores * 1_000) / measured.rps).toFixed(3)}`);
    if (perRequest.length && measured.rps > 0) lines.push(`  CPU ms per request: ${perRequest.join(', ')}`);
    if (cpuParts.length) lines.push(`  CPU during the measured window (100% = one core): ${cpuParts.join(', ')}`);
    if (result.cpu.postgres !== undefined) lines.push('  (postgres and redis figures are the whole servers, shared with anything else using them)');
  }
  const [first, second] = results;
  if (first && second) {
    lines.push(`\n${second.name} vs ${first.name}: ${fmt(first.measured.rps / second.measured.rps, 1)}x fewer req/s, p50 ${fmt(second.measured.p50 / first.measured.p50, 1)}x higher`);
  }
  lines.push('');
  lines.push(
    `caveat: everything (load generator, gateway, account service, PostgreSQL, Redis, Kafka) shares these ${os.availableParallelism()} cores, so the figures are CPU-bound on one small box and only comparable with each other, not with a deployed fleet.`,
  );
  console.log(lines.join('\n'));
  const recorded = recordRun('identity', results.flatMap(({ name, measured }) => loadFigures(name, measured)), settings, idleBusy);
  if (recorded) log(`recorded in ${recorded}`);

  if (profileDir) {
    const labels: NonNullable<ScenarioResult['pids']> = {};
    for (const result of results) Object.assign(labels, result.pids);
    console.log(await summarizeProfileDir(profileDir, labels));
  }
  const anyErrors = results.some((result) => result.measured.nonOk + result.measured.socketErrors + result.measured.timeouts + result.measured.dropped > 0);
  return anyErrors ? 1 : 0;
}

await runBench(main, HARD_DEADLINE_MS);
