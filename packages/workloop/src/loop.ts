import { randomUUID } from 'node:crypto';

import { backoffMs, type BackoffOptions } from '@herald/backoff';
import { createWakeup, type Pool } from '@herald/db';
import type { Logger } from '@herald/logging';

import { claimStatement, dueCountStatement, LAPSED_COLUMN, LATENESS_COLUMN, nextClaimableInMs, pickedKeyColumn, type WorkTable } from './claims.js';
import { observeBacklog, workLoopMetrics } from './metrics.js';
import { listenForWakeups } from './listen.js';

/** Between two tries to claim while the database fails: up to 0.2 s, 0.4 s, ... 10 s (full jitter). */
const CLAIM_BACKOFF: BackoffOptions = { baseMs: 200, capMs: 10_000 };

export interface WorkLoopOptions<Row> {
  /** Names the loop in logs. */
  name: string;
  pool: Pool;
  logger: Logger;
  table: WorkTable;
  /**
   * Works a claimed batch: does its I/O, then records each row's outcome (done: delete it or mark
   * it; again: set its due time) with `... RELEASED WHERE <key> AND claim = token`. What it leaves
   * claimed (it threw, or the process died) is claimed again when the lease ends.
   */
  work(rows: Row[], token: string): Promise<void>;
  /** How long a claim holds: longer than the work of one batch can take. */
  leaseMs: number;
  /** Rows in work at once in this process. Default 32. */
  concurrency?: number;
  /** Rows per claim (and per `work` call). Default 1. */
  batchSize?: number;
  /** Longest sleep between looks for due rows. Default 1 s. */
  pollMs?: number;
  /** A NOTIFY channel writers signal at commit (NOTIFY in their transaction): a row due now is worked at once, not at the next poll. */
  channel?: string;
  /** Housekeeping run between claims, at most once per `everyMs` (e.g. deleting old finished rows). */
  housekeeping?: { everyMs: number; run(): Promise<void> };
}

export interface WorkLoop {
  /** Looks for due rows now (e.g. after this process scheduled one). */
  wake(): void;
  /** Stops claiming and waits for the work in hand. */
  stop(): Promise<void>;
}

/**
 * Claims due rows of one table and works them, on any number of processes at once: each row is
 * worked by one of them at a time, a crashed worker's rows come back after their lease, and an
 * idle loop sleeps until the next row is due, a NOTIFY, a free slot or the poll, whichever is first.
 */
export function startWorkLoop<Row>(options: WorkLoopOptions<Row>): WorkLoop {
  const { name, pool, logger, table, leaseMs } = options;
  const concurrency = options.concurrency ?? 32;
  const batchSize = options.batchSize ?? 1;
  const pollMs = options.pollMs ?? 1_000;
  const claimSql = claimStatement(table);
  let stopping = false;
  let stopped!: () => void;
  const whenStopped = new Promise<void>((resolve) => (stopped = resolve));
  const { sleep, wake } = createWakeup();
  const inFlight = new Set<Promise<void>>();
  let rowsInFlight = 0;

  const dispatch = (rows: Row[], token: string): void => {
    rowsInFlight += rows.length;
    const running: Promise<void> = options
      .work(rows, token)
      .catch((err: unknown) => logger.error({ err, loop: name, rows: rows.length }, 'work failed; the rows are retried after their lease'))
      .finally(() => {
        rowsInFlight -= rows.length;
        inFlight.delete(running);
        wake();
      });
    inFlight.add(running);
  };

  const run = async (): Promise<void> => {
    let failures = 0;
    let housekeptAt = 0;
    while (!stopping) {
      try {
        let claimedAll = false;
        const free = concurrency - rowsInFlight;
        if (free > 0) {
          // Several claims while there is room: a backlog fills every slot without waiting for a wake-up.
          for (let room = free; room > 0 && !stopping; ) {
            const limit = Math.min(batchSize, room);
            const token = randomUUID();
            const { rows } = await pool.query<Record<string, unknown>>(claimSql, [token, leaseMs, limit]);
            for (const row of rows) {
              workLoopMetrics.lateness.record(Math.max(0, Number(row[LATENESS_COLUMN])), { loop: name });
              if (row[LAPSED_COLUMN] === true) workLoopMetrics.claimsLost.add(1, { loop: name });
              for (const column of [LATENESS_COLUMN, LAPSED_COLUMN, ...table.key.map((_, index) => pickedKeyColumn(index))]) delete row[column];
            }
            if (rows.length > 0) dispatch(rows as Row[], token);
            room -= rows.length;
            claimedAll = rows.length === limit;
            if (!claimedAll) break;
          }
        }
        if (options.housekeeping && Date.now() - housekeptAt > options.housekeeping.everyMs) {
          await options.housekeeping.run();
          housekeptAt = Date.now();
        }
        if (failures > 0) logger.info({ loop: name }, 'work loop running again');
        failures = 0;
        if (claimedAll && concurrency - rowsInFlight > 0) continue;
        if (concurrency - rowsInFlight <= 0) await sleep(pollMs);
        // At least a few ms: a due row another replica has just locked must not make this one spin.
        else await sleep(Math.max(5, Math.min(pollMs, (await nextClaimableInMs(pool, table)) ?? pollMs)));
      } catch (err) {
        if (failures === 0) logger.warn({ err, loop: name }, 'work loop cannot claim; retrying with backoff');
        failures += 1;
        await sleep(backoffMs(failures, CLAIM_BACKOFF));
      }
    }
    await Promise.all(inFlight);
  };

  const running = Promise.all([run(), options.channel ? listenForWakeups(pool, options.channel, wake, logger, whenStopped) : Promise.resolve()]);
  const unobserve = observeBacklog(name, pool, dueCountStatement(table));
  return {
    wake,
    async stop() {
      stopping = true;
      unobserve();
      stopped();
      wake();
      await running;
    },
  };
}
