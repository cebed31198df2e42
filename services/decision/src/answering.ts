import { withTransaction, type Pool, type Queryable } from '@herald/db';
import { isApprover, type Approver } from '@herald/domain';
import { HeraldError, invalidFields } from '@herald/errors';
import type { Logger } from '@herald/logging';

import { countAnswer, countQuestion } from './metrics.js';
import * as store from './store.js';
import { reportResolution } from './webhooks.js';

/**
 * How an open question is answered or cancelled, whatever the surface (an API key, the answer
 * page, Slack, an email link, the console): who may answer is checked here, the answer and who
 * gave it are recorded with its entry in the question's record and its webhook in one
 * transaction, and waiting callers are woken.
 */

/** Longest free-text (input) answer. */
export const MAX_INPUT_ANSWER = 2_000;

/**
 * Tells every gateway replica a question changed, once the change is committed: `opened` (its
 * workspace's live streams show it), `settled` (answered or cancelled: callers waiting on it wake,
 * and the streams show it).
 */
export type WakeWaiters = (question: store.QuestionRow, change: 'opened' | 'settled') => Promise<void>;

/** Who is answering (the time is the service's). */
export type Answerer = Omit<store.AnsweredByJson, 'at'>;

const noun = (kind: store.Kind) => (kind === 'ask' ? 'question' : 'decision');

/** Why a question that is not open can take no answer, withdrawal or cancellation. */
export function notOpen(row: store.QuestionRow): HeraldError {
  const what = noun(row.kind);
  if (row.status === 'answered') {
    return new HeraldError('conflict', `This ${what} was already answered.`, { title: 'Already answered', hint: 'The first answer stands; read it with GET.' });
  }
  if (row.status === 'cancelled') {
    const verb = row.kind === 'ask' ? 'withdrawn' : 'cancelled';
    return new HeraldError('conflict', `This ${what} was ${verb}.`, { title: `Already ${verb}` });
  }
  return new HeraldError('conflict', `This ${what} expired unanswered at ${row.expires_at.toISOString()}.`, {
    title: 'Expired',
    hint: 'An expired question is never approved; open a new one if a person still has to decide.',
  });
}

/** `notOpen` as the rejection of a question that stopped being open. */
const refuseNotOpen = async (row: store.QuestionRow): Promise<never> => {
  throw notOpen(row);
};

/** The answer as stored: confirm answers are yes | no; the rest must fit the question. */
function checkAnswer(row: store.QuestionRow, answer: string): string {
  const problem = (text: string) => invalidFields('body', [{ field: 'answer', in: 'body', problem: text }]);
  if (row.type === 'confirm') {
    if (answer !== 'yes' && answer !== 'no') throw problem('must be "yes" or "no" (or true or false) for a confirm question');
  } else if (row.type === 'select') {
    if (!row.options.includes(answer)) throw problem(`must be one of the options: ${row.options.map((option) => JSON.stringify(option)).join(', ')}`);
  } else if (answer.length < 1 || answer.length > MAX_INPUT_ANSWER) {
    throw problem(`must be 1 to ${MAX_INPUT_ANSWER} characters`);
  }
  return answer;
}

/**
 * The answer already recorded, given again by whoever gave it: a retry whose first attempt's reply
 * was lost (PostgreSQL failing during the commit leaves the service unable to tell it succeeded).
 */
function repeats(row: store.QuestionRow, answer: string, by: Answerer): boolean {
  return row.status === 'answered' && row.answer === answer && row.answered_by?.kind === by.kind && row.answered_by.id === by.id;
}

/** The approver an answerer is, for the question's list: a `link` holder is nobody's. */
const asApprover = (by: Answerer): Approver | undefined => (by.kind === 'link' ? undefined : { kind: by.kind, id: by.id });

