import { backoffMs, type BackoffOptions } from '@herald/backoff';
import type { Pool } from '@herald/db';
import { HeraldError } from '@herald/errors';
import type { PromiseClient } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import type { CampaignServiceClient } from '@herald/proto/herald/campaign/v1/campaign';
import { retryWhileUnreachable, startWorkLoop, type WorkLoop } from '@herald/workloop';

import { delayMs, type Step } from './steps.js';
import * as store from './store.js';

/** Runs worked at once per batch (their sends in flight): enough to keep the campaign service busy, not flooded. */
const SENDS_PER_BATCH = 32;
/** Entries a cache keeps before it starts over (versions are cheap to read again). */
const CACHE_LIMIT = 10_000;
/** Finished runs deleted per statement. */
const PRUNE_BATCH = 2_000;
/** How long one pruning may hold up the loop's claims; what is left goes next time. */
const PRUNE_BUDGET_MS = 1_000;
/**
 * A send that failed for now (an error, a deadline) is tried again 2.5 to 5 s later (equal jitter:
 * its retries are not counted, and never come at once after a failure).
 */
const SEND_RETRY: BackoffOptions = { baseMs: 5_000, capMs: 5_000, jitter: 'equal' };
/** How long a worked run's outcome may wait to be recorded with others of its batch. */
const RECORD_EVERY_MS = 200;

/** Starts a full cache over, so a long-lived process does not keep every flow version it ever ran. */
function remember<V>(cache: Map<string, V>, key: string, value: V): V {
  if (cache.size >= CACHE_LIMIT) cache.clear();
  cache.set(key, value);
  return value;
}

export interface RunDeps {
  pool: Pool;
  logger: Logger;
  campaign: PromiseClient<CampaignServiceClient>;
}

/** Why a run ends early: the subscriber cannot be reached any more (cancelled), or a refusal that retrying will not change (failed). */
class RunEnded extends Error {
  constructor(
    readonly state: 'cancelled' | 'failed',
    readonly reason: string,
  ) {
    super(reason);
  }
}

/**
 * The runs, on the shared work loop: a claimed run executes its steps from where it stands until it
 * parks on a delay (waiting, due after the delay) or ends (exit, past the last step, or refused).
 * A batch's outcomes are recorded together under the claim, so a run cancelled or deleted
 * meanwhile is left as it is, and a run whose process died is worked again after the lease: its
 * sends carry an idempotency key per (run, step), so working it again never sends twice.
 */
