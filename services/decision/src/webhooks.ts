import { withTransaction, type Pool, type PoolClient } from '@herald/db';
import { askStatusOf } from '@herald/domain';
import type { Logger } from '@herald/logging';
import { startWorkLoop, type WorkLoop } from '@herald/workloop';
import { enqueueWebhook } from '@herald/webhooks';

import { isApproved } from './rules.js';
import * as store from './store.js';

/** Who answered (null unless answered, and for answers recorded before answeredBy existed). */
const answeredByOf = (row: store.QuestionRow, outcome: 'answered' | 'cancelled' | 'expired') => (outcome === 'answered' ? row.answered_by : null);

/**
 * The callbackUrl webhook of a question, enqueued in the transaction that resolves it: sent only
 * if the answer, withdrawal, cancellation or expiry commits, and then at least once.
 *
 * Types: ask.answered, ask.withdrawn, ask.expired; decision.answered, decision.cancelled,
 * decision.expired.
 */
function event(row: store.QuestionRow, outcome: 'answered' | 'cancelled' | 'expired') {
  if (row.kind === 'ask') {
    const status = askStatusOf(outcome);
    return {
      type: `ask.${outcome === 'cancelled' ? 'withdrawn' : outcome}`,
      data: {
        correlationId: row.id,
        question: row.question,
        type: row.type,
        status,
        answered: outcome === 'answered',
        ...(outcome === 'answered' ? { value: row.answer } : {}),
        answeredBy: answeredByOf(row, outcome),
      },
    };
  }
  return {
    type: `decision.${outcome}`,
    data: {
      decisionId: row.id,
      question: row.question,
      type: row.type,
      status: outcome,
      approved: isApproved(row),
      answer: outcome === 'answered' ? row.answer : null,
      externalId: row.external_id,
      toolName: row.tool_name,
      idempotencyKey: row.idempotency_key,
      answeredBy: answeredByOf(row, outcome),
    },
  };
}

export async function reportResolution(tx: PoolClient, row: store.QuestionRow, outcome: 'answered' | 'cancelled' | 'expired'): Promise<void> {
  if (row.callback_url === null) return;
  await enqueueWebhook(tx, store.SCHEMA, { workspaceId: row.workspace_id, url: row.callback_url, ...event(row, outcome) });
}

/**
 * Expiry is computed on read, so nothing changes when a question expires; this loop reports it
 * to the question's callbackUrl, once: it wakes when the next question expires (or after
 * `pollMs`), leases what expired, and marks each reported in the transaction that enqueues its
 * webhook.
 */
export function startExpiryReports(pool: Pool, pollMs: number, logger: Logger): WorkLoop {
  return startWorkLoop<{ id: string }>({
    name: 'expiry reports',
    pool,
    logger,
    table: store.UNREPORTED_EXPIRIES,
    leaseMs: 30_000,
    batchSize: 100,
    concurrency: 100,
    pollMs,
    work: (rows, token) =>
      withTransaction(pool, async (tx) => {
        const expired = await store.markExpiriesReported(tx, rows.map((row) => row.id), token);
        for (const row of expired) await reportResolution(tx, row, 'expired');
      }),
  });
}
