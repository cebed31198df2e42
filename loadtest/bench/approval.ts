#!/usr/bin/env node
// Benchmark: human approval at scale, on this machine, through two gateway replicas (A and B) on
// one set of services (account, audience, policy, decision), in a workspace whose approval mode is
// `terminal` (no push is sent, so no campaign or delivery service is needed).
//
//   npm run bench:approval             (infra must be up, or this runs `deploy/infra.sh up`)
//
// 1. Answer -> waiting caller: after a warm-up round, BENCH_QUESTIONS decisions per level of
//    BENCH_CONCURRENCY (a list, default 10,200: how many are in flight at once); each is opened through A, held by GET /decisions/{id}?wait=true on A, and answered through B 100 ms
//    after the waiter's request was written. Times t(answer written) -> t(waiter's response
//    complete), and the answer's own round trip. Bar: p99 <= 50 ms.
// 2. Held waiters: BENCH_WAITERS decisions, then as many simultaneous waits on A (one socket
//    each); A's memory before and while all are held; then every one answered through B at
//    BENCH_ANSWER_RATE per second, and every waiter must wake with `answered`. Bar: >= 10,000.
// 3. POST /authorize (a Cedar policy with permits, forbids and one @requires_human; bodies giving
//    allow, deny and requires_human) with the closed-loop generator, next to GET /identity.
//
// The rate limiter stays on (enterprise plan: 1000 requests per key per sliding minute): each
// part spreads its requests over fresh keys so that none passes 850, and any 429 is an error.
// Loopback only; every process stops at the end and the workspace's decisions, authorizations and
// policy are deleted.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

import { admin, connectDatabase, createKafkaNamespace, SERVER_API, type TestWorkspace } from '@herald/testkit';

import { atCleanup, infraEnv, intEnv, log, reportHead, runBench } from './lib/bench.js';
import { getRequest, percentile, postRequest, runLoad, type LoadResult } from './lib/load.js';
import { backgroundLoad, cpuSeconds, memoryOf, socketCount, type BenchProcess } from './lib/processes.js';
import { loadFigures, recordRun, type Figure } from './lib/record.js';
import { startHerald } from './lib/stack.js';
import { UsageMonitor, type UsageReport } from './lib/usage.js';
import { createKeys, deleteWorkspaceRows, KEY_BUDGET, keysNeeded, PLAN_LIMIT } from './lib/workspace.js';

function levelList(value: string): number[] {
  const levels = value.split(',').map((part) => Number(part.trim()));
  if (levels.length === 0 || levels.some((n) => !Number.isInteger(n) || n < 1 || n > 1_000)) {
    throw new Error('BENCH_CONCURRENCY must be a comma-separated list of levels (1-1000), e.g. "10,200"');
  }
  return levels;
}

/** Part 1's warm-up round: decisions, and how many at once. */
const WARMUP_QUESTIONS = 300;
const WARMUP_CONCURRENCY = 20;

const settings = {
  questions: intEnv('BENCH_QUESTIONS', 1_000),
  /** Part 1 runs once per level: how many decisions are in flight at once. */
  concurrency: levelList(process.env.BENCH_CONCURRENCY ?? '10,200'),
  waiters: intEnv('BENCH_WAITERS', 10_000),
  answerRate: intEnv('BENCH_ANSWER_RATE', 1_000),
  connections: intEnv('BENCH_CONNECTIONS', 32),
  warmupMs: intEnv('BENCH_WARMUP_S', 3) * 1_000,
  durationMs: intEnv('BENCH_DURATION_S', 15) * 1_000,
  initialKeys: intEnv('BENCH_KEYS', 64),
};
const HARD_DEADLINE_MS = 900_000;
/** Part 1: how long after the waiter's request is written the answer goes out (time to subscribe). */
const SUBSCRIBE_GRACE_MS = 100;
/** The gateway holds a wait at most 55 s; a waiter gives up a little later. */
const WAIT_TIMEOUT_MS = 65_000;
const REQUEST_TIMEOUT_MS = 15_000;
/** Part 2: waits opened per batch (a connect storm of 10,000 overflows the listen backlog), creates and answers in flight. */
const OPEN_BATCH = 500;
const CREATE_CONCURRENCY = 64;
const ANSWER_CONCURRENCY = 64;
/** File descriptors beyond one per waiter (Redis, gRPC, PostgreSQL, the load generator). */
const FD_HEADROOM = 1_024;
const REWARM_MS = 1_000;
const LATENCY_BAR_MS = 50;
const WAITERS_BAR = 10_000;
const WORKSPACE_TABLES = ['decision.questions', 'policy.authorizations', 'policy.policies'];

