import { withTransaction, type Pool } from '@herald/db';
import type { Logger } from '@herald/logging';
import { startWorkLoop, type WorkLoop } from '@herald/workloop';

import type { QuestionDelivery } from '@herald/proto/herald/decision/v1/events';

import { deliveriesOf, workspaceChannelsFor, type WorkspaceChannels } from './deliveries.js';
import * as store from './store.js';

/**
 * A question's escalation: `escalation: [{afterSeconds, channels, approvers}]`. Its steps are
 * recorded (question_escalations) with its deliveries when its QuestionOpened event is consumed,
 * each due afterSeconds after the question was opened, and fired by this loop (the shared work
 * loop), each once: in one transaction, while its claim holds, a step whose question is still open
 * records that step's deliveries (keyed (question, channel, target) like every delivery, so a
 * target already delivered to is not delivered again), appends an `escalated` entry to the
 * question's record and marks itself fired. A step of a question answered, cancelled or expired
 * by then is skipped; a step is never due after its question's expiry (see insertEscalations), so
 * escalation never extends a question's lifetime.
 */

/** How long a claimed step is held: its work is one short transaction. */
const LEASE_MS = 30_000;

/**
 * Where a step delivers: each of its approvers on their channel (none: the question's own
 * default deliveries), narrowed to the step's channels when it names any.
 */
export function stepDeliveries(question: store.QuestionRow, step: store.EscalationStepJson, workspace: WorkspaceChannels): QuestionDelivery[] {
  const all = deliveriesOf({ mode: question.mode, approvers: step.approvers }, workspace);
  return step.channels.length === 0 ? all : all.filter((delivery) => step.channels.includes(delivery.channel));
}

export interface EscalationDeps {
  pool: Pool;
  logger: Logger;
  pollMs: number;
}

export function startEscalations({ pool, logger, pollMs }: EscalationDeps): WorkLoop {
  async function fire(row: store.ClaimedEscalation, token: string): Promise<void> {
    const fired = await withTransaction(pool, async (tx) => {
      const question = await store.lockQuestion(tx, row.question_id);
      const step = question?.escalation[row.step];
      const closed = !question || !step ? 'gone' : question.expired ? 'expired' : question.status === 'pending' ? undefined : question.status;
      if (closed !== undefined || !step) {
        await store.finishEscalation(tx, row, token, 'skipped', `the question is ${closed ?? 'gone'}`);
        return undefined;
      }
      if (!(await store.finishEscalation(tx, row, token, 'fired', null))) return undefined;
      // A question that names its approvers now also takes the answer of the step's.
      await store.addApprovers(tx, question.id, step.approvers);
      const workspace = await workspaceChannelsFor(tx, question.workspace_id, step.approvers);
      const deliveries = await store.insertDeliveries(tx, question.id, stepDeliveries(question, step, workspace));
      await store.appendEvent(tx, question.id, 'escalated', {
        detail: { step: row.step, afterSeconds: step.afterSeconds, channels: step.channels, approvers: step.approvers, deliveries },
      });
      return deliveries;
    });
    if (fired) logger.info({ questionId: row.question_id, step: row.step, deliveries: fired.length }, 'question escalated');
  }

  return startWorkLoop<store.ClaimedEscalation>({
    name: 'question escalations',
    pool,
    logger,
    table: store.DUE_ESCALATIONS,
    channel: store.ESCALATIONS_CHANNEL,
    leaseMs: LEASE_MS,
    batchSize: 1,
    concurrency: 8,
    pollMs,
    async work([row], token) {
      if (row) await fire(row, token);
    },
  });
}
