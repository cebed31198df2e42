import { randomUUID } from 'node:crypto';

import { assertSchemaName, createWakeup, CURRENT_NAMESPACE_SQL, withTransaction, type Pool, type PoolClient } from '@herald/db';
import { HeraldError } from '@herald/errors';
import type { Logger } from '@herald/logging';

import { resolveWebhookTarget } from './address.js';
import { channelOf } from './queue.js';
import { postWebhook, trustingCa, type PostOutcome } from './send.js';
import { webhookHeaders } from './signing.js';

export interface WebhookDispatcherOptions {
  pool: Pool;
  schema: string;
  logger: Logger;
  /** Signing secrets of a workspace ("whsec_<base64>"), newest first; a message is signed with each (Standard Webhooks allows several signatures). */
  secrets(workspaceId: string): Promise<string[]>;
  allowPrivateAddresses: boolean;
  /** An extra CA certificate (PEM) to trust besides the system's, e.g. a local receiver's. */
  ca?: string;
  /** Per attempt, connection to response headers. */
  timeoutMs?: number;
  /** Attempts in all, the first included, before a message is failed. */
  maxAttempts?: number;
  /** Retry n waits a random time in [0, min(retryCapMs, retryBaseMs * 2^(n-1))] (full jitter), at least Retry-After (capped at retryCapMs). */
  retryBaseMs?: number;
  retryCapMs?: number;
  /** Messages in flight at once per dispatcher. */
  concurrency?: number;
  /** Longest sleep between looks for due messages (NOTIFY wakes it earlier). */
  pollMs?: number;
  /** How long a claimed message stays invisible to other dispatchers; must exceed timeoutMs. */
  leaseMs?: number;
  /** Delivered and failed messages (and their attempts) are deleted this long after they finished. */
  retentionMs?: number;
}

export const WEBHOOK_DEFAULTS = {
  timeoutMs: 10_000,
  maxAttempts: 8,
  retryBaseMs: 600_000,
  retryCapMs: 8 * 3_600_000,
  concurrency: 32,
  pollMs: 1_000,
  retentionMs: 30 * 86_400_000,
} as const;

interface ClaimedRow {
  id: string;
  workspace_id: string;
  url: string;
  body: string;
  attempts: number;
}

const PRUNE_EVERY_MS = 3_600_000;

/** Full jitter: a uniformly random wait up to the exponential bound (AWS architecture blog, "Exponential Backoff And Jitter"). */
function retryDelayMs(attempt: number, baseMs: number, capMs: number, retryAfterMs = 0): number {
  const bound = Math.min(capMs, baseMs * 2 ** (attempt - 1));
  return Math.max(Math.random() * bound, Math.min(retryAfterMs, capMs));
}

/**
 * Sends the committed rows of webhook_messages. Any number of dispatchers may run on one schema:
 * each claims due rows with FOR UPDATE SKIP LOCKED and moves them a lease ahead, so a message is
 * attempted by one dispatcher at a time. Woken by NOTIFY from enqueueWebhook, and polls besides.
 */
