import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import type { FaultRule, PushSubscriptionJSON, ReceivedMessage } from '@herald/push-peer';

import { untilConsumingAgain, waitForQuiet, type ConsumedTopics } from './consumers.js';
import { connectDatabase } from './database.js';
import { call, SERVER_API, type ApiResponse, type RequestOptions } from './http.js';
import { infraComponent, type InfraComponent } from './infra.js';
import type { RunningProcess } from './processes.js';
import { eventually, seedAudience, startSendingHarness, type Audience, type SendingHarness } from './sending.js';
import { within } from './within.js';

/**
 * A fault drill: a steady small load against a local Herald (sends and campaigns to a known
 * audience through the strict push peer, engagement reports made with the pushes' tokens,
 * questions with a waiter, answered through the answer endpoint) while faults are injected one
 * after another; then a reconciliation against the records: each subscriber got each notification
 * exactly once, each accepted report is counted once, each question is answered once and readable,
 * nothing is left pending or unpublished, and the API answered only 2xx, expected 409s, or
 * 503 `unavailable` within its deadline. Used by `npm run faults` and by
 * gateway/test/faults-under-load.disruptive.test.ts (it stops and starts PostgreSQL, Redis and
 * Kafka through deploy/infra.sh: only against infrastructure nothing else is using).
 */

export const FAULTS = [
  'delivery-kill',
  'campaign-kill',
  'decision-kill',
  'flow-kill',
  'gateway-kill',
  'postgres-restart',
  'postgres-crash',
  'kafka-restart',
  'kafka-crash',
  'redis-restart',
  'redis-crash',
  'push-429',
  'push-503',
  'push-reset',
] as const;
export type FaultName = (typeof FAULTS)[number];

export interface FaultDrillOptions {
  /** The faults, in order (all of FAULTS by default). */
  faults?: readonly FaultName[];
  /** Subscribers every notification goes to. Default 4. */
  subscribers?: number;
  /** One round of load (a send or a campaign, reports, a question every fourth round) this often. Default 500 ms. */
  roundMs?: number;
  /** How long each fault lasts (a server down, a process gone, the push service failing). Default 3 s. */
  holdMs?: number;
  /** Load without a fault before the first fault and between two. Default 2 s. */
  calmMs?: number;
  /**
   * Extra environment for the delivery fleet. By default it runs with the production back-off
   * (PUSH_RETRY_BASE_MS 1 s, PUSH_MAX_ATTEMPTS 5), capped at 8 s here.
   */
  deliveryEnv?: Record<string, string>;
  /** The consumer groups that must have caught up before the counts are compared (@herald/bus SEND_PIPELINE and campaignEngagement). */
  settle: readonly ConsumedTopics[];
  /**
   * Every consumer group of the stack (@herald/bus `consumers`): after Kafka comes back, each must
   * have consumed again, and the engagement endpoint answer 202, within KAFKA_RECOVERY_BAR_MS.
   */
  groups: readonly ConsumedTopics[];
  /**
   * The whole drill, reconciliation and stopping included, ends within this (default 10 minutes):
   * every wait is bounded by what is left of it, and one that runs out fails naming its step.
   */
  limitMs?: number;
  log?: (line: string) => void;
}

/** One row of the drill's table: a fault (or `none`, the load between faults) and what it cost. */
export interface FaultRow {
  fault: FaultName | 'none';
  /** Requests started while the fault lasted, until the API served end to end again. */
  requests: number;
  /**
   * Answers other than 2xx by status, filed under the moment they came (`network`: the connection
   * failed; `timeout`: no answer within the deadline); `push <status>`: what the push service
   * answered the delivery fleet other than 201 (`push reset`: a reset stream).
   */
  errors: Record<string, number>;
  /** From the fault's end (server started, replacement ready, push service healthy) until a send made then reached every subscriber. */
  recoveryMs: number | undefined;
  /** Pushes missing, counted reports missing, answers not readable, for what was accepted during this row. */
  lost: number;
  /** Notifications shown twice (pushes of one notification to one subscriber under distinct Topics), reports counted twice, answers applied twice. */
  duplicated: number;
  /**
   * Pushes the push service accepted again: one accepted whose worker died before recording it is
   * pushed again by the next, with the same Topic, so the browser replaces it (shown once, and its
   * impression counted once). Not a duplicate; a repeat with another Topic is.
   */
  repeated: number;
  /** Broken promises: an unexpected status, a hang, a process that died by itself, a fault that did not bite. */
  problems: string[];
  /** What shows the fault happened and Herald met it (a new pid, what requests or pushes saw); undefined for `none`. */
  proof?: string;
}

export interface FaultDrillReport {
  rows: FaultRow[];
  totals: {
    requests: number;
    /** Sends, campaigns, probes and questions' pushes. */
    notifications: number;
    pushes: number;
    reports: number;
    questions: number;
    /** Questions whose push the campaign service queued. */
    questionPushes: number;
    wokenWaiters: number;
    readAfterwards: number;
  };
  /** Every problem of every row, and those of the whole run. */
  problems: string[];
  durationMs: number;
}

/** After Kafka comes back (restarted or crashed), every consumer group consumes again and the engagement endpoint answers 202 within this. */
export const KAFKA_RECOVERY_BAR_MS = 5_000;
/** gRPC deadlines are 5 s; an answer later than this is a hang. */
const REQUEST_DEADLINE_MS = 7_000;
/** A request answered this late was held up by the fault (they take milliseconds otherwise). */
const HELD_MS = 1_000;
/**
 * The welcome flow of the flow site: a push at once, a delay, a second push. Each subscription
 * made during the load starts one run, whose two pushes are counted per subscriber.
 */
const WELCOME_TITLES = ['Welcome', 'Follow-up'] as const;
const WELCOME_STEPS = [
  { stepType: 'send_notification', config: { notification: { title: WELCOME_TITLES[0], body: 'fault drill' } } },
  { stepType: 'delay', config: { delay: { value: 1, unit: 'seconds' } } },
  { stepType: 'send_notification', config: { notification: { title: WELCOME_TITLES[1], body: 'fault drill' } } },
];
/** Runs claimed by a killed flow service are worked again when their lease ends: 5 s here (30 s in production) keeps the drill short. */
const FLOW_ENV = { FLOW_RUN_LEASE_MS: '5000' };
const WAIT_SECONDS = 10;
const SITE_ORIGIN = 'https://shop.example.test';
/** Every gateway's, a replacement's too (the local push peer's endpoints are on no known push service). */
const GATEWAY_ENV = { ENGAGEMENT_IP_RATE_LIMIT_PER_MINUTE: '1000000', ALLOW_ANY_PUSH_SERVICE: 'true' };
/** Bounds on every loop: the drill always ends by itself. */
const RECOVERY_LIMIT_MS = 60_000;
const DRAIN_LIMIT_MS = 90_000;
/** Starting a stack, injecting a fault (a replacement included), stopping everything. */
const STEP_LIMIT_MS = 90_000;
const MAX_ATTEMPTS = 200;