export function startRunLoop(
  deps: RunDeps & { pollMs?: number; leaseMs: number; batchSize: number; concurrency: number; retentionDays: number; pruneEveryMs: number },
): WorkLoop {
  const { pool, logger, campaign } = deps;
  // Versions never change once written: each is read once per process.
  const versions = new Map<string, Promise<Step[] | undefined>>();

  function stepsOf(run: store.ClaimedRun): Promise<Step[] | undefined> {
    const key = `${run.flow_id}/${run.version}`;
    let steps = versions.get(key);
    if (!steps) {
      steps = remember(versions, key, store.findVersionSteps(pool, run.flow_id, run.version));
      steps.catch(() => versions.delete(key));
    }
    return steps;
  }

  async function send(run: store.ClaimedRun, index: number, step: Extract<Step, { stepType: 'send_notification' }>): Promise<string> {
    const { notification } = step.config;
    try {
      const response = await campaign.send({
        workspaceId: run.workspace_id,
        siteId: run.site_id,
        content: {
          title: notification.title,
          body: notification.body,
          url: notification.actionUrl ?? '',
          iconUrl: notification.iconUrl ?? '',
          imageUrl: notification.imageUrl ?? '',
          actions: [],
          answerUrl: '',
        },
        targeting: { subscriberIds: [run.subscriber_id], externalIds: [], tags: [], segmentId: '', verifiedOnly: false, memberIds: [] },
        // Working the run again (a crash, a lost claim) replays this send instead of sending twice.
        idempotencyKey: `flow:${run.id}:${index}`,
        // No API key: the flow service's own idempotency keys, apart from every key's.
        keyId: '',
        // The campaign service reads the plan's allowance itself.
        monthlyAllowance: '0',
      });
      return response.notificationId;
    } catch (err) {
      if (!(err instanceof HeraldError) || err.status >= 500) throw err;
      // The only subscriber targeted is not active any more: no further sends.
      if (err.code === 'invalid_request') throw new RunEnded('cancelled', 'the subscriber is no longer active');
      throw new RunEnded('failed', `${err.code}: ${err.message}`);
    }
  }

  /** Walks one run's steps from where it stands; resolves with where it goes next. */
  async function advance(run: store.ClaimedRun): Promise<store.RunOutcome> {
    const notificationIds: string[] = [];
    const outcome = (state: store.RunState, stepIndex: number, dueAt: Date | null, endReason: string | null): store.RunOutcome => ({
      id: run.id,
      state,
      stepIndex,
      dueAt,
      endReason,
      notificationIds,
    });
    const steps = await stepsOf(run);
    if (!steps) return outcome('cancelled', run.step_index, null, 'the flow was deleted');
    try {
      for (let index = run.step_index; index < steps.length; index += 1) {
        const step = steps[index] as Step;
        if (step.stepType === 'exit') return outcome('exited', index, null, null);
        if (step.stepType === 'delay') return outcome('waiting', index + 1, new Date(Date.now() + delayMs(step)), null);
        try {
          notificationIds.push(await send(run, index, step));
        } catch (err) {
          if (err instanceof RunEnded) throw err;
          // The campaign service is slow or away: this step again in a few seconds (its idempotency
          // key replays a send that did happen), not when the whole batch's lease ends.
          logger.warn({ err, runId: run.id, step: index }, 'flow send failed; the step is tried again shortly');
          return outcome('running', index, new Date(Date.now() + backoffMs(1, SEND_RETRY)), null);
        }
      }
      return outcome('completed', steps.length, null, null);
    } catch (err) {
      if (!(err instanceof RunEnded)) throw err;
      return outcome(err.state, run.step_index, null, err.reason);
    }
  }

  async function work(runs: store.ClaimedRun[], token: string): Promise<void> {
    // A claim's rows come back in no particular order: the earliest due is worked first.
    runs.sort((a, b) => (a.due_at?.getTime() ?? 0) - (b.due_at?.getTime() ?? 0));
    let failed: unknown;
    // Outcomes are recorded in groups: all at once for a batch of timers (no I/O, done in
    // milliseconds), every RECORD_EVERY_MS while sends are slow, so a run is released (and shown
    // in GET /runs) soon after its sends rather than after the whole batch's.
    let pending: store.RunOutcome[] = [];
    let recording = Promise.resolve();
    let flushTimer: NodeJS.Timeout | undefined;
    const flush = (): Promise<void> => {
      clearTimeout(flushTimer);
      flushTimer = undefined;
      const outcomes = pending;
      pending = [];
      // Sends made before PostgreSQL went away are recorded once it is back, not replayed after the lease.
      if (outcomes.length > 0) recording = recording.then(() => retryWhileUnreachable(() => store.recordOutcomes(pool, token, outcomes), deps.leaseMs).then(() => undefined));
      return recording;
    };
    // A batch of sends can outlast its lease: the runs not worked yet keep their claim, so no
    // other claim works them meanwhile (their sends would be replayed, not repeated, but twice the work).
    const ids = runs.map((run) => run.id);
    let renewedAt = Date.now();
    let renewing: Promise<unknown> = Promise.resolve();
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let run = runs[next++]; run !== undefined; run = runs[next++]) {
        if (Date.now() - renewedAt > deps.leaseMs / 3) {
          renewedAt = Date.now();
          // Every run of the batch: those recorded already are no longer this claim's, so unchanged.
          renewing = store.extendClaim(pool, token, ids, deps.leaseMs).catch((err: unknown) => (failed ??= err));
        }
        try {
          pending.push(await advance(run));
          flushTimer ??= setTimeout(() => void flush().catch((err: unknown) => (failed ??= err)), RECORD_EVERY_MS);
        } catch (err) {
          failed ??= err;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(SENDS_PER_BATCH, runs.length) }, worker));
    // What could be worked is recorded; a run that failed stays claimed and is retried after the lease.
    await renewing;
    await flush();
    if (failed) throw failed;
  }

  return startWorkLoop<store.ClaimedRun>({
    name: 'flow runs',
    pool,
    logger,
    table: store.RUN_TIMERS,
    leaseMs: deps.leaseMs,
    channel: store.RUNS_CHANNEL,
    batchSize: deps.batchSize,
    concurrency: deps.concurrency,
    ...(deps.pollMs ? { pollMs: deps.pollMs } : {}),
    work,
    housekeeping: {
      everyMs: deps.pruneEveryMs,
      // Finished runs past the retention, a batch at a time; what is left over goes next time.
      run: async () => {
        const until = Date.now() + PRUNE_BUDGET_MS;
        let pruned = 0;
        for (let deleted = PRUNE_BATCH; deleted === PRUNE_BATCH && Date.now() < until; pruned += deleted) {
          deleted = await store.pruneRuns(pool, deps.retentionDays, PRUNE_BATCH);
        }
        if (pruned > 0) logger.info({ pruned, retentionDays: deps.retentionDays }, 'finished flow runs past the retention deleted');
      },
    },
  });
}
