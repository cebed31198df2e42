import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import type { PushPeer, ReceivedMessage } from '@herald/push-peer';

import { call, SERVER_API, type ApiResponse, type RequestOptions } from '../http.js';
import type { RunningProcess, Stack } from '../processes.js';
import { eventually, type Audience, type SendingHarness } from '../sending.js';
import {
  countInto,
  DRAIN_LIMIT_MS,
  MAX_ATTEMPTS,
  RECOVERY_LIMIT_MS,
  REQUEST_DEADLINE_MS,
  HELD_MS,
  SITE_ORIGIN,
  WAIT_SECONDS,
  type DrillSettings,
  type FaultRow,
  type Outcome,
  type PendingCampaignStart,
  type PendingSend,
  type PendingSubscription,
  type Question,
  type Report,
  type Tracked,
} from './drill.js';

/**
 * The drill's steady load and its accounts (see ../faults.ts): what it made and what was accepted,
 * every request counted under the row (a fault, or the calm between) of the moment it started,
 * and the probes that time a recovery. What the faults and the reconciliation read of it is
 * `Load`.
 */

type Request = <T = Record<string, unknown>>(what: string, path: string, init: RequestOptions & { deadlineMs?: number }) => Promise<{ outcome: Outcome; response?: ApiResponse<T> }>;

export interface Load {
  harness: SendingHarness;
  stack: Stack;
  peer: PushPeer;
  audience: Audience;
  settings: DrillSettings;
  /** Problems of the whole run, not of one row. */
  runProblems: string[];
  /** The row of the load between faults. */
  calm: FaultRow;
  /** What a probe made while a fault lasted saw of it (the Redis faults, the gateway's kill), per row. */
  probed: Map<FaultRow, string>;
  /** Pushes the peer had accepted and not yet answered when the delivery worker was killed, per row. */
  acceptedAtKill: Map<FaultRow, ReceivedMessage[]>;
  /** Requests per row that were held a second or more before their answer (a dependency gone, waited for). */
  held: Map<FaultRow, number>;
  /** Each fault's row and when it lasted (from its start until Herald served again). */
  windows: Array<{ row: FaultRow; start: number; end: number }>;
  /** The row of a moment. */
  rowAt(at: number): FaultRow;
  /** Gateways the load goes through (a killed one leaves the pool at once, as a load balancer's health check would take it out). */
  pool: string[];
  /** Processes a fault killed (any other that died, died by itself). */
  killed: Set<RunningProcess>;
  /** While a gateway is down, a request cut off (`network`) is expected. */
  gatewayDown(down: boolean): void;
  /** One request through the next gateway of the pool, counted under the row of the moment it started. Never throws. */
  request: Request;
  /** Notifications accepted (sends, campaigns, probes, questions' pushes), by id. */
  notifications: Map<string, Tracked>;
  /** Engagement reports accepted, by notification, subscriber and kind. */
  acceptedReports: Map<string, Report & { at: number }>;
  questions: Question[];
  /** Stored subscriptions of the flow site, by endpoint: each starts one run of the welcome flow. */
  welcomed: Map<string, { subscriberId: string; at: number }>;
  /** Browsers of the flow site, by endpoint. */
  flowEndpoints: Set<string>;
  /** Asks that got no 200, by their question text. */
  unanswered: Map<string, Outcome>;
  /** Stops making new work (what is open stays open: `drain`). */
  stop(): Promise<void>;
  drain(until: number): Promise<void>;
  /** A send made at `from`, through a live gateway, accepted and pushed to every subscriber: how long after `from` that took. */
  recovery(from: number): Promise<number | undefined>;
  /** A subscription made at `from` to the flow site, stored, and welcomed with the flow's first push: how long after `from` that took. */
  flowRecovery(from: number): Promise<number | undefined>;
  endedRuns(until: number): Promise<Array<{ subscriberId: string; state: string }>>;
  recipientRecord(notificationId: string, subscriberId: string | undefined): Promise<string>;
  countPushes(notificationId: string): Map<string, ReceivedMessage[]>;
  tallyPushes(row: FaultRow, pushes: readonly ReceivedMessage[]): string | undefined;
}