type Outcome = number | 'network' | 'timeout';
interface Tracked {
  /** When the request that made it started (or the fault began, for a recovery probe). */
  at: number;
  /** A question's push (made by the decision service; the drill answers it instead of reporting on it): checked for pushes, not for counters. */
  question?: boolean;
}
interface PendingSend {
  key: string;
  round: number;
  attempts: number;
  at: number;
}
interface PendingSubscription {
  subscription: PushSubscriptionJSON;
  attempts: number;
  at: number;
}
interface PendingCampaignStart {
  campaignId: string;
  attempts: number;
  uncertain: boolean;
  at: number;
}
interface Report {
  notificationId: string;
  subscriberId: string;
  kind: 'impression' | 'click';
  token: string;
  attempts: number;
  /** A report made again on purpose (a browser retrying): sent once, not retried. */
  repeat?: boolean;
}
interface Question {
  id: string;
  liveUrl: string;
  token: string;
  at: number;
  answerDueAt: number;
  answered200: number;
  /** An answer attempt whose outcome is unknown (no answer, or a 5xx): a later 409 is then its success. */
  uncertain: boolean;
  settled: boolean;
  attempts: number;
  waiter: 'waiting' | 'woken' | 'timed-out' | 'failed';
}

function countInto(counts: Record<string, number>, key: string): void {
  counts[key] = (counts[key] ?? 0) + 1;
}

function isDown(process: RunningProcess): boolean {
  return process.child.exitCode !== null || process.child.signalCode !== null;
}

export async function runFaultDrill(options: FaultDrillOptions): Promise<FaultDrillReport> {
  const { faults = FAULTS, subscribers: audienceSize = 4, roundMs = 500, holdMs = 3_000, calmMs = 2_000, deliveryEnv = {}, settle, groups, limitMs = 600_000, log = () => undefined } = options;
  const started = Date.now();
  const deadline = started + limitMs;
  /** A step of the drill, bounded by its own limit and by what is left of the drill's. */
  const step = <T>(what: string, stepLimitMs: number, work: Promise<T>): Promise<T> => within(what, Math.min(stepLimitMs, deadline - Date.now()), work);
  log('starting Herald: two gateways, account, audience, campaign, delivery, decision, flow; a strict push peer');
  const harness = await step(
    'starting Herald',
    STEP_LIMIT_MS,
    startSendingHarness({
      decisions: true,
      services: ['flow'],
      gateways: 2,
      gatewayEnv: GATEWAY_ENV,
      env: FLOW_ENV,
      // Production's back-off base (1 s) and PUSH_MAX_ATTEMPTS (5) unless `deliveryEnv` says otherwise; the 8 s cap keeps a drill short.
      deliveryEnv: { PUSH_RETRY_BASE_MS: '1000', PUSH_RETRY_CAP_MS: '8000', ...deliveryEnv },
    }),
  );
  try {
    const audience = await step('seeding the audience', STEP_LIMIT_MS, seedAudience(harness, audienceSize, 'enterprise'));
    // The welcome flow's site is a workspace of its own: its subscribers are not the sends' audience.
    const flowSite = await step('seeding the flow site', STEP_LIMIT_MS, seedAudience(harness, 0, 'enterprise'));
    const flowId = await step('activating the welcome flow', STEP_LIMIT_MS, activateWelcomeFlow(harness, flowSite));
    log(`audience: ${audienceSize} subscribers; a welcome flow on another site`);
    return await drill(harness, audience, { flowSite, flowId }, { faults, roundMs, holdMs, calmMs, settle, groups, log, started, step });
  } finally {
    harness.peer.respondWith(null);
    // Bounded on its own, past the drill's limit: what a failed drill started must still be stopped.
    await within('stopping Herald', STEP_LIMIT_MS, harness.stop());
  }
}

async function activateWelcomeFlow(harness: SendingHarness, site: Audience): Promise<string> {
  const options = { method: 'POST', key: site.workspace.apiKey, timeoutMs: REQUEST_DEADLINE_MS };
  const created = await call<{ id: string }>(harness.stack.gatewayUrl, `${SERVER_API}/flows`, { ...options, body: { name: 'Welcome', triggerType: 'subscription', steps: WELCOME_STEPS } });
  if (created.status !== 201) throw new Error(`creating the welcome flow: ${created.status} ${JSON.stringify(created.body)}`);
  const activated = await call<{ status: string }>(harness.stack.gatewayUrl, `${SERVER_API}/flows/${created.body.id}/activate`, options);
  if (activated.body.status !== 'active') throw new Error(`activating the welcome flow: ${activated.status} ${JSON.stringify(activated.body)}`);
  return created.body.id;
}

interface DrillSettings {
  faults: readonly FaultName[];
  roundMs: number;
  holdMs: number;
  calmMs: number;
  settle: readonly ConsumedTopics[];
  groups: readonly ConsumedTopics[];
  log: (line: string) => void;
  started: number;
  step: <T>(what: string, limitMs: number, work: Promise<T>) => Promise<T>;
}