export interface Answering {
  /**
   * Records the first answer; forbidden (and recorded as refused) when `by` is not among the
   * question's approvers. The same answer from the one who gave it returns the recorded answer
   * unchanged (and wakes waiters again, in case the first wake-up went with the lost reply).
   * `alsoDo` runs in the answer's transaction once the answer is recorded (an email link is used
   * up there); what it throws undoes the answer.
   */
  answer(row: store.QuestionRow, answer: string, by: Answerer, alsoDo?: (tx: Queryable) => Promise<void>): Promise<store.QuestionRow>;
  /** Withdraws (ask) or cancels (decision) an open question. */
  cancel(row: store.QuestionRow): Promise<store.QuestionRow>;
}

export function createAnswering(pool: Pool, wakeWaiters: WakeWaiters, logger: Logger): Answering {
  /**
   * Answers or cancels an open question together with its record entry and webhook, in one
   * transaction. `change` finds nothing to update when the question stopped being open meanwhile
   * (another answer, a cancellation, the expiry): `notOpenNow` says what follows from its state.
   */
  async function resolveOpen(
    row: store.QuestionRow,
    outcome: 'answered' | 'cancelled',
    change: (db: Queryable) => Promise<store.QuestionRow | undefined>,
    actor: Answerer | null,
    notOpenNow: (current: store.QuestionRow) => Promise<store.QuestionRow>,
    alsoDo?: (tx: Queryable) => Promise<void>,
  ): Promise<store.QuestionRow> {
    const resolved = await withTransaction(pool, async (tx) => {
      const updated = await change(tx);
      if (!updated) return undefined;
      await alsoDo?.(tx);
      await store.appendEvent(tx, updated.id, outcome, { actor: actor && { ...actor }, detail: outcome === 'answered' ? { answer: updated.answer } : {} });
      await reportResolution(tx, updated, outcome);
      // Its Slack messages show the outcome now, however it was settled: due with the commit.
      await store.slackMessagesDue(tx, updated.id);
      return updated;
    });
    if (!resolved) return notOpenNow((await store.findQuestion(pool, row.id, {})) ?? row);
    logger.info({ workspaceId: resolved.workspace_id, questionId: resolved.id }, `question ${outcome}`);
    countQuestion(outcome, resolved.kind);
    if (actor) countAnswer(actor.channel, 'answered');
    await wakeWaiters(resolved, 'settled');
    return resolved;
  }

  return {
    async answer(row, answer, by, alsoDo) {
      const repeatedOrRefused = async (current: store.QuestionRow) => {
        if (!repeats(current, answer, by)) return refuseNotOpen(current);
        countAnswer(by.channel, 'repeated');
        await wakeWaiters(current, 'settled');
        return current;
      };
      if (row.status !== 'pending' || row.expired) return repeatedOrRefused(row);
      const value = checkAnswer(row, answer);
      const approver = asApprover(by);
      if (row.approvers.length > 0 && (approver === undefined || !isApprover(row.approvers, approver))) {
        await withTransaction(pool, (tx) => store.appendEvent(tx, row.id, 'refused', { actor: { ...by }, detail: { answer: value, reason: 'not an approver' } }));
        logger.info({ workspaceId: row.workspace_id, questionId: row.id, kind: by.kind, channel: by.channel }, 'an answer from someone who is not an approver was refused');
        countAnswer(by.channel, 'refused');
        throw new HeraldError('forbidden', `Only the approvers this ${noun(row.kind)} names may answer it.`, {
          title: 'Not an approver',
          hint: 'Answer through a link or message sent to one of its approvers, or with a key it names.',
        });
      }
      return resolveOpen(row, 'answered', (tx) => store.recordAnswer(tx, row.id, value, by), by, repeatedOrRefused, alsoDo);
    },
    async cancel(row) {
      if (row.status !== 'pending' || row.expired) throw notOpen(row);
      return resolveOpen(row, 'cancelled', (tx) => store.recordCancel(tx, row.id), null, refuseNotOpen);
    },
  };
}
