import type { PoolClient } from '@herald/db';
import { askStatusOf } from '@herald/domain';
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