export function startWebhookDispatcher(options: WebhookDispatcherOptions): { stop(): Promise<void> } {
  const { pool, schema, logger, allowPrivateAddresses, ca } = options;
  assertSchemaName(schema);
  const timeoutMs = options.timeoutMs ?? WEBHOOK_DEFAULTS.timeoutMs;
  const maxAttempts = options.maxAttempts ?? WEBHOOK_DEFAULTS.maxAttempts;
  const retryBaseMs = options.retryBaseMs ?? WEBHOOK_DEFAULTS.retryBaseMs;
  const retryCapMs = options.retryCapMs ?? WEBHOOK_DEFAULTS.retryCapMs;
  const concurrency = options.concurrency ?? WEBHOOK_DEFAULTS.concurrency;
  const pollMs = options.pollMs ?? WEBHOOK_DEFAULTS.pollMs;
  const leaseMs = options.leaseMs ?? timeoutMs + 60_000;
  const retentionMs = options.retentionMs ?? WEBHOOK_DEFAULTS.retentionMs;
  if (leaseMs <= timeoutMs) throw new Error('leaseMs must exceed timeoutMs, or a slow attempt could be claimed twice');
  const secureContext = ca === undefined ? undefined : trustingCa(ca);

  let stopping = false;
  let stopped!: () => void;
  const whenStopped = new Promise<void>((resolve) => {
    stopped = resolve;
  });
  // Woken by NOTIFY, a finished attempt (a free slot) and stop().
  const { sleep, wake: poke } = createWakeup();

  const claim = async (limit: number, token: string): Promise<ClaimedRow[]> => {
    const { rows } = await pool.query<ClaimedRow>(
      `UPDATE ${schema}.webhook_messages
          SET attempts = attempts + 1, claim = $2, next_attempt_at = now() + $3 * interval '1 millisecond'
        WHERE id IN (SELECT id FROM ${schema}.webhook_messages
                      WHERE status = 'pending' AND namespace = ${CURRENT_NAMESPACE_SQL} AND next_attempt_at <= now()
                      ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
      RETURNING id, workspace_id, url, body, attempts`,
      [limit, token, leaseMs],
    );
    return rows;
  };

  /** Milliseconds until the next pending message is due (pollMs when none). */
  const nextDueInMs = async (): Promise<number> => {
    const { rows } = await pool.query<{ due_in: number | null }>(
      `SELECT extract(epoch FROM min(next_attempt_at) - now()) * 1000 AS due_in FROM ${schema}.webhook_messages
        WHERE status = 'pending' AND namespace = ${CURRENT_NAMESPACE_SQL}`,
    );
    const dueIn = rows[0]?.due_in;
    return dueIn === null || dueIn === undefined ? pollMs : Math.max(0, Math.min(pollMs, Number(dueIn)));
  };

  const record = async (row: ClaimedRow, token: string, startedAt: Date, outcome: PostOutcome): Promise<void> => {
    const delivered = outcome.statusCode !== undefined && outcome.statusCode >= 200 && outcome.statusCode < 300;
    const error = delivered ? null : (outcome.error ?? `HTTP ${outcome.statusCode}`);
    await withTransaction(pool, async (tx) => {
      await tx.query(
        `INSERT INTO ${schema}.webhook_attempts (message_id, attempt, attempted_at, status_code, error, duration_ms) VALUES ($1, $2, $3, $4, $5, $6)`,
        [row.id, row.attempts, startedAt, outcome.statusCode ?? null, error, Date.now() - startedAt.getTime()],
      );
      if (delivered || row.attempts >= maxAttempts) {
        await tx.query(
          `UPDATE ${schema}.webhook_messages SET status = $3, completed_at = now(), claim = NULL WHERE id = $1 AND claim = $2`,
          [row.id, token, delivered ? 'delivered' : 'failed'],
        );
      } else {
        const delay = retryDelayMs(row.attempts, retryBaseMs, retryCapMs, outcome.retryAfterMs);
        await tx.query(
          `UPDATE ${schema}.webhook_messages SET next_attempt_at = now() + $3 * interval '1 millisecond', claim = NULL WHERE id = $1 AND claim = $2`,
          [row.id, token, delay],
        );
      }
    });
    if (!delivered && row.attempts >= maxAttempts) logger.warn({ webhookId: row.id, attempts: row.attempts, error }, 'webhook failed; giving up');
  };

  /** Hands a claimed message back without counting an attempt (our side could not sign it). */
  const release = async (row: ClaimedRow, token: string): Promise<void> => {
    await pool.query(
      `UPDATE ${schema}.webhook_messages SET attempts = attempts - 1, next_attempt_at = now() + $3 * interval '1 millisecond', claim = NULL
        WHERE id = $1 AND claim = $2`,
      [row.id, token, Math.min(retryBaseMs, 30_000)],
    );
  };

  const attempt = async (row: ClaimedRow, token: string): Promise<void> => {
    if (row.attempts > maxAttempts) {
      // Its last attempt was claimed by a dispatcher that died before recording it.
      await record(row, token, new Date(), { error: 'dispatcher stopped during the last attempt' });
      return;
    }
    let secrets: string[];
    try {
      secrets = await options.secrets(row.workspace_id);
      if (secrets.length === 0) throw new Error('no signing secret');
    } catch (err) {
      logger.warn({ err, webhookId: row.id }, 'webhook signing secrets unavailable; retrying later');
      await release(row, token);
      return;
    }
    const startedAt = new Date();
    let outcome: PostOutcome;
    try {
      // Checked again at send time: DNS may have changed since the URL was accepted.
      const target = await resolveWebhookTarget(row.url, 'url', { allowPrivateAddresses });
      outcome = await postWebhook(target, row.body, webhookHeaders(row.id, row.body, secrets, startedAt), { timeoutMs, secureContext });
    } catch (err) {
      outcome = { error: err instanceof HeraldError ? `refused: ${err.message}` : err instanceof Error ? err.message : String(err) };
    }
    await record(row, token, startedAt, outcome);
  };

  const prune = async (): Promise<void> => {
    await pool.query(
      `DELETE FROM ${schema}.webhook_messages WHERE status <> 'pending' AND completed_at < now() - $1 * interval '1 millisecond' AND namespace = ${CURRENT_NAMESPACE_SQL}`,
      [retentionMs],
    );
  };

  const inFlight = new Set<Promise<void>>();
  const run = async (): Promise<void> => {
    let failures = 0;
    let prunedAt = 0;
    while (!stopping) {
      try {
        const free = concurrency - inFlight.size;
        let claimed: ClaimedRow[] = [];
        if (free > 0) {
          const token = randomUUID();
          claimed = await claim(free, token);
          for (const row of claimed) {
            const running: Promise<void> = attempt(row, token)
              .catch((err: unknown) => logger.error({ err, webhookId: row.id }, 'webhook attempt could not be recorded'))
              .finally(() => {
                inFlight.delete(running);
                poke();
              });
            inFlight.add(running);
          }
        }
        if (Date.now() - prunedAt > PRUNE_EVERY_MS) {
          await prune();
          prunedAt = Date.now();
        }
        failures = 0;
        if (free > 0 && claimed.length === free) continue;
        await sleep(free > 0 ? await nextDueInMs() : pollMs);
      } catch (err) {
        failures += 1;
        logger.warn({ err, schema }, 'webhook dispatcher failed; retrying');
        await sleep(Math.min(10_000, 100 * 2 ** failures));
      }
    }
    await Promise.all(inFlight);
  };

  /** Holds one connection LISTENing for enqueueWebhook's NOTIFY, reconnecting when it breaks. */
  const listen = async (): Promise<void> => {
    while (!stopping) {
      let client: PoolClient | undefined;
      let failure: Error | undefined;
      try {
        client = await pool.connect();
        const lost = new Promise<void>((resolve) => {
          client?.on('error', (err) => {
            failure = err;
            resolve();
          });
        });
        client.on('notification', poke);
        await client.query(`LISTEN ${channelOf(schema)}`);
        // Anything committed while no one listened is due now.
        poke();
        await Promise.race([lost, whenStopped]);
        if (!failure) await client.query(`UNLISTEN ${channelOf(schema)}`);
      } catch (err) {
        failure = err as Error;
      }
      client?.removeAllListeners('notification');
      client?.removeAllListeners('error');
      // A broken connection must not go back to the pool.
      client?.release(failure);
      if (failure && !stopping) {
        logger.warn({ err: failure, schema }, 'webhook dispatcher lost its LISTEN connection; reconnecting');
        await Promise.race([new Promise((resolve) => setTimeout(resolve, 1_000)), whenStopped]);
      }
    }
  };

  const running = Promise.all([run(), listen()]);
  return {
    async stop() {
      stopping = true;
      stopped();
      poke();
      await running;
    },
  };
}
