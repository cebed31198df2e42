import type { PushSubscriptionJSON } from '@herald/push-peer';

import type { ConsumedTopics } from '../consumers.js';
import type { RunningProcess } from '../processes.js';
import type { Load } from './load.js';

// The fault drill's shapes, constants and the contract every fault module meets (see ../faults.ts).

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
export const REQUEST_DEADLINE_MS = 7_000;
/** A request answered this late was held up by the fault (they take milliseconds otherwise). */
export const HELD_MS = 1_000;
/**
 * The welcome flow of the flow site: a push at once, a delay, a second push. Each subscription
 * made during the load starts one run, whose two pushes are counted per subscriber.
 */
export const WELCOME_TITLES = ['Welcome', 'Follow-up'] as const;
export const WELCOME_STEPS = [
  { stepType: 'send_notification', config: { notification: { title: WELCOME_TITLES[0], body: 'fault drill' } } },
  { stepType: 'delay', config: { delay: { value: 1, unit: 'seconds' } } },
  { stepType: 'send_notification', config: { notification: { title: WELCOME_TITLES[1], body: 'fault drill' } } },
];
/** Runs claimed by a killed flow service are worked again when their lease ends: 5 s here (30 s in production) keeps the drill short. */
export const FLOW_ENV = { FLOW_RUN_LEASE_MS: '5000' };
export const WAIT_SECONDS = 10;
export const SITE_ORIGIN = 'https://shop.example.test';
/** Every gateway's, a replacement's too (the local push peer's endpoints are on no known push service). */
export const GATEWAY_ENV = { ENGAGEMENT_IP_RATE_LIMIT_PER_MINUTE: '1000000', ALLOW_ANY_PUSH_SERVICE: 'true' };
/** Bounds on every loop: the drill always ends by itself. */
export const RECOVERY_LIMIT_MS = 60_000;
export const DRAIN_LIMIT_MS = 90_000;
/** Starting a stack, injecting a fault (a replacement included), stopping everything. */
export const STEP_LIMIT_MS = 90_000;
export const MAX_ATTEMPTS = 200;

export type Outcome = number | 'network' | 'timeout';
export interface Tracked {
  /** When the request that made it started (or the fault began, for a recovery probe). */
  at: number;
  /** A question's push (made by the decision service; the drill answers it instead of reporting on it): checked for pushes, not for counters. */
  question?: boolean;
}
export interface PendingSend {
  key: string;
  round: number;
  attempts: number;
  at: number;
}
export interface PendingSubscription {
  subscription: PushSubscriptionJSON;
  attempts: number;
  at: number;
}
export interface PendingCampaignStart {
  campaignId: string;
  attempts: number;
  at: number;
}
export interface Report {
  notificationId: string;
  subscriberId: string;
  kind: 'impression' | 'click';
  token: string;
  attempts: number;
  /** A report made again on purpose (a browser retrying): sent once, not retried. */
  repeat?: boolean;
}
export interface Question {
  id: string;
  liveUrl: string;
  token: string;
  at: number;
  answerDueAt: number;
  settled: boolean;
  attempts: number;
  waiter: 'waiting' | 'woken' | 'timed-out' | 'failed';
}


export function countInto(counts: Record<string, number>, key: string): void {
  counts[key] = (counts[key] ?? 0) + 1;
}

export function isDown(process: RunningProcess): boolean {
  return process.child.exitCode !== null || process.child.signalCode !== null;
}

export interface DrillSettings {
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

/**
 * One fault of the drill, in a module of its own: how it injects, how it proves it bit, how it
 * recovers, and what it reconciles beyond what is reconciled for every fault (reconcile.ts).
 */
export interface Fault {
  readonly name: FaultName;
  /**
   * Injects it, holds it `settings.holdMs`, and ends it (a replacement started, a server started
   * again, the push service healthy). Resolves with what shows it happened (the pid killed or
   * changed); rejects when it could not (a server that was not running is no fault).
   */
  inject(load: Load): Promise<string>;
  /** What met it while it lasted (requests refused or held, pushes it took): undefined when nothing did, which fails the row. */
  bit(load: Load, row: FaultRow): string | undefined;
  /** From its end (`from`) until Herald serves again, the way this fault measures it. Default: a send made then reaching every subscriber. */
  recover?(load: Load, row: FaultRow, from: number): Promise<number | undefined>;
  /** Its own checks, after the shared reconciliation. */
  reconcile?(load: Load, row: FaultRow): void;
}