const POLICY = `
// Reading is fine, except secrets.
@id("read-files")
permit(principal, action == Herald::Action::"call", resource)
when { resource.name == "read_file" };

@id("no-secrets")
forbid(principal, action, resource)
when { resource.name == "read_file" && resource.target like "*.env" };

// Deploys: staging freely, production only after a person says yes.
@id("deploy-staging")
permit(principal, action, resource)
when { resource.name == "deploy" && context.environment == "staging" };

@id("deploy-production")
@requires_human
permit(principal, action, resource)
when { resource.name == "deploy" && context.environment == "production" };

// Payments up to 100, never from the intern bot.
@id("small-payments")
permit(principal, action, resource)
when { resource.name == "pay" && resource.hasTag("amount") && resource.getTag("amount").long <= 100 };

@id("no-intern-payments")
forbid(principal, action, resource)
when { resource.name == "pay" && principal has actor && principal.actor == "intern-bot" };
`;

/** /authorize bodies, each with the verdict it must get (checked once before the load). */
const AUTHORIZE_BODIES: readonly { body: Record<string, unknown>; verdict: 'allow' | 'deny' | 'requires_human' }[] = [
  { body: { toolName: 'read_file', toolTarget: 'src/README.md', actor: 'coding-agent' }, verdict: 'allow' },
  { body: { toolName: 'deploy', environment: 'staging', actor: 'ci-agent' }, verdict: 'allow' },
  { body: { toolName: 'pay', actor: 'billing-agent', parameters: { amount: 40, currency: 'EUR' } }, verdict: 'allow' },
  { body: { toolName: 'read_file', toolTarget: 'config/prod.env', actor: 'coding-agent' }, verdict: 'deny' },
  { body: { toolName: 'rm_rf', toolTarget: '/', actor: 'coding-agent' }, verdict: 'deny' },
  { body: { toolName: 'pay', actor: 'intern-bot', parameters: { amount: 20, currency: 'EUR' } }, verdict: 'deny' },
  { body: { toolName: 'deploy', environment: 'production', actor: 'ci-agent' }, verdict: 'requires_human' },
];

// ---------------------------------------------------------------- one HTTP exchange, timed
interface Reply {
  status: number;
  body: string;
  /** performance.now() when the whole response had arrived. */
  at: number;
}

interface Exchange {
  /** performance.now() when the request was handed to the socket. */
  written: Promise<number>;
  done: Promise<Reply>;
}

/** Every status the gateways answered in parts 1 and 2 (a 429 would mean the limiter interfered). */
const statuses = new Map<number, number>();

