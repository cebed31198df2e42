import { backoffMs, type BackoffOptions } from '@herald/backoff';
import { assertSchemaName, CURRENT_NAMESPACE_SQL, withTransaction, type Pool } from '@herald/db';
import type { Logger } from '@herald/logging';
import { RELEASED, retryWhileUnreachable, startWorkLoop } from '@herald/workloop';

import { resolveWebhookTarget, WebhookUrlRefused } from './address.js';
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
  /** WEBHOOK_DNS_SERVERS: resolve webhook hosts with these DNS servers only (see AddressOptions). */
  dnsServers?: readonly string[];
  /** An extra CA certificate (PEM) to trust besides the system's, e.g. a local receiver's. */
  ca?: string;
  /** Per attempt, connection to response headers. */
  timeoutMs?: number;
  /** Attempts in all, the first included, before a message is failed. */
  maxAttempts?: number;
  /**
   * Retry n waits @herald/backoff's backoff with equal jitter: between half of and all of
   * min(retryCapMs, retryBaseMs * 2^(n-1)), at least Retry-After (capped at retryCapMs). The
   * attempts are counted, so they must span a real stretch of time (at least half the schedule).
   */
  retryBaseMs?: number;
  retryCapMs?: number;
  /** Messages in flight at once per dispatcher. */
  concurrency?: number;
  /** Longest sleep between looks for due messages (NOTIFY wakes it earlier). */
  pollMs?: number;
  /** How long a claimed message stays invisible to other dispatchers (the lease); must exceed timeoutMs. */
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

/**
 * Sends the committed rows of webhook_messages, on @herald/workloop: any number of dispatchers may
 * run on one schema, each message is attempted by one of them at a time (a leased claim, each
 * claim counting an attempt), and a dispatcher that dies mid-attempt leaves the message to another
 * one after the lease. Woken by NOTIFY from enqueueWebhook, and polls besides.
 */
export function startWebhookDispatcher(options: WebhookDispatcherOptions): { stop(): Promise<void> } {
  const { pool, schema, logger, allowPrivateAddresses, dnsServers, ca } = options;
  assertSchemaName(schema);
  const timeoutMs = options.timeoutMs ?? WEBHOOK_DEFAULTS.timeoutMs;
  const maxAttempts = options.maxAttempts ?? WEBHOOK_DEFAULTS.maxAttempts;
  const backoff: BackoffOptions = { baseMs: options.retryBaseMs ?? WEBHOOK_DEFAULTS.retryBaseMs, capMs: options.retryCapMs ?? WEBHOOK_DEFAULTS.retryCapMs, jitter: 'equal' };
  const leaseMs = options.leaseMs ?? timeoutMs + 60_000;
  const retentionMs = options.retentionMs ?? WEBHOOK_DEFAULTS.retentionMs;
  if (leaseMs <= timeoutMs) throw new Error('leaseMs must exceed timeoutMs, or a slow attempt could be claimed twice');
  const secureContext = ca === undefined ? undefined : trustingCa(ca);

  const record = async (row: ClaimedRow, token: string, startedAt: Date, outcome: PostOutcome): Promise<void> => {
    const delivered = outcome.statusCode !== undefined && outcome.statusCode >= 200 && outcome.statusCode < 300;
    const error = delivered ? null : (outcome.error ?? `HTTP ${outcome.statusCode}`);
    await withTransaction(pool, async (tx) => {
      await tx.query(
        `INSERT INTO ${schema}.webhook_attempts (message_id, attempt, attempted_at, status_code, error, duration_ms) VALUES ($1, $2, $3, $4, $5, $6)`,
        [row.id, row.attempts, startedAt, outcome.statusCode ?? null, error, Date.now() - startedAt.getTime()],
      );
      if (delivered || row.attempts >= maxAttempts) {
        await tx.query(`UPDATE ${schema}.webhook_messages SET status = $3, completed_at = now(), ${RELEASED} WHERE id = $1 AND claim = $2`, [
          row.id,
          token,
          delivered ? 'delivered' : 'failed',
        ]);
      } else {
        const delay = backoffMs(row.attempts, backoff, outcome.retryAfterMs);
        await tx.query(`UPDATE ${schema}.webhook_messages SET next_attempt_at = now() + $3 * interval '1 millisecond', ${RELEASED} WHERE id = $1 AND claim = $2`, [
          row.id,
          token,
          delay,
        ]);
      }
    });
    if (!delivered && row.attempts >= maxAttempts) logger.warn({ webhookId: row.id, attempts: row.attempts, error }, 'webhook failed; giving up');
  };

  /** Hands a claimed message back without counting an attempt (our side could not sign it). */
  const release = async (row: ClaimedRow, token: string): Promise<void> => {
    await pool.query(
      `UPDATE ${schema}.webhook_messages SET attempts = attempts - 1, next_attempt_at = now() + $3 * interval '1 millisecond', ${RELEASED}
        WHERE id = $1 AND claim = $2`,
      [row.id, token, Math.min(backoff.baseMs, 30_000)],
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
      const target = await resolveWebhookTarget(row.url, 'url', { allowPrivateAddresses, dnsServers });
      outcome = await postWebhook(target, row.body, webhookHeaders(row.id, row.body, secrets, startedAt), { timeoutMs, secureContext });
    } catch (err) {
      outcome = { error: err instanceof WebhookUrlRefused ? `refused: ${err.reason}` : err instanceof Error ? err.message : String(err) };
    }
    // Posted: a database restart now must delay the record, not cause a second post.
    await retryWhileUnreachable(() => record(row, token, startedAt, outcome), leaseMs);
  };

  return startWorkLoop<ClaimedRow>({
    name: `${schema} webhooks`,
    pool,
    logger,
    table: {
      table: `${schema}.webhook_messages`,
      key: ['id'],
      due: 'next_attempt_at',
      waiting: "status = 'pending'",
      returning: 'id, workspace_id, url, body, attempts',
      onClaim: 'attempts = attempts + 1',
    },
    leaseMs,
    concurrency: options.concurrency ?? WEBHOOK_DEFAULTS.concurrency,
    pollMs: options.pollMs ?? WEBHOOK_DEFAULTS.pollMs,
    channel: channelOf(schema),
    work: async (rows, token) => {
      await Promise.all(rows.map((row) => attempt(row, token).catch((err: unknown) => logger.error({ err, webhookId: row.id }, 'webhook attempt could not be recorded'))));
    },
    housekeeping: {
      everyMs: PRUNE_EVERY_MS,
      // Delivered and failed messages (and their attempts) go after the retention period.
      run: async () => {
        await pool.query(
          `DELETE FROM ${schema}.webhook_messages WHERE status <> 'pending' AND completed_at < now() - $1 * interval '1 millisecond' AND namespace = ${CURRENT_NAMESPACE_SQL}`,
          [retentionMs],
        );
      },
    },
  });
}