async function drill(harness: SendingHarness, audience: Audience, { flowSite, flowId }: { flowSite: Audience; flowId: string }, settings: DrillSettings): Promise<FaultDrillReport> {
  const { stack, peer } = harness;
  const { apiKey } = audience.workspace;
  const runProblems: string[] = [];
  const calm: FaultRow = { fault: 'none', requests: 0, errors: {}, recoveryMs: undefined, lost: 0, duplicated: 0, repeated: 0, problems: [] };
  /** What a probe made while a fault lasted saw of it (the Redis faults, the gateway's kill), per row. */
  const probed = new Map<FaultRow, string>();
  /** Pushes the peer had accepted and not yet answered when the delivery worker was killed, per row. */
  const heldAtKill = new Map<FaultRow, number>();
  /** Requests per row that were held a second or more before their answer (a dependency gone, waited for). */
  const held = new Map<FaultRow, number>();
  const windows: Array<{ row: FaultRow; start: number; end: number }> = [];
  const rowAt = (at: number): FaultRow => windows.find((window) => at >= window.start && at <= window.end)?.row ?? calm;
  /** Gateways the load goes through (a killed one leaves the pool at once, as a load balancer's health check would take it out). */
  const pool = [...stack.gatewayUrls];
  const killed = new Set<RunningProcess>();
  let gatewayDown = false;
  let requestCounter = 0;
  const gateway = (): string => pool[requestCounter++ % pool.length] as string;

  /** One request through the next gateway of the pool, counted under the row of the moment it started. Never throws. */
  async function request<T = Record<string, unknown>>(what: string, path: string, init: RequestOptions & { deadlineMs?: number }): Promise<{ outcome: Outcome; response?: ApiResponse<T> }> {
    const at = Date.now();
    const row = rowAt(at);
    row.requests += 1;
    const deadline = init.deadlineMs ?? REQUEST_DEADLINE_MS;
    let outcome: Outcome;
    let response: ApiResponse<T> | undefined;
    try {
      response = await call<T>(gateway(), path, { ...init, timeoutMs: deadline });
      outcome = response.status;
    } catch (err) {
      outcome = (err as Error).name === 'TimeoutError' ? 'timeout' : 'network';
    }
    // An error belongs to the moment it happened (a waiter started before a fault fails during it).
    const failedIn = rowAt(Date.now());
    // A long poll (a longer deadline) is held on purpose.
    if (deadline <= REQUEST_DEADLINE_MS && Date.now() - at >= HELD_MS) held.set(failedIn, (held.get(failedIn) ?? 0) + 1);
    if (typeof outcome !== 'number' || outcome >= 300) countInto(failedIn.errors, String(outcome));
    const { code, message } = (response?.body ?? {}) as { code?: unknown; message?: unknown };
    const expected =
      (typeof outcome === 'number' && (outcome < 300 || outcome === 409 || (outcome === 503 && code === 'unavailable'))) || (outcome === 'network' && gatewayDown);
    if (!expected) failedIn.problems.push(`${what}: ${outcome}${code ? ` ${String(code)}: ${String(message)}` : ''} after ${Date.now() - at} ms`);
    return response ? { outcome, response } : { outcome };
  }

  // What was accepted, for the reconciliation.
  const notifications = new Map<string, Tracked>();
  const sends: PendingSend[] = [];
  const campaignStarts: PendingCampaignStart[] = [];
  const reports: Report[] = [];
  const acceptedReports = new Map<string, Report & { at: number }>();
  const questions: Question[] = [];
  /** Browsers of the flow site, by endpoint: each stored subscription starts one run of the welcome flow. */
  const flowEndpoints = new Set<string>();
  const subscriptions: PendingSubscription[] = [];
  const welcomed = new Map<string, { subscriberId: string; at: number }>();
  /** Asks that got no 200, by their question text: made anyway only if the connection was cut (a killed gateway). */
  const unanswered = new Map<string, Outcome>();
  let asked = 0;
  let seenPushes = 0;
  const inFlight = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>): void => {
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  };

  /** POST /send with an idempotency key; retried with the same key until accepted, as a careful client does. */
  async function send(pending: PendingSend): Promise<void> {
    pending.attempts += 1;
    const { response } = await request<{ campaignId: string }>('send', `${SERVER_API}/send`, {
      method: 'POST',
      key: apiKey,
      headers: { 'idempotency-key': pending.key },
      body: { title: `round ${pending.round}`, body: 'fault drill' },
    });
    if (response?.status === 200) notifications.set(response.body.campaignId, { at: pending.at });
    else if (pending.attempts < MAX_ATTEMPTS) sends.push(pending);
    else runProblems.push(`a send (key ${pending.key}) was never accepted`);
  }

  /** A browser subscribing to the flow site: true once stored (a repeat of a stored one stores nothing new and starts no run). */
  async function subscribeOnce(pending: PendingSubscription): Promise<boolean> {
    pending.attempts += 1;
    const { response } = await request<{ subscriberId: string }>('subscribe', '/api/v1/subscribe', {
      method: 'POST',
      key: flowSite.workspace.siteKey,
      headers: { origin: SITE_ORIGIN },
      body: { endpoint: pending.subscription.endpoint, keys: pending.subscription.keys, tags: [] },
    });
    if (response?.status !== 201 && response?.status !== 200) return false;
    welcomed.set(pending.subscription.endpoint, { subscriberId: response.body.subscriberId, at: pending.at });
    return true;
  }

  /** Retried with the same subscription until stored, as the browser SDK does. */
  async function subscribe(pending: PendingSubscription): Promise<void> {
    if (await subscribeOnce(pending)) return;
    if (pending.attempts < MAX_ATTEMPTS) subscriptions.push(pending);
    else runProblems.push(`a subscription (${pending.subscription.endpoint}) was never stored`);
  }

  function newSubscription(at: number): PendingSubscription {
    const subscription = peer.createSubscription({ applicationServerKey: flowSite.vapidPublicKey });
    flowEndpoints.add(subscription.endpoint);
    return { subscription, attempts: 0, at };
  }

  async function startCampaign(pending: PendingCampaignStart): Promise<void> {
    pending.attempts += 1;
    const { outcome } = await request('campaign send', `${SERVER_API}/campaigns/${pending.campaignId}/send`, { method: 'POST', key: apiKey });
    // A 409 after an attempt of unknown outcome: that attempt started it.
    if (outcome === 200 || (outcome === 409 && pending.uncertain)) notifications.set(pending.campaignId, { at: pending.at });
    else if (pending.attempts < MAX_ATTEMPTS) {
      pending.uncertain ||= outcome !== 503;
      campaignStarts.push(pending);
    } else runProblems.push(`campaign ${pending.campaignId} never started`);
  }

  async function createCampaign(round: number): Promise<void> {
    const at = Date.now();
    const { response } = await request<{ id: string }>('campaign create', `${SERVER_API}/campaigns`, {
      method: 'POST',
      key: apiKey,
      body: { name: `Drill ${round}`, title: `campaign ${round}`, body: 'fault drill' },
    });
    // A create that failed made at most a draft, which sends nothing.
    if (response?.status === 201) await startCampaign({ campaignId: response.body.id, attempts: 0, uncertain: false, at });
  }

  async function report(item: Report): Promise<void> {
    item.attempts += 1;
    const { outcome } = await request('engagement report', '/api/v1/events', { method: 'POST', headers: { origin: SITE_ORIGIN }, body: { type: item.kind, token: item.token } });
    const key = `${item.notificationId}|${item.subscriberId}|${item.kind}`;
    if (outcome === 202) {
      if (!acceptedReports.has(key)) acceptedReports.set(key, { ...item, at: Date.now() });
    } else if (item.repeat) return;
    else if (item.attempts < MAX_ATTEMPTS) reports.push(item);
    else runProblems.push(`a ${item.kind} report on ${item.notificationId} was never accepted`);
  }

  /** Reports for every push that arrived since the last look: an impression each, a click for every other one. */
  function harvestPushes(): void {
    const received = peer.received(undefined, { includeReplaced: true });
    for (const message of received.slice(seenPushes)) {
      seenPushes += 1;
      // The welcome flow's pushes are counted per subscriber, not reported on.
      if (flowEndpoints.has(message.endpoint)) continue;
      const opened = harness.openPush(message);
      // A question's push is answered, not reported on, in this drill.
      if ('answerUrl' in opened.payload) continue;
      const base = { notificationId: opened.payload.notificationId, subscriberId: opened.engagement.subscriberId, token: opened.token, attempts: 0 };
      reports.push({ ...base, kind: 'impression' });
      if (seenPushes % 2 === 0) reports.push({ ...base, kind: 'click' });
    }
  }

  async function ask(): Promise<void> {
    const at = Date.now();
    const text = `Proceed with drill step ${(asked += 1)}?`;
    const { outcome, response } = await request<{ correlationId: string; liveUrl: string }>('ask', `${SERVER_API}/ask`, {
      method: 'POST',
      key: apiKey,
      body: { question: text, wait: false },
    });
    if (response?.status !== 200) {
      unanswered.set(text, outcome);
      return;
    }
    const { correlationId, liveUrl } = response.body;
    const question: Question = {
      id: correlationId,
      liveUrl,
      token: liveUrl.slice(liveUrl.indexOf('/a/') + 3),
      at,
      answerDueAt: at + 1_000,
      answered200: 0,
      uncertain: false,
      settled: false,
      attempts: 0,
      waiter: 'waiting',
    };
    questions.push(question);
    const waited = await request<{ answered: boolean; value?: string }>('ask wait', `${SERVER_API}/ask/${correlationId}?wait=${WAIT_SECONDS}`, {
      key: apiKey,
      deadlineMs: WAIT_SECONDS * 1_000 + REQUEST_DEADLINE_MS,
    });
    const body = waited.response?.body;
    question.waiter = waited.outcome !== 200 ? 'failed' : body?.answered === true && body.value === 'yes' ? 'woken' : 'timed-out';
  }

  async function answer(question: Question): Promise<void> {
    question.attempts += 1;
    const { outcome } = await request('answer', `/api/v1/answer/${question.token}`, { method: 'POST', body: { answer: 'yes' } });
    if (outcome === 200) {
      question.answered200 += 1;
      question.settled = true;
    } else if (outcome === 409) {
      // Answered already: by an earlier attempt whose answer never came back, or by no one the drill knows of.
      question.settled = true;
      if (!question.uncertain) runProblems.push(`question ${question.id}: the first answer was refused as already answered`);
    } else if (question.attempts >= MAX_ATTEMPTS) {
      question.settled = true;
      runProblems.push(`question ${question.id} could not be answered`);
    } else {
      question.uncertain ||= outcome !== 503;
      question.answerDueAt = Date.now() + 500;
    }
  }

  /** Everything due now: retries first, then (unless draining) this round's new work. */
  function round(index: number, generate: boolean): void {
    harvestPushes();
    for (const pending of sends.splice(0, 4)) track(send(pending));
    for (const pending of campaignStarts.splice(0, 2)) track(startCampaign(pending));
    for (const item of reports.splice(0, 12)) track(report(item));
    for (const pending of subscriptions.splice(0, 4)) track(subscribe(pending));
    for (const question of questions) {
      if (!question.settled && question.answerDueAt <= Date.now() && question.answerDueAt > 0) {
        question.answerDueAt = 0;
        track(answer(question));
      }
    }
    if (!generate) return;
    if (index % 4 === 3) track(createCampaign(index));
    else track(send({ key: randomUUID(), round: index, attempts: 0, at: Date.now() }));
    if (index % 4 === 1) track(ask());
    if (index % 2 === 0) track(subscribe(newSubscription(Date.now())));
    // A report already accepted, made again (a browser retrying): counted once still.
    const again = [...acceptedReports.values()].at(-1 - (index % 5));
    if (again) track(report({ notificationId: again.notificationId, subscriberId: again.subscriberId, kind: again.kind, token: again.token, attempts: 0, repeat: true }));
  }

  let generating = true;
  const loop = (async () => {
    for (let index = 0; generating && index < 100_000; index += 1) {
      if (inFlight.size < 60) round(index, true);
      await sleep(settings.roundMs);
    }
  })();

  /** A subscription made now to the flow site, stored, and welcomed with the flow's first push: how long after `from` that took. */
  async function flowRecovery(from: number): Promise<number | undefined> {
    const probe = newSubscription(from);
    const deadline = from + RECOVERY_LIMIT_MS;
    for (;;) {
      if (await subscribeOnce(probe)) break;
      // Left to the load's retries: whenever it is stored, its run is reconciled like the others.
      if (Date.now() > deadline) {
        subscriptions.push(probe);
        return undefined;
      }
      await sleep(200);
    }
    try {
      await eventually('the probe was welcomed', async () => peer.received(probe.subscription.endpoint).length, (pushes) => pushes > 0, Math.max(1, deadline - Date.now()));
      return Date.now() - from;
    } catch {
      return undefined;
    }
  }

  /** A send made now, through a live gateway, accepted and pushed to every subscriber: how long after `from` that took. */
  async function recovery(from: number): Promise<number | undefined> {
    const key = randomUUID();
    const deadline = from + RECOVERY_LIMIT_MS;
    while (Date.now() < deadline) {
      const { response } = await request<{ campaignId: string }>('probe send', `${SERVER_API}/send`, {
        method: 'POST',
        key: apiKey,
        headers: { 'idempotency-key': key },
        body: { title: 'probe', body: 'is it back?' },
      });
      if (response?.status === 200) {
        const id = response.body.campaignId;
        notifications.set(id, { at: from });
        try {
          await eventually('the probe reached every subscriber', async () => countPushes(id).size, (reached) => reached === audience.subscribers.length, Math.max(1, deadline - Date.now()));
          return Date.now() - from;
        } catch {
          return undefined;
        }
      }
      await sleep(200);
    }
    return undefined;
  }

  /**
   * After Kafka's return (`from`): how long until every consumer group has consumed again and the
   * engagement endpoint answered 202 (a report already accepted, made again: counted once), what
   * the row's recovery is; and, as before, a send made then reaching every subscriber.
   */
  async function kafkaRecovery(from: number, row: FaultRow): Promise<number | undefined> {
    const engagement = (async (): Promise<number | undefined> => {
      while (Date.now() < from + RECOVERY_LIMIT_MS) {
        const accepted = [...acceptedReports.values()].at(-1);
        if (accepted) {
          const { outcome } = await request('engagement probe', '/api/v1/events', { method: 'POST', headers: { origin: SITE_ORIGIN }, body: { type: accepted.kind, token: accepted.token } });
          if (outcome === 202) return Date.now() - from;
        }
        await sleep(100);
      }
      return undefined;
    })();
    const [consuming, engaged, endToEnd] = await Promise.all([untilConsumingAgain(stack.topicPrefix, settings.groups, RECOVERY_LIMIT_MS), engagement, recovery(from)]);
    const slowest = [...consuming].sort(([, a], [, b]) => b - a)[0];
    const missing = settings.groups.filter(({ group }) => !consuming.has(group)).map(({ group }) => group);
    settings.log(
      `  every group consuming again in ${slowest?.[1] ?? '-'} ms (slowest ${slowest?.[0] ?? '-'}), engagement 202 in ${engaged ?? '-'} ms, a send end to end in ${endToEnd ?? '-'} ms`,
    );
    if (missing.length > 0) row.problems.push(`consumer groups not consuming again within ${RECOVERY_LIMIT_MS / 1_000} s: ${missing.join(', ')}`);
    if (engaged === undefined) row.problems.push(`the engagement endpoint did not answer 202 within ${RECOVERY_LIMIT_MS / 1_000} s`);
    if (missing.length > 0 || engaged === undefined || endToEnd === undefined || slowest === undefined) return undefined;
    const recovered = Math.max(slowest[1], engaged);
    if (recovered > KAFKA_RECOVERY_BAR_MS) row.problems.push(`consumers (slowest ${slowest[0]}: ${slowest[1]} ms) and engagement (${engaged} ms) back in ${recovered} ms, over ${KAFKA_RECOVERY_BAR_MS / 1_000} s`);
    return recovered;
  }

  /** Every run of the welcome flow (all pages), once each has ended and one exists per stored subscription, or at `until`. */
  async function endedRuns(until: number): Promise<Array<{ subscriberId: string; state: string }>> {
    for (;;) {
      const runs: Array<{ subscriberId: string; state: string }> = [];
      let cursor = '';
      do {
        const page = await call<{ data: Array<{ subscriberId: string; state: string }>; nextCursor: string | null }>(
          pool[0] as string,
          `${SERVER_API}/flows/${flowId}/runs?limit=100${cursor === '' ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
          { key: flowSite.workspace.apiKey, timeoutMs: REQUEST_DEADLINE_MS },
        );
        if (page.status !== 200) throw new Error(`the welcome runs: ${page.status} ${JSON.stringify(page.body)}`);
        runs.push(...page.body.data);
        cursor = page.body.nextCursor ?? '';
      } while (cursor !== '');
      if ((runs.length >= welcomed.size && runs.every((run) => run.state !== 'running' && run.state !== 'waiting')) || Date.now() > until) return runs;
      await sleep(200);
    }
  }

  /** What Herald recorded of one recipient of a notification (for the account of a loss). */
  async function recipientRecord(notificationId: string, subscriberId: string | undefined): Promise<string> {
    const page = await settings.step(
      `reading the recipients of ${notificationId}`,
      REQUEST_DEADLINE_MS,
      call<{ data: Array<{ subscriberId: string; status: string; attempts: number; lastStatusCode: number | null }> }>(
        pool[0] as string,
        `${SERVER_API}/notifications/${notificationId}/recipients?limit=100`,
        { key: apiKey, timeoutMs: REQUEST_DEADLINE_MS },
      ),
    );
    const found = page.status === 200 ? page.body.data.find((recipient) => recipient.subscriberId === subscriberId) : undefined;
    return found ? `${found.status} after ${found.attempts} attempts (last status ${found.lastStatusCode})` : `unknown (${page.status})`;
  }

  /** The pushes of one notification, by endpoint. */
  function countPushes(notificationId: string): Map<string, ReceivedMessage[]> {
    const pushes = new Map<string, ReceivedMessage[]>();
    for (const message of peer.received(undefined, { includeReplaced: true })) {
      if (harness.openPush(message).payload.notificationId !== notificationId) continue;
      pushes.set(message.endpoint, [...(pushes.get(message.endpoint) ?? []), message]);
    }
    return pushes;
  }

  /**
   * One notification's pushes to one subscriber, against the bar: each repeat must carry the
   * first's Topic (the browser then replaces it: shown once). Counts into the row: lost when none,
   * repeated for each repeat, duplicated for each shown twice; says what was wrong, if anything.
   */
  function tallyPushes(row: FaultRow, pushes: readonly ReceivedMessage[]): string | undefined {
    const [first, ...repeats] = pushes;
    if (!first) {
      row.lost += 1;
      return 'no push';
    }
    row.repeated += repeats.length;
    const otherTopics = repeats.filter((repeat) => repeat.topic === undefined || repeat.topic !== first.topic);
    row.duplicated += otherTopics.length;
    return otherTopics.length > 0 ? `${pushes.length} pushes, Topics ${JSON.stringify(pushes.map((push) => push.topic ?? null))}: shown ${otherTopics.length + 1} times` : undefined;
  }

  /** Kills one process with SIGKILL; its pid and how it ended, as the fault's proof. */
  async function kill(victim: RunningProcess): Promise<string> {
    killed.add(victim);
    victim.child.kill('SIGKILL');
    await victim.exited;
    if (victim.child.signalCode !== 'SIGKILL') throw new Error(`pid ${victim.child.pid} ended by ${victim.child.signalCode ?? `exit ${victim.child.exitCode}`}, not SIGKILL`);
    return `pid ${victim.child.pid} SIGKILLed`;
  }

  async function killService(name: string, env: Record<string, string>): Promise<string> {
    const victim = stack.services.find((running) => !isDown(running) && running.output().includes(`${name} service serving`));
    if (!victim) throw new Error(`no running ${name} service to kill`);
    const killedPid = await kill(victim);
    await sleep(settings.holdMs);
    const starting = Date.now();
    // Like the gateway's: a replacement that misses its 20 s to get ready on a machine this busy gets a second try, as an orchestrator would.
    await stack.startService(name, env, { replacing: true }).catch(() => stack.startService(name, env, { replacing: true }));
    settings.log(`  ${name} replacement ready in ${Date.now() - starting} ms`);
    const replacement = stack.services.findLast((running) => !isDown(running) && running.output().includes(`${name} service serving`));
    return `${killedPid}, replaced by pid ${replacement?.child.pid ?? '?'}`;
  }

  async function killGateway(): Promise<string> {
    const victim = stack.gateways.find((running, index) => index > 0 && !isDown(running));
    const url = victim ? stack.gatewayUrls[stack.gateways.indexOf(victim)] : undefined;
    if (!victim || !url) throw new Error('no second gateway to kill');
    gatewayDown = true;
    const killing = kill(victim);
    pool.splice(pool.indexOf(url), 1);
    const killedPid = await killing;
    // A client that still had its address meets a refused connection.
    const refused = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(REQUEST_DEADLINE_MS) }).then(
      (response) => `its address still answered ${response.status}`,
      (err: unknown) => `a request to its address failed (${((err as Error).cause as { code?: string } | undefined)?.code ?? (err as Error).name})`,
    );
    probed.set(rowAt(Date.now()), refused);
    await sleep(settings.holdMs);
    // On a machine this busy a gateway may miss its 20 s to get ready: a second try, as an orchestrator would.
    const replacement = await stack.addGateway(GATEWAY_ENV).catch(() => stack.addGateway(GATEWAY_ENV));
    stack.gatewayUrls.push(replacement);
    pool.push(replacement);
    return killedPid;
  }

  /**
   * Stops PostgreSQL, Kafka or Redis cleanly (`restart`) or with SIGKILL (`crash`: PostgreSQL
   * recovers from its WAL, Kafka its logs, Redis starts empty), and starts it again. A server that
   * was not running, or is the same process afterwards, is no fault: it throws.
   */
  /** The X-RateLimit-Limit a keyed read gets now (the plan's, or a gateway's own share of it while Redis is gone). */
  async function rateLimitSeen(): Promise<string | null> {
    const { response } = await request('rate-limit probe', `${SERVER_API}/identity`, { key: apiKey });
    return response?.headers.get('x-ratelimit-limit') ?? null;
  }

  async function bounceServer(component: InfraComponent, how: 'restart' | 'crash'): Promise<string> {
    const before = await infraComponent('pid', component);
    const usualLimit = component === 'redis' ? await rateLimitSeen() : null;
    // Slow pushes while it goes: some are in flight then, and their outcome must be recorded once it is back.
    peer.respondWith({ delayMs: 1_000 });
    try {
      await infraComponent(how === 'crash' ? 'crash' : 'stop', component);
      await sleep(settings.holdMs);
      if (component === 'redis') {
        // Nothing fails while Redis is gone, by design: the gateways limit on their own share.
        const limit = await rateLimitSeen();
        probed.set(rowAt(Date.now()), limit !== null && limit !== usualLimit ? `rate limited per replica (limit ${limit} instead of ${usualLimit})` : `rate limit ${limit} as usual`);
      }
    } finally {
      // Started again whatever happened above: a server left down would fail every later test on this machine.
      peer.respondWith(null);
      await infraComponent('start', component);
    }
    const after = await infraComponent('pid', component);
    if (after === before) throw new Error(`${component} is still pid ${before}: the ${how} did not happen`);
    return `pid ${before} -> ${after}`;
  }

  async function pushServiceFailing(rule: FaultRule): Promise<string> {
    peer.respondWith(rule);
    await sleep(settings.holdMs);
    peer.respondWith(null);
    return 'push service failing';
  }

  /**
   * Why the fault bit, beyond its process being gone: what Herald's clients or the push service
   * saw while it lasted. Undefined when nothing did, which fails the row.
   */
  function sawIt(fault: FaultName, row: FaultRow): string | undefined {
    const errors = (...keys: string[]) => keys.reduce((sum, key) => sum + (row.errors[key] ?? 0), 0);
    const failedRequests = errors('503', '500', 'timeout', 'network');
    const heldRequests = held.get(row) ?? 0;
    switch (fault) {
      case 'delivery-kill': {
        // Pushes accepted whose 201 never reached their killed sender.
        const accepted = heldAtKill.get(row) ?? 0;
        return accepted > 0 ? `killed with ${accepted} pushes accepted and unanswered` : undefined;
      }
      case 'flow-kill':
        // No client talks to the flow service: its runs wait, which the flow recovery measures.
        return 'no flow process serving';
      case 'redis-restart':
      case 'redis-crash': {
        const seen = probed.get(row);
        return seen?.startsWith('rate limited per replica') ? seen : undefined;
      }
      case 'gateway-kill': {
        // The load moved off it at once (as a balancer's health check does); a client holding its address did not.
        const seen = probed.get(row);
        return seen?.startsWith('a request to its address failed') ? seen : undefined;
      }
      case 'push-429':
        return errors('push 429') > 0 ? `${errors('push 429')} pushes answered 429` : undefined;
      case 'push-503':
        return errors('push 503') > 0 ? `${errors('push 503')} pushes answered 503` : undefined;
      case 'push-reset':
        return errors('push reset') > 0 ? `${errors('push reset')} pushes reset` : undefined;
      default:
        return failedRequests + heldRequests > 0 ? `${failedRequests} requests refused or cut off, ${heldRequests} held` : undefined;
    }
  }

  const inject: Record<FaultName, () => Promise<string>> = {
    'delivery-kill': async () => {
      // The worst instant: the push service has accepted a push (counted, stored) and holds its
      // 201, and the worker dies before it learnt so, let alone recorded it. The next worker pushes
      // it again, with its Topic: the browser replaces the first (shown once, one impression),
      // which the reconciliation checks; `repeated` counts them.
      const holdFrom = Date.now();
      peer.respondWith({ delayResponseMs: 3_000 });
      try {
        // On a busy machine a send can take a while to reach the fleet: the kill waits (bounded)
        // until the peer has accepted a push whose 201 it holds.
        await eventually('a push accepted and its 201 held', async () => peer.received(undefined, { includeReplaced: true }).filter((message) => message.at >= holdFrom).length, (held) => held > 0, 10_000).catch(() => undefined);
        const killing = killService('delivery', {});
        heldAtKill.set(rowAt(Date.now()), peer.received(undefined, { includeReplaced: true }).filter((message) => message.at >= holdFrom).length);
        return await killing;
      } finally {
        peer.respondWith(null);
      }
    },
    'campaign-kill': () => killService('campaign', { CAMPAIGN_TIMER_POLL_MS: '100' }),
    // Questions opened, delivered and answered across it: each delivery is made once by the replacement.
    'decision-kill': () => killService('decision', { QUESTION_DELIVERY_POLL_MS: '100' }),
    'flow-kill': () => killService('flow', {}),
    'gateway-kill': () => killGateway(),
    'postgres-restart': () => bounceServer('postgres', 'restart'),
    'postgres-crash': () => bounceServer('postgres', 'crash'),
    'kafka-restart': () => bounceServer('kafka', 'restart'),
    'kafka-crash': () => bounceServer('kafka', 'crash'),
    'redis-restart': () => bounceServer('redis', 'restart'),
    'redis-crash': () => bounceServer('redis', 'crash'),
    'push-429': () => pushServiceFailing({ status: 429, retryAfter: 1 }),
    'push-503': () => pushServiceFailing({ status: 503 }),
    'push-reset': () => pushServiceFailing({ resetStream: true }),
  };

  const rows: FaultRow[] = [];
  try {
    await sleep(settings.calmMs);
    for (const fault of settings.faults) {
      const row: FaultRow = { fault, requests: 0, errors: {}, recoveryMs: undefined, lost: 0, duplicated: 0, repeated: 0, problems: [] };
      const window = { row, start: Date.now(), end: Number.MAX_SAFE_INTEGER };
      windows.push(window);
      rows.push(row);
      settings.log(`fault: ${fault}`);
      let injected = true;
      let gone: string | undefined;
      try {
        gone = await settings.step(`injecting ${fault}`, STEP_LIMIT_MS + settings.holdMs, inject[fault]());
      } catch (err) {
        injected = false;
        row.problems.push(`injecting the fault failed: ${(err as Error).message}`);
      }
      const restored = Date.now();
      row.recoveryMs = await settings
        .step(`recovering from ${fault}`, RECOVERY_LIMIT_MS + REQUEST_DEADLINE_MS, fault === 'flow-kill' ? flowRecovery(restored) : fault.startsWith('kafka-') ? kafkaRecovery(restored, row) : recovery(restored))
        .catch((err: unknown) => {
          row.problems.push((err as Error).message);
          return undefined;
        });
      gatewayDown = false;
      if (row.recoveryMs === undefined) row.problems.push(`the API did not serve end to end within ${RECOVERY_LIMIT_MS / 1_000} s`);
      window.end = Date.now();
      // What the delivery fleet met at the push service meanwhile (it retries those).
      for (const attempt of peer.attempts()) {
        if (attempt.at >= window.start && attempt.at <= window.end && attempt.status !== 201) countInto(row.errors, `push ${attempt.status}`);
      }
      if (gone !== undefined) {
        // Every fault proves it bit: the process it took is gone, and someone met its absence.
        const seen = sawIt(fault, row);
        row.proof = `${gone}; ${seen ?? 'nothing saw it'}`;
        if (seen === undefined) row.problems.push(`the fault did not bite: ${gone}, but no request or push met it`);
      }
      settings.log(`  ${row.requests} requests, recovered in ${row.recoveryMs ?? '-'} ms`);
      // Said now as well as in the report: a drill that throws later (its database gone) still shows why.
      for (const problem of row.problems) settings.log(`  problem: ${problem}`);
      // Faults piled on a Herald that did not come back would only add waits: the rest is skipped, and the drill fails naming this one.
      if (!injected || row.recoveryMs === undefined) {
        runProblems.push(`faults after ${fault} not injected: it ${injected ? 'never recovered' : 'could not be injected'}`);
        break;
      }
      await sleep(settings.calmMs);
    }
  } finally {
    generating = false;
    await loop;
  }

  // Drain: the retries of what was refused, the reports of the last pushes, the last answers.
  settings.log('load stopped; draining retries and the last reports');
  const drainDeadline = Date.now() + DRAIN_LIMIT_MS;
  const drain = async (): Promise<void> => {
    for (;;) {
      round(0, false);
      await settings.step('the requests in flight', DRAIN_LIMIT_MS, Promise.all([...inFlight]));
      const open = sends.length + campaignStarts.length + subscriptions.length + reports.length + questions.filter((question) => !question.settled).length;
      if (open === 0 && peer.received(undefined, { includeReplaced: true }).length === seenPushes) return;
      if (Date.now() > drainDeadline) {
        runProblems.push(`still open after the drain: ${open} requests`);
        return;
      }
      await sleep(settings.roundMs);
    }
  };
  await settings.step('draining', DRAIN_LIMIT_MS + WAIT_SECONDS * 1_000 + REQUEST_DEADLINE_MS, drain());

  // Each question the decision service holds: one web push delivery, made once (or skipped, the
  // question answered before its turn); the notification it made is tracked like any other.
  const db = await settings.step('connecting to PostgreSQL', REQUEST_DEADLINE_MS, connectDatabase());
  try {
    const { rows: held } = await settings.step(
      "reading the questions' deliveries",
      REQUEST_DEADLINE_MS,
      db.query<{ id: string; question: string; created_at: Date; deliveries: { state: string; result: string | null; error: string | null }[] }>(
        `SELECT q.id, q.question, q.created_at,
                coalesce(jsonb_agg(jsonb_build_object('state', d.state, 'result', d.result, 'error', d.last_error)) FILTER (WHERE d.question_id IS NOT NULL), '[]') AS deliveries
           FROM decision.questions q
           LEFT JOIN decision.question_deliveries d ON d.question_id = q.id AND d.channel = 'web_push'
          WHERE q.workspace_id = $1
          GROUP BY q.id`,
        [audience.workspace.workspaceId],
      ),
    );
    /** The notifications the deliveries made (a question push's id). */
    const made = new Set<string>();
    for (const { id, question: text, created_at: createdAt, deliveries } of held) {
      const asked = questions.find((candidate) => candidate.id === id);
      // An ask whose 200 was lost with a killed gateway's connection was made all the same.
      if (!asked && unanswered.get(text) !== 'network') runProblems.push(`question ${id} ("${text}"): held, but its ask answered ${unanswered.get(text) ?? 'never'}`);
      const at = asked?.at ?? createdAt.getTime();
      const row = rowAt(at);
      const [delivery, ...more] = deliveries;
      if (more.length > 0) row.duplicated += more.length;
      if (!delivery || (delivery.state !== 'delivered' && !(delivery.state === 'skipped' && delivery.error === 'the question is answered'))) {
        row.lost += 1;
        row.problems.push(`question ${id}: web push deliveries ${JSON.stringify(deliveries)}`);
        continue;
      }
      // Delivered with an empty result: it addressed no approver device (an ask names nobody, and
      // the drill pairs none), so there is no push to follow.
      if (delivery.state === 'delivered' && delivery.result) {
        if (made.has(delivery.result)) row.duplicated += 1;
        made.add(delivery.result);
        notifications.set(delivery.result, { at, question: true });
      }
    }
    // Every question push the campaign service holds came from one of those deliveries.
    const { rows: queued } = await settings.step(
      "reading the questions' pushes",
      REQUEST_DEADLINE_MS,
      db.query<{ id: string }>(`SELECT id FROM campaign.campaigns WHERE workspace_id = $1 AND kind = 'question'`, [audience.workspace.workspaceId]),
    );
    const strays = queued.filter(({ id }) => !made.has(id));
    if (strays.length > 0) runProblems.push(`question pushes no delivery made: ${strays.map(({ id }) => id).join(', ')}`);
  } finally {
    await db.end();
  }
  settings.log(`reconciling ${notifications.size} notifications, ${acceptedReports.size} reports, ${questions.length} questions, ${welcomed.size} welcome runs`);
  // One deadline for all: past it, a notification still pending is a failure named at once, not one more wait.
  const reconcileDeadline = Date.now() + DRAIN_LIMIT_MS;
  for (const [id, tracked] of notifications) {
    const row = rowAt(tracked.at);
    try {
      await settings.step(
        `notification ${id} completing`,
        DRAIN_LIMIT_MS,
        eventually(
          `notification ${id} completed with nothing pending`,
          () => call<{ status: string; counts: { pending: number } }>(pool[0] as string, `${SERVER_API}/notifications/${id}`, { key: apiKey, timeoutMs: REQUEST_DEADLINE_MS }),
          (reply) => reply.status === 200 && reply.body.status === 'completed' && reply.body.counts.pending === 0,
          Math.max(0, reconcileDeadline - Date.now()),
        ),
      );
    } catch (err) {
      row.problems.push((err as Error).message);
    }
  }
  // Late pushes (retried ones) bring their reports; then every outbox row is published and every consumer caught up.
  await settings.step('draining again', DRAIN_LIMIT_MS + WAIT_SECONDS * 1_000 + REQUEST_DEADLINE_MS, drain());
  try {
    await settings.step('waiting for quiet', DRAIN_LIMIT_MS + REQUEST_DEADLINE_MS, waitForQuiet(stack.topicPrefix, settings.settle, { timeoutMs: DRAIN_LIMIT_MS }));
  } catch (err) {
    runProblems.push(`outboxes or consumers not quiet: ${(err as Error).message}`);
  }

  // Flows: every stored subscription started one run of the welcome flow, which ended, and its subscriber got each of the flow's pushes once.
  const runs = await settings.step('the welcome runs ending', DRAIN_LIMIT_MS + REQUEST_DEADLINE_MS, endedRuns(Date.now() + DRAIN_LIMIT_MS));
  for (const [endpoint, { subscriberId, at }] of welcomed) {
    const row = rowAt(at);
    const own = runs.filter((run) => run.subscriberId === subscriberId);
    if (own.length !== 1 || own[0]?.state !== 'completed') row.problems.push(`subscriber ${subscriberId}: welcome runs ${JSON.stringify(own)}`);
    const received = peer.received(endpoint, { includeReplaced: true });
    for (const title of WELCOME_TITLES) {
      const wrong = tallyPushes(row, received.filter((message) => (JSON.parse(message.plaintext.toString()) as { title: string }).title === title));
      if (wrong !== undefined) row.problems.push(`subscriber ${subscriberId}: "${title}": ${wrong} (run ${JSON.stringify(own)})`);
    }
  }
  const strangers = runs.filter((run) => ![...welcomed.values()].some((welcome) => welcome.subscriberId === run.subscriberId));
  if (strangers.length > 0) runProblems.push(`welcome runs of subscriptions no accepted request made: ${JSON.stringify(strangers)}`);

  // Pushes: each subscriber each notification exactly once; and nothing the drill did not have accepted.
  const endpoints = new Set(audience.subscribers.map((subscriber) => subscriber.endpoint));
  const subscriberOf = new Map(audience.subscribers.map((subscriber) => [subscriber.endpoint, subscriber.id]));
  for (const [id, tracked] of notifications) {
    const row = rowAt(tracked.at);
    const pushes = countPushes(id);
    for (const endpoint of endpoints) {
      const wrong = tallyPushes(row, pushes.get(endpoint) ?? []);
      if (wrong !== undefined) row.problems.push(`${id} to subscriber ${subscriberOf.get(endpoint)}: ${wrong}${pushes.has(endpoint) ? '' : `, recorded as ${await recipientRecord(id, subscriberOf.get(endpoint))}`}`);
    }
  }
  const unknown = new Set(
    peer
      .received(undefined, { includeReplaced: true })
      .filter((message) => !flowEndpoints.has(message.endpoint))
      .map((message) => harness.openPush(message).payload.notificationId)
      .filter((id) => !notifications.has(id)),
  );
  if (unknown.size > 0) runProblems.push(`pushes of ${unknown.size} notifications no accepted request made: ${[...unknown].join(', ')}`);

  // Engagement: the campaign counters equal the distinct accepted reports.
  const expected = new Map<string, { impression: number; click: number; at: number }>();
  for (const accepted of acceptedReports.values()) {
    const entry = expected.get(accepted.notificationId) ?? { impression: 0, click: 0, at: accepted.at };
    entry[accepted.kind] += 1;
    entry.at = Math.max(entry.at, accepted.at);
    expected.set(accepted.notificationId, entry);
  }
  for (const [id, tracked] of notifications) {
    if (tracked.question) continue;
    const want = expected.get(id) ?? { impression: 0, click: 0, at: notifications.get(id)?.at ?? 0 };
    const row = rowAt(want.at);
    const stats = await settings.step(
      `reading the stats of ${id}`,
      REQUEST_DEADLINE_MS,
      call<{ totalDelivered: number; totalClicked: number }>(pool[0] as string, `${SERVER_API}/campaigns/${id}/stats`, { key: apiKey, timeoutMs: REQUEST_DEADLINE_MS }),
    );
    if (stats.status !== 200) {
      row.problems.push(`stats of ${id}: ${stats.status}`);
      continue;
    }
    for (const [counted, wanted] of [
      [stats.body.totalDelivered, want.impression],
      [stats.body.totalClicked, want.click],
    ] as const) {
      if (counted < wanted) row.lost += wanted - counted;
      if (counted > wanted) row.duplicated += counted - wanted;
    }
    if (stats.body.totalDelivered !== want.impression || stats.body.totalClicked !== want.click) {
      row.problems.push(`${id}: counted ${stats.body.totalDelivered} impressions and ${stats.body.totalClicked} clicks for ${want.impression} and ${want.click} accepted`);
    }
  }

  // Questions: each answered once, its answer readable, its waiter woken (or it reads the answer now).
  let readAfterwards = 0;
  for (const question of questions) {
    const row = rowAt(question.at);
    if (question.answered200 > 1) row.duplicated += question.answered200 - 1;
    const read = await settings.step(
      `reading question ${question.id}`,
      REQUEST_DEADLINE_MS,
      call<{ answered: boolean; value?: string }>(pool[0] as string, `${SERVER_API}/ask/${question.id}`, { key: apiKey, timeoutMs: REQUEST_DEADLINE_MS }),
    );
    if (read.status !== 200 || read.body.answered !== true || read.body.value !== 'yes') {
      row.lost += 1;
      row.problems.push(`question ${question.id} reads ${read.status} ${JSON.stringify(read.body)}`);
    }
    else if (question.waiter !== 'woken') readAfterwards += 1;
  }

  for (const running of [...stack.gateways, ...stack.services]) {
    if (!killed.has(running) && isDown(running)) runProblems.push(`a process exited by itself:\n${running.output().slice(-2_000)}`);
  }

  const all = [...rows, calm];
  return {
    rows: all,
    totals: {
      requests: all.reduce((sum, row) => sum + row.requests, 0),
      notifications: notifications.size,
      pushes: peer.received(undefined, { includeReplaced: true }).length,
      reports: acceptedReports.size,
      questions: questions.length,
      questionPushes: [...notifications.values()].filter((tracked) => tracked.question).length,
      wokenWaiters: questions.filter((question) => question.waiter === 'woken').length,
      readAfterwards,
    },
    problems: [...all.flatMap((row) => row.problems.map((problem) => `${row.fault}: ${problem}`)), ...runProblems],
    durationMs: Date.now() - settings.started,
  };
}

/** The drill's table: fault, requests during it, errors by status, recovery time, lost, duplicated (shown twice), pushed again (same Topic). */
export function formatFaultTable(report: FaultDrillReport): string {
  const header = ['fault', 'requests', 'errors by status', 'recovery', 'lost', 'duplicated', 'pushed again', 'proof it bit'];
  const lines = report.rows.map((row) => [
    row.fault,
    String(row.requests),
    Object.entries(row.errors)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([status, count]) => `${status}: ${count}`)
      .join(', ') || '-',
    row.recoveryMs === undefined ? '-' : `${(row.recoveryMs / 1_000).toFixed(1)} s`,
    String(row.lost),
    String(row.duplicated),
    String(row.repeated),
    row.proof ?? '-',
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...lines.map((line) => (line[column] ?? '').length)));
  const render = (cells: string[]) => `| ${cells.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join(' | ')} |`;
  return [render(header), `|${widths.map((width) => '-'.repeat(width + 2)).join('|')}|`, ...lines.map(render)].join('\n');
}