function exchange(agent: Agent, port: number, method: 'GET' | 'POST' | 'PUT', path: string, key: string, body?: unknown, timeoutMs = REQUEST_TIMEOUT_MS): Exchange {
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  let markWritten: (at: number) => void = () => undefined;
  let failWritten: (err: Error) => void = () => undefined;
  const written = new Promise<number>((resolve, reject) => {
    markWritten = resolve;
    failWritten = reject;
  });
  // Awaited only by some callers; a failure is reported through `done` as well.
  written.catch(() => undefined);
  const done = new Promise<Reply>((resolve, reject) => {
    const headers: Record<string, string | number> = { authorization: `Bearer ${key}`, accept: 'application/json' };
    if (payload) Object.assign(headers, { 'content-type': 'application/json', 'content-length': payload.length });
    const req = httpRequest({ host: '127.0.0.1', port, method, path, agent, headers });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${path}: nothing for ${timeoutMs} ms`)));
    req.on('finish', () => markWritten(performance.now()));
    req.on('error', (err) => {
      failWritten(err);
      reject(err);
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        resolve({ status, body: Buffer.concat(chunks).toString('utf8'), at: performance.now() });
      });
    });
    req.end(payload);
  });
  return { written, done };
}

/** The decision's status from a 200 reply, or a description of what came instead. */
function decisionStatus(reply: Reply): string {
  if (reply.status !== 200) return `HTTP ${reply.status}: ${reply.body.slice(0, 200)}`;
  const parsed = JSON.parse(reply.body) as { status?: string; approved?: boolean };
  return parsed.status === 'answered' && parsed.approved !== true ? 'answered but not approved' : String(parsed.status);
}

function decisionId(reply: Reply): string {
  const { decisionId: id } = JSON.parse(reply.body) as { decisionId?: string };
  if (reply.status !== 200 || typeof id !== 'string') throw new Error(`POST /decisions: HTTP ${reply.status} ${reply.body.slice(0, 300)}`);
  return id;
}

const openDecision = (agent: Agent, port: number, key: string, index: number): Promise<string> =>
  exchange(agent, port, 'POST', `${SERVER_API}/decisions`, key, { question: `Bench: may the agent go on? (${index})`, type: 'confirm', wait: false }).done.then(decisionId);

/** Failures by kind, with a count (an error message or an unexpected decision status). */
class Tally {
  readonly counts = new Map<string, number>();
  add(kind: string): void {
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
  }
  get total(): number {
    return [...this.counts.values()].reduce((sum, count) => sum + count, 0);
  }
  toString(): string {
    return this.total === 0 ? 'none' : [...this.counts].map(([kind, count]) => `${count} x ${kind}`).join('; ');
  }
}

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

interface Distribution {
  p50: number;
  p90: number;
  p99: number;
  max: number;
  count: number;
}

function distribution(values: number[]): Distribution {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] ?? Number.NaN, count: sorted.length };
}

const fmt = (value: number, digits: number): string => (Number.isFinite(value) ? value.toFixed(digits) : '-');
const showDistribution = ({ p50, p90, p99, max, count }: Distribution): string =>
  `p50 ${fmt(p50, 1)}  p90 ${fmt(p90, 1)}  p99 ${fmt(p99, 1)}  max ${fmt(max, 1)} ms  (n=${count})`;

/** Runs `work(index)` for 0..count-1, at most `concurrency` at once. */
async function pool(count: number, concurrency: number, work: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const index = next;
      next += 1;
      await work(index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

/** Waits until `pid` uses less than 5% of a core over half a second (or `maxMs` passes); false on time-out. */
async function quiet(pid: number | undefined, maxMs: number): Promise<boolean> {
  const deadline = performance.now() + maxMs;
  let last = cpuSeconds(pid);
  while (performance.now() < deadline) {
    await sleep(500);
    const now = cpuSeconds(pid);
    if (now === null || last === null) return false;
    if ((now - last) / 0.5 < 0.05) return true;
    last = now;
  }
  return false;
}

interface Gateways {
  a: { port: number; process: BenchProcess };
  b: { port: number; process: BenchProcess };
}

/** Fresh keys for `count` decisions, each making three requests (open, wait, answer) with the key `keyOf(index)`. */
async function decisionKeys(workspaceId: string, count: number): Promise<{ keyCount: number; keyOf: (index: number) => string }> {
  const keys = await createKeys(workspaceId, Math.ceil((3 * count) / KEY_BUDGET));
  return { keyCount: keys.length, keyOf: (index) => keys[index % keys.length] as string };
}

/** An HTTP agent destroyed at clean-up. */
function agent(options: { keepAlive: boolean; maxSockets?: number }): Agent {
  const created = new Agent(options);
  atCleanup(async () => created.destroy());
  return created;
}

// ---------------------------------------------------------------- part 1: answer -> waiting caller
interface LatencyResult {
  concurrency: number;
  count: number;
  wake: Distribution;
  answer: Distribution;
  /** Answer's response -> waiter's response: what the wake-up through Redis and A adds (negative: the waiter came first). */
  fanOut: Distribution;
  errors: Tally;
  keys: number;
  seconds: number;
}

async function answerLatency(workspaceId: string, { a, b }: Gateways, concurrency: number, count: number): Promise<LatencyResult> {
  const { keyCount, keyOf } = await decisionKeys(workspaceId, count);
  const agentA = agent({ keepAlive: true });
  const agentB = agent({ keepAlive: true });
  const wake: number[] = [];
  const answer: number[] = [];
  const fanOut: number[] = [];
  const errors = new Tally();
  const started = performance.now();
  const one = async (index: number): Promise<void> => {
    const key = keyOf(index);
    try {
      const id = await openDecision(agentA, a.port, key, index);
      const waiter = exchange(agentA, a.port, 'GET', `${SERVER_API}/decisions/${id}?wait=true`, key, undefined, WAIT_TIMEOUT_MS);
      await waiter.written;
      await sleep(SUBSCRIBE_GRACE_MS);
      const answering = exchange(agentB, b.port, 'POST', `${SERVER_API}/decisions/${id}`, key, { answer: 'yes' });
      const [sentAt, answered, woken] = await Promise.all([answering.written, answering.done, waiter.done]);
      const answerStatus = decisionStatus(answered);
      const waiterStatus = decisionStatus(woken);
      if (answerStatus !== 'answered') errors.add(`answer: ${answerStatus}`);
      if (waiterStatus !== 'answered') errors.add(`waiter: ${waiterStatus}`);
      if (answerStatus === 'answered' && waiterStatus === 'answered') {
        wake.push(woken.at - sentAt);
        answer.push(answered.at - sentAt);
        fanOut.push(woken.at - answered.at);
      }
    } catch (err) {
      errors.add(message(err));
    }
  };
  for (let first = 0; first < count; first += concurrency) {
    const round = Array.from({ length: Math.min(concurrency, count - first) }, (_, offset) => first + offset);
    await Promise.all(round.map(one));
  }
  const seconds = (performance.now() - started) / 1_000;
  log(`part 1: ${count} decisions, ${concurrency} at once, in ${seconds.toFixed(1)} s, errors: ${errors}`);
  return { concurrency, count, wake: distribution(wake), answer: distribution(answer), fanOut: distribution(fanOut), errors, keys: keyCount, seconds };
}

// ---------------------------------------------------------------- part 2: waiters held by one replica
interface HeldResult {
  count: number;
  createSeconds: number;
  openSeconds: number;
  /** Sockets gateway A had beyond its idle count once all waits were written (its peak). */
  heldSockets: number;
  settled: boolean;
  completedEarly: number;
  rssBeforeKb: number;
  rssHeldKb: number;
  anonBeforeKb: number;
  anonHeldKb: number;
  answerSeconds: number;
  /** First answer written -> last waiter woken. */
  wakeAllSeconds: number;
  /** Longest a waiter was held, written -> woken. */
  longestHoldSeconds: number;
  wake: Distribution;
  answered: number;
  errors: Tally;
  keys: number;
}

async function heldWaiters(workspaceId: string, { a, b }: Gateways): Promise<HeldResult> {
  const count = settings.waiters;
  const { keyCount, keyOf } = await decisionKeys(workspaceId, count);
  const agentA = agent({ keepAlive: true });
  const agentB = agent({ keepAlive: true });
  // No keep-alive and no socket limit: every wait has a connection of its own, closed after its answer.
  const waitAgent = agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  const errors = new Tally();

  log(`part 2: opening ${count} decisions through A (${CREATE_CONCURRENCY} at a time)`);
  const createStarted = performance.now();
  const ids: string[] = new Array<string>(count);
  await pool(count, CREATE_CONCURRENCY, async (index) => {
    ids[index] = await openDecision(agentA, a.port, keyOf(index), index);
  });
  const createSeconds = (performance.now() - createStarted) / 1_000;
  agentA.destroy();
  await quiet(a.process.pid, 20_000);
  const socketsBefore = socketCount(a.process.pid) ?? 0;
  const before = memoryOf(a.process.pid);

  log(`part 2: ${count} waits on A, ${OPEN_BATCH} connections at a time`);
  const openStarted = performance.now();
  const waits: Exchange[] = [];
  let completedEarly = 0;
  let answering = false;
  for (let first = 0; first < count; first += OPEN_BATCH) {
    const batch = ids.slice(first, first + OPEN_BATCH).map((id, offset) => {
      const wait = exchange(waitAgent, a.port, 'GET', `${SERVER_API}/decisions/${id}?wait=true`, keyOf(first + offset), undefined, WAIT_TIMEOUT_MS);
      void wait.done.then(
        () => (completedEarly += answering ? 0 : 1),
        () => (completedEarly += answering ? 0 : 1),
      );
      return wait;
    });
    waits.push(...batch);
    await Promise.all(batch.map((wait) => wait.written.catch(() => undefined)));
  }
  const openSeconds = (performance.now() - openStarted) / 1_000;
  // Held = A has a connection for each (polled from /proc) and has stopped working on them.
  const socketDeadline = performance.now() + 30_000;
  let heldSockets = 0;
  while (performance.now() < socketDeadline) {
    heldSockets = Math.max(heldSockets, (socketCount(a.process.pid) ?? 0) - socketsBefore);
    if (heldSockets >= count) break;
    await sleep(200);
  }
  const settled = await quiet(a.process.pid, 20_000);
  const held = memoryOf(a.process.pid);
  log(`part 2: A holds ${heldSockets} more sockets, settled ${settled}, RSS ${before?.rss} -> ${held?.rss} KiB; ${completedEarly} waits ended early`);

  log(`part 2: answering all ${count} through B at up to ${settings.answerRate}/s`);
  answering = true;
  const sentAt: number[] = new Array<number>(count);
  const answerStarted = performance.now();
  const interval = 1_000 / settings.answerRate;
  await pool(count, ANSWER_CONCURRENCY, async (index) => {
    const due = answerStarted + index * interval;
    const now = performance.now();
    if (due > now) await sleep(due - now);
    try {
      const answer = exchange(agentB, b.port, 'POST', `${SERVER_API}/decisions/${ids[index]}`, keyOf(index), { answer: 'yes' });
      sentAt[index] = await answer.written;
      const status = decisionStatus(await answer.done);
      if (status !== 'answered') errors.add(`answer: ${status}`);
    } catch (err) {
      errors.add(`answer: ${message(err)}`);
    }
  });
  const answerSeconds = (performance.now() - answerStarted) / 1_000;
  const outcomes = await Promise.allSettled(waits.map((wait) => Promise.all([wait.written, wait.done])));
  const wake: number[] = [];
  let answered = 0;
  let lastWoken = answerStarted;
  let longestHold = 0;
  outcomes.forEach((outcome, index) => {
    if (outcome.status === 'rejected') {
      errors.add(`waiter: ${message(outcome.reason)}`);
      return;
    }
    const [writtenAt, reply] = outcome.value;
    const status = decisionStatus(reply);
    if (status !== 'answered') {
      errors.add(`waiter: ${status}`);
      return;
    }
    answered += 1;
    lastWoken = Math.max(lastWoken, reply.at);
    longestHold = Math.max(longestHold, reply.at - writtenAt);
    const answerAt = sentAt[index];
    if (answerAt !== undefined) wake.push(reply.at - answerAt);
  });
  const firstAnswer = Math.min(...sentAt.filter((at) => at !== undefined));
  log(`part 2: ${answered}/${count} waiters woke with answered; errors: ${errors}`);
  return {
    count,
    createSeconds,
    openSeconds,
    heldSockets,
    settled,
    completedEarly,
    rssBeforeKb: before?.rss ?? Number.NaN,
    rssHeldKb: held?.rss ?? Number.NaN,
    anonBeforeKb: before?.anon ?? Number.NaN,
    anonHeldKb: held?.anon ?? Number.NaN,
    answerSeconds,
    wakeAllSeconds: (lastWoken - firstAnswer) / 1_000,
    longestHoldSeconds: longestHold / 1_000,
    wake: distribution(wake),
    answered,
    errors,
    keys: keyCount,
  };
}

// ---------------------------------------------------------------- part 3: /authorize throughput
interface LoadRow {
  name: string;
  measured: LoadResult;
  /** 429s in the warm-up (the measured window's are in `measured`). */
  warmLimited: number;
  usage: UsageReport | null;
  keys: number;
  maxPerKey: number;
  /** Verdict -> count inside the measured window (/authorize only). */
  verdicts: Record<string, number>;
}

interface RowOptions {
  name: string;
  workspaceId: string;
  port: number;
  /** Request bytes for one key: one buffer per body. */
  requestsFor: (key: string) => Buffer[];
  watched: { label: string; pid: number | undefined }[];
  countVerdicts: boolean;
}

/** Warm-up, enough keys for the measured run, then the measured run with CPU sampled over its window. */
async function loadRow({ name, workspaceId, port, requestsFor, watched, countVerdicts }: RowOptions): Promise<LoadRow> {
  let keys = await createKeys(workspaceId, settings.initialKeys);
  const perKey = requestsFor(keys[0] as string).length;
  const build = (): Buffer[] => keys.flatMap(requestsFor);
  const load = { host: '127.0.0.1', port, connections: settings.connections };
  log(`${name}: warm-up ${settings.warmupMs / 1_000} s x ${settings.connections} connections`);
  const warm = await runLoad({ ...load, requests: build(), warmupMs: 0, durationMs: settings.warmupMs });
  const usedByKey = (result: LoadResult, key: number): number => result.perRequestIndex.slice(key * perKey, (key + 1) * perKey).reduce((sum, value) => sum + value, 0);
  const needed = keysNeeded({
    rps: warm.rps,
    usedPerKey: Math.max(...keys.map((_, key) => usedByKey(warm, key))),
    keyCount: keys.length,
    runMs: REWARM_MS + settings.durationMs,
    connections: settings.connections,
  });
  if (needed > keys.length) keys = [...keys, ...(await createKeys(workspaceId, needed - keys.length))];
  const verdicts: Record<string, number> = {};
  const monitor = new UsageMonitor(watched, [
    { label: 'postgres', comm: 'postgres' },
    { label: 'redis', comm: 'redis-server' },
  ]);
  let usage: UsageReport | null = null;
  log(`${name}: measuring ${settings.durationMs / 1_000} s over ${keys.length} keys`);
  const measured = await runLoad({
    ...load,
    requests: build(),
    warmupMs: REWARM_MS,
    durationMs: settings.durationMs,
    onWindowStart: () => monitor.start(),
    onWindowEnd: () => (usage = monitor.stop()),
    onResponse: countVerdicts
      ? (_index, _status, body, inWindow) => {
          if (!inWindow) return;
          const verdict = /"verdict":"(\w+)"/.exec(body.toString('latin1'))?.[1] ?? 'none';
          verdicts[verdict] = (verdicts[verdict] ?? 0) + 1;
        }
      : undefined,
  });
  const maxPerKey = Math.max(...keys.map((_, key) => usedByKey(warm, key) + usedByKey(measured, key)));
  log(`${name}: ${measured.rps.toFixed(0)} req/s, p99 ${measured.p99.toFixed(2)} ms, statuses ${JSON.stringify(measured.statuses)}`);
  return { name, measured, warmLimited: warm.statuses[429] ?? 0, usage, keys: keys.length, maxPerKey, verdicts };
}

/**
 * Puts the policy and checks that each body gets its verdict, and that the workspace is on the
 * enterprise plan's limit, with the workspace's own key (in no rotation).
 */
async function preparePolicy(port: number, key: string): Promise<void> {
  const checks = new Agent({ keepAlive: true });
  try {
    const put = await exchange(checks, port, 'PUT', `${SERVER_API}/policy`, key, { policy: POLICY }).done;
    if (put.status !== 200) throw new Error(`PUT /policy: HTTP ${put.status} ${put.body}`);
    for (const { body, verdict } of AUTHORIZE_BODIES) {
      const reply = await exchange(checks, port, 'POST', `${SERVER_API}/authorize`, key, body).done;
      const got = reply.status === 200 ? (JSON.parse(reply.body) as { verdict?: string }).verdict : `HTTP ${reply.status}`;
      if (got !== verdict) throw new Error(`POST /authorize ${JSON.stringify(body)}: expected ${verdict}, got ${got} (${reply.body})`);
    }
    const identity = await exchange(checks, port, 'GET', `${SERVER_API}/identity`, key).done;
    const plan = (JSON.parse(identity.body) as { plan?: { name?: string; rateLimitPerMinute?: number } }).plan;
    if (identity.status !== 200 || plan?.name !== 'enterprise' || plan.rateLimitPerMinute !== PLAN_LIMIT) {
      throw new Error(`expected the enterprise plan with ${PLAN_LIMIT} requests per minute, got HTTP ${identity.status} ${identity.body}`);
    }
  } finally {
    checks.destroy();
  }
}

// ---------------------------------------------------------------- main
async function main(): Promise<number> {
  const fdLimit = execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim();
  const needFds = settings.waiters + FD_HEADROOM;
  if (fdLimit !== 'unlimited' && Number(fdLimit) < needFds) {
    log(`refusing: ulimit -n is ${fdLimit}, but ${settings.waiters} held waiters need at least ${needFds} open files (in this process and in gateway A). Raise it (ulimit -n ${needFds}) or lower BENCH_WAITERS.`);
    return 1;
  }
  const infra = await infraEnv();
  const idleBusy = await backgroundLoad();
  if (idleBusy !== null && idleBusy > 0.15) log(`warning: the machine is already ${(idleBusy * 100).toFixed(0)}% busy (other processes); figures will be lower and noisier`);
  const namespace = await createKafkaNamespace();
  atCleanup(() => namespace.remove());
  const db = await connectDatabase();
  atCleanup(() => db.end());

  log('workspace on the enterprise plan, approval mode terminal, via the admin CLI');
  const workspace = await admin<TestWorkspace>('workspace', 'create', '--name', `Bench approval ${process.pid}-${Date.now()}`, '--plan', 'enterprise', '--domain', 'bench.test', '--approval-mode', 'terminal');
  atCleanup(async () => {
    const deleted = await deleteWorkspaceRows(db, workspace.workspaceId, WORKSPACE_TABLES);
    log(`deleted the benchmark workspace's rows: ${JSON.stringify(deleted)}`);
  });

  log('starting account, audience, policy, decision and gateways A and B');
  const herald = await startHerald({
    services: ['account', 'audience', 'policy', 'decision'],
    env: { ...infra, LOG_LEVEL: 'warn', HERALD_NAMESPACE: namespace.prefix, ANSWER_TOKEN_SECRET: randomBytes(32).toString('base64url') },
  });
  const { account, policy } = herald.services;
  if (!account || !policy) throw new Error('account and policy services were not started');
  const gateways: Gateways = { a: { port: herald.gatewayPort, process: herald.gateway }, b: await herald.addGateway() };
  await preparePolicy(gateways.a.port, workspace.apiKey);

  // A warm-up round (JIT, connection pools, caches), not reported.
  await answerLatency(workspace.workspaceId, gateways, WARMUP_CONCURRENCY, WARMUP_QUESTIONS);
  const latency: LatencyResult[] = [];
  for (const level of settings.concurrency) latency.push(await answerLatency(workspace.workspaceId, gateways, level, settings.questions));
  const held = await heldWaiters(workspace.workspaceId, gateways);

  const watched = [
    { label: 'gateway A', pid: gateways.a.process.pid },
    { label: 'account', pid: account.pid },
    { label: 'policy', pid: policy.pid },
  ];
  const host = '127.0.0.1';
  const port = gateways.a.port;
  const rows = [
    await loadRow({
      name: 'GET /identity (baseline)',
      workspaceId: workspace.workspaceId,
      port,
      requestsFor: (key) => [getRequest(host, port, `${SERVER_API}/identity`, { Authorization: `Bearer ${key}` })],
      watched,
      countVerdicts: false,
    }),
    await loadRow({
      name: 'POST /authorize',
      workspaceId: workspace.workspaceId,
      port,
      requestsFor: (key) => AUTHORIZE_BODIES.map(({ body }) => postRequest(host, port, `${SERVER_API}/authorize`, body, { Authorization: `Bearer ${key}` })),
      watched,
      countVerdicts: true,
    }),
  ];
  return report({ latency, held, rows, idleBusy });
}