/** Starts the load (a round every `settings.roundMs`) against a started Herald. */
export function startLoad(harness: SendingHarness, audience: Audience, { flowSite, flowId }: { flowSite: Audience; flowId: string }, settings: DrillSettings): Load {
  const { stack, peer } = harness;
  const { apiKey } = audience.workspace;
  const runProblems: string[] = [];
  const calm: FaultRow = { fault: 'none', requests: 0, errors: {}, recoveryMs: undefined, lost: 0, duplicated: 0, repeated: 0, problems: [] };
  /** What a probe made while a fault lasted saw of it (the Redis faults, the gateway's kill), per row. */
  const probed = new Map<FaultRow, string>();
  /** Pushes the peer had accepted and not yet answered when the delivery worker was killed, per row. */
  const acceptedAtKill = new Map<FaultRow, ReceivedMessage[]>();
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
    // A 409 after a failed attempt: that attempt started it (even a 503 may have, when PostgreSQL
    // failed during its commit); the reconciliation finds out if it did not.
    if (outcome === 200 || (outcome === 409 && pending.attempts > 1)) notifications.set(pending.campaignId, { at: pending.at });
    else if (pending.attempts < MAX_ATTEMPTS) campaignStarts.push(pending);
    else runProblems.push(`campaign ${pending.campaignId} never started`);
  }

  async function createCampaign(round: number): Promise<void> {
    const at = Date.now();
    const { response } = await request<{ id: string }>('campaign create', `${SERVER_API}/campaigns`, {
      method: 'POST',
      key: apiKey,
      body: { name: `Drill ${round}`, title: `campaign ${round}`, body: 'fault drill' },
    });
    // A create that failed made at most a draft, which sends nothing.
    if (response?.status === 201) await startCampaign({ campaignId: response.body.id, attempts: 0, at });
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
    if (outcome === 200) question.settled = true;
    else if (outcome === 409) {
      // Only the drill answers, always "yes" by the same link, and a repeat of a recorded answer is 200.
      question.settled = true;
      runProblems.push(`question ${question.id}: an answer was refused as already answered`);
    } else if (question.attempts >= MAX_ATTEMPTS) {
      question.settled = true;
      runProblems.push(`question ${question.id} could not be answered`);
    } else question.answerDueAt = Date.now() + 500;
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

  /**
   * Makes what is still open (the retries of what was refused, the reports of the last pushes,
   * the last answers) until nothing is, or `until`: then says what was left.
   */
  async function drain(until: number): Promise<void> {
    for (;;) {
      round(0, false);
      await settings.step('the requests in flight', DRAIN_LIMIT_MS, Promise.all([...inFlight]));
      const open = sends.length + campaignStarts.length + subscriptions.length + reports.length + questions.filter((question) => !question.settled).length;
      if (open === 0 && peer.received(undefined, { includeReplaced: true }).length === seenPushes) return;
      if (Date.now() > until) {
        runProblems.push(`still open after the drain: ${open} requests`);
        return;
      }
      await sleep(settings.roundMs);
    }
  }

  return {
    harness,
    stack,
    peer,
    audience,
    settings,
    runProblems,
    calm,
    probed,
    acceptedAtKill,
    held,
    windows,
    rowAt,
    pool,
    killed,
    gatewayDown: (down) => {
      gatewayDown = down;
    },
    request,
    notifications,
    acceptedReports,
    questions,
    welcomed,
    flowEndpoints,
    unanswered,
    async stop() {
      generating = false;
      await loop;
    },
    drain,
    recovery,
    flowRecovery,
    endedRuns,
    recipientRecord,
    countPushes,
    tallyPushes,
  };
}