// ---------------------------------------------------------------- report
interface Results {
  latency: LatencyResult[];
  held: HeldResult;
  rows: LoadRow[];
  idleBusy: number | null;
}

const verdictOf = (met: boolean): string => (met ? 'met' : 'NOT met');

function report({ latency, held, rows, idleBusy }: Results): number {
  const cores = os.availableParallelism();
  const lines: string[] = ['', ...reportHead('Herald approval benchmark', idleBusy)];
  lines.push('stack: account, audience, policy, decision + gateways A and B (one Redis), workspace in approval mode terminal (no push), 127.0.0.1 only');

  lines.push('');
  lines.push(`1. answer -> waiting caller across replicas, per level of decisions in flight at once (after a warm-up of ${WARMUP_QUESTIONS})`);
  lines.push(`   (open on A, GET ?wait=true on A, answer on B ${SUBSCRIBE_GRACE_MS} ms after the wait was written)`);
  for (const level of latency) {
    lines.push(`   ${level.count} decisions, ${level.concurrency} at once, ${level.keys} keys, ${level.seconds.toFixed(1)} s:`);
    lines.push(`     answer written -> waiter's response complete: ${showDistribution(level.wake)}`);
    lines.push(`     answer's own round trip (B):                 ${showDistribution(level.answer)}`);
    lines.push(`     answer's response -> waiter's response:      ${showDistribution(level.fanOut)}`);
    lines.push(`     errors (waiter not answered, failed calls): ${level.errors}`);
    lines.push(`     bar p99 <= ${LATENCY_BAR_MS} ms (answer written -> waiter): ${verdictOf(level.wake.p99 <= LATENCY_BAR_MS && level.errors.total === 0)}`);
  }

  lines.push('');
  const mib = (kib: number): string => `${(kib / 1_024).toFixed(1)} MiB`;
  const perWaiter = (afterKib: number, beforeKib: number): string => `${((afterKib - beforeKib) / held.count).toFixed(2)} KiB`;
  lines.push(`2. waiters held by gateway A: ${held.count} (${held.keys} keys)`);
  lines.push(`   opened ${held.count} decisions in ${held.createSeconds.toFixed(1)} s; wrote ${held.count} waits (one socket each) in ${held.openSeconds.toFixed(1)} s`);
  lines.push(`   A's extra sockets seen: ${held.heldSockets}; A idle again before measuring: ${held.settled ? 'yes' : 'NO (still busy after 20 s)'}; waits that ended before any answer: ${held.completedEarly}`);
  lines.push(`   A's RSS ${mib(held.rssBeforeKb)} -> ${mib(held.rssHeldKb)} while held: ${perWaiter(held.rssHeldKb, held.rssBeforeKb)} per waiter`);
  lines.push(`   A's private memory (RssAnon: JS heap, buffers) ${mib(held.anonBeforeKb)} -> ${mib(held.anonHeldKb)}: ${perWaiter(held.anonHeldKb, held.anonBeforeKb)} per waiter`);
  lines.push(`   answered all through B in ${held.answerSeconds.toFixed(1)} s (at most ${settings.answerRate}/s, ${ANSWER_CONCURRENCY} in flight); first answer -> last waiter woken ${held.wakeAllSeconds.toFixed(1)} s`);
  lines.push(`   woken with answered: ${held.answered}/${held.count}; longest hold ${held.longestHoldSeconds.toFixed(1)} s (the gateway holds at most 55 s)`);
  lines.push(`   answer written -> waiter woken, under that load: ${showDistribution(held.wake)}`);
  lines.push(`   errors: ${held.errors}`);
  lines.push(`   bar >= ${WAITERS_BAR} per replica: ${verdictOf(held.count >= WAITERS_BAR && held.heldSockets >= held.count && held.answered === held.count)}`);

  lines.push('');
  lines.push(
    `3. /authorize evaluations: ${settings.connections} keep-alive connections, closed loop, ${settings.warmupMs / 1_000} s warm-up + ${REWARM_MS / 1_000} s re-warm, ${settings.durationMs / 1_000} s measured, through gateway A`,
  );
  const header = ['row', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'requests', 'errors'];
  const table = rows.map(({ name, measured }) => [
    name,
    fmt(measured.rps, 0),
    fmt(measured.p50, 2),
    fmt(measured.p90, 2),
    fmt(measured.p99, 2),
    fmt(measured.max, 1),
    String(measured.requests),
    String(measured.nonOk + measured.socketErrors + measured.timeouts + measured.dropped),
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...table.map((row) => (row[column] ?? '').length)));
  const line = (cells: string[]): string => `   ${cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0))).join('  ')}`;
  lines.push(line(header));
  lines.push(`   ${widths.map((width) => '-'.repeat(width)).join('  ')}`);
  for (const row of table) lines.push(line(row));
  for (const row of rows) {
    const { measured, usage } = row;
    lines.push(`   ${row.name}: statuses ${JSON.stringify(measured.statuses)}; socket errors ${measured.socketErrors}, timeouts ${measured.timeouts}, dropped ${measured.dropped}`);
    lines.push(`     rate limiter on: ${row.keys} keys, at most ${row.maxPerKey} requests on one key (limit ${PLAN_LIMIT}/min)`);
    if (Object.keys(row.verdicts).length > 0) {
      const total = Object.values(row.verdicts).reduce((sum, count) => sum + count, 0);
      lines.push(`     verdicts: ${Object.entries(row.verdicts).map(([verdict, count]) => `${verdict} ${count} (${((count / total) * 100).toFixed(0)}%)`).join(', ')}`);
    }
    if (usage && measured.requests > 0) {
      // A group (postgres) whose members exited inside the window can come out negative: left out.
      const cpu = usage.processes.filter((process) => process.cpuSeconds !== null && process.cpuSeconds >= 0);
      lines.push(`     CPU ms per request: ${cpu.map((process) => `${process.label} ${(((process.cpuSeconds ?? 0) * 1_000) / measured.requests).toFixed(3)}`).join(', ')}`);
      lines.push(
        `     cores used (100% = one core): ${cpu.map((process) => `${process.label} ${((process.cores?.mean ?? 0) * 100).toFixed(0)}%`).join(', ')}, machine busy ${fmt((usage.machineBusyShare ?? Number.NaN) * 100, 0)}% of ${cores} cores`,
      );
    }
  }
  const [identity, authorize] = rows;
  if (identity && authorize) {
    const policyCpu = authorize.usage?.processes.find((process) => process.label === 'policy')?.cpuSeconds;
    if (policyCpu !== null && policyCpu !== undefined && authorize.measured.requests > 0) {
      lines.push(`   policy service CPU per evaluation: ${((policyCpu * 1_000) / authorize.measured.requests).toFixed(3)} ms (evaluation + recording the verdict)`);
    }
    lines.push(`   /authorize vs /identity: ${fmt(authorize.measured.rps / identity.measured.rps, 2)}x the req/s, p99 ${fmt(authorize.measured.p99 / identity.measured.p99, 2)}x`);
  }

  const tooMany = statuses.get(429) ?? 0;
  const loadErrors = rows.reduce((sum, { measured }) => sum + measured.nonOk + measured.socketErrors + measured.timeouts + measured.dropped, 0);
  const rateLimited = tooMany + rows.reduce((sum, { measured, warmLimited }) => sum + warmLimited + (measured.statuses[429] ?? 0), 0);
  lines.push('');
  lines.push(`429s anywhere: ${rateLimited}${rateLimited > 0 ? ' (RATE LIMITED: the run is not valid)' : ''}; statuses in parts 1 and 2: ${JSON.stringify(Object.fromEntries([...statuses].sort((x, y) => x[0] - y[0])))}`);
  lines.push(
    `caveat: everything (this driver, both gateways, the services, PostgreSQL, Redis, Kafka) shares these ${cores} cores: the figures are one small box's, comparable with each other, not with a deployed fleet.`,
  );
  console.log(lines.join('\n'));
  const recorded = recordRun(
    'approval',
    [
      ...latency.flatMap((level): Figure[] => [
        { name: `answer -> waiter p50, ${level.concurrency} in flight`, value: Number(level.wake.p50.toFixed(2)), unit: 'ms', better: 'lower' },
        { name: `answer -> waiter p99, ${level.concurrency} in flight`, value: Number(level.wake.p99.toFixed(2)), unit: 'ms', better: 'lower' },
      ]),
      { name: 'waiters held by one gateway', value: held.count, unit: 'waiters', better: 'higher' },
      ...rows.flatMap(({ name, measured }) => loadFigures(name, measured)),
    ],
    settings,
    idleBusy,
  );
  if (recorded) log(`recorded in ${recorded}`);
  const errors = latency.reduce((sum, level) => sum + level.errors.total, 0) + held.errors.total + loadErrors + rateLimited;
  return errors > 0 ? 1 : 0;
}

await runBench(main, HARD_DEADLINE_MS);
