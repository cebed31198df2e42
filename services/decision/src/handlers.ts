import { randomUUID } from 'node:crypto';

import { withTransaction, type Pool, type Queryable } from '@herald/db';
import { HeraldError, invalidFields } from '@herald/errors';
import { implementService } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import { assertWebhookUrl } from '@herald/webhooks';
import { DecisionServiceService, QuestionKind, type Question, type QuestionRef } from '@herald/proto/herald/decision/v1/decision';

import type { DecisionConfig } from './config.js';
import * as store from './store.js';
import { isApproved, requestHash } from './rules.js';
import type { AnswerTokens } from './tokens.js';
import { countQuestion } from './metrics.js';
import { reportResolution } from './webhooks.js';

/** Open asks per workspace (the spec's limit); one more is refused. */
export const MAX_PENDING_ASKS = 25;
/** Longest free-text (input) answer. */
export const MAX_INPUT_ANSWER = 2_000;

const orNull = (value: string): string | null => (value === '' ? null : value);

function kindOf(kind: QuestionKind): store.Kind {
  if (kind === QuestionKind.QUESTION_KIND_ASK) return 'ask';
  if (kind === QuestionKind.QUESTION_KIND_DECISION) return 'decision';
  throw new HeraldError('invalid_request', 'kind is required');
}

const noun = (kind: store.Kind) => (kind === 'ask' ? 'question' : 'decision');

/** Why a question that is not open can take no answer, withdrawal or cancellation. */
function notOpen(row: store.QuestionRow): HeraldError {
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

/** Wakes callers waiting on a question (every gateway replica); called once its answer or cancellation is committed. */
export type WakeWaiters = (questionId: string) => Promise<void>;

export function decisionHandlers(pool: Pool, tokens: AnswerTokens, config: Pick<DecisionConfig, 'askLifetimeSeconds' | 'webhooks'>, wakeWaiters: WakeWaiters, logger: Logger) {
  const view = (row: store.QuestionRow): Question => ({
    id: row.id,
    workspaceId: row.workspace_id,
    kind: row.kind === 'ask' ? QuestionKind.QUESTION_KIND_ASK : QuestionKind.QUESTION_KIND_DECISION,
    type: row.type,
    question: row.question,
    options: row.options,
    context: row.context ?? '',
    placeholder: row.placeholder ?? '',
    agentName: row.agent_name ?? '',
    mode: row.mode,
    audience: row.audience ?? '',
    externalId: row.external_id ?? '',
    toolName: row.tool_name ?? '',
    toolTarget: row.tool_target ?? '',
    parametersJson: row.parameters === null ? '' : JSON.stringify(row.parameters),
    reachability: row.reachability ?? undefined,
    status: row.expired ? 'expired' : row.status,
    answer: row.answer ?? '',
    answerToken: tokens.sign(row.id),
    expiresInSeconds: row.expires_in_seconds,
    expiresAt: row.expires_at.toISOString(),
    createdAt: row.created_at.toISOString(),
    answeredAt: row.answered_at?.toISOString() ?? '',
    cancelledAt: row.cancelled_at?.toISOString() ?? '',
    idempotencyKey: row.idempotency_key ?? '',
    callbackUrl: row.callback_url ?? '',
    approved: isApproved(row),
  });

  /** The question a reference names; a foreign, unknown or forged one is 404 alike. */
  async function resolve(ref: QuestionRef | undefined): Promise<store.QuestionRow> {
    let row: store.QuestionRow | undefined;
    if (ref?.by?.$case === 'owned') {
      const { workspaceId, kind, id, externalIdScope } = ref.by.value;
      if (!workspaceId) throw new HeraldError('invalid_request', 'workspace_id is required');
      row = await store.findQuestion(pool, id, { workspaceId, kind: kindOf(kind), externalId: orNull(externalIdScope) ?? undefined });
    } else if (ref?.by?.$case === 'token') {
      const id = tokens.verify(ref.by.value);
      row = id === undefined ? undefined : await store.findQuestion(pool, id, {});
    } else {
      throw new HeraldError('invalid_request', 'ref is required');
    }
    if (!row) throw new HeraldError('not_found', 'No such question.', { title: 'Not found' });
    return row;
  }

  /**
   * Answers or cancels an open question together with its webhook, in one transaction. `change`
   * finds nothing to update when the question stopped being open meanwhile (another answer, a
   * cancellation, the expiry): that is a conflict.
   */
  async function resolveOpen(
    row: store.QuestionRow,
    outcome: 'answered' | 'cancelled',
    change: (db: Queryable) => Promise<store.QuestionRow | undefined>,
  ): Promise<store.QuestionRow> {
    // Without a callback the change is one statement: no transaction (two round trips fewer on the
    // path a waiting caller is woken by). The callback URL is fixed when the question is created.
    const resolved =
      row.callback_url === null
        ? await change(pool)
        : await withTransaction(pool, async (tx) => {
            const updated = await change(tx);
            if (updated) await reportResolution(tx, updated, outcome);
            return updated;
          });
    if (!resolved) throw notOpen((await store.findQuestion(pool, row.id, {})) ?? row);
    logger.info({ workspaceId: resolved.workspace_id, questionId: resolved.id }, `question ${outcome}`);
    countQuestion(outcome, resolved.kind);
    await wakeWaiters(resolved.id);
    return resolved;
  }

  return implementService(
    DecisionServiceService,
    {
      async createQuestion(request) {
        const kind = kindOf(request.kind);
        const question: store.NewQuestion = {
          id: `${kind === 'ask' ? 'ask' : 'dec'}_${randomUUID().replaceAll('-', '')}`,
          workspaceId: request.workspaceId,
          kind,
          keyId: request.keyId,
          type: request.type,
          question: request.question,
          options: request.options,
          context: orNull(request.context),
          placeholder: orNull(request.placeholder),
          agentName: orNull(request.agentName),
          mode: request.mode,
          audience: orNull(request.audience),
          externalId: orNull(request.externalId),
          toolName: orNull(request.toolName),
          toolTarget: orNull(request.toolTarget),
          parameters: request.parametersJson === '' ? null : (JSON.parse(request.parametersJson) as Record<string, unknown>),
          reachability: request.reachability ?? null,
          target: kind === 'ask' ? { subscriberIds: request.subscriberIds, externalIds: request.externalIds, tags: request.tags } : null,
          callbackUrl: orNull(request.callbackUrl),
          idempotencyKey: orNull(request.idempotencyKey),
          requestHash: kind === 'decision' ? requestHash(request) : null,
          lifetimeSeconds: kind === 'ask' ? config.askLifetimeSeconds : request.lifetimeSeconds,
        };
        if (!question.workspaceId || !question.question || question.lifetimeSeconds < 1) {
          throw new HeraldError('invalid_request', 'workspace_id, question and lifetime_seconds are required');
        }
        if (question.callbackUrl !== null) {
          await assertWebhookUrl(question.callbackUrl, 'callbackUrl', config.webhooks);
        }

        if (kind === 'ask') {
          const row = await withTransaction(pool, async (tx) => {
            await store.lockWorkspaceAsks(tx, question.workspaceId);
            if ((await store.countPendingAsks(tx, question.workspaceId)) >= MAX_PENDING_ASKS) {
              throw new HeraldError('rate_limited', `This workspace already has ${MAX_PENDING_ASKS} pending questions; answer, withdraw or let some expire first.`);
            }
            return store.insertQuestion(tx, question);
          });
          if (!row) throw new Error('ask insert returned no row');
          logger.info({ workspaceId: row.workspace_id, questionId: row.id }, 'question asked');
          countQuestion('opened', 'ask');
          return { question: view(row), duplicate: false };
        }

        if (request.requireReachable && !request.reachability?.reachable) {
          const replay = question.idempotencyKey === null ? undefined : await store.findByIdempotencyKey(pool, question.workspaceId, kind, question.keyId, question.idempotencyKey);
          if (!replay) {
            throw new HeraldError('conflict', 'The addressed person has no live channel (no paired app, no active browser subscription).', {
              title: 'Not reachable',
              hint: 'Ask them to connect a device (POST /enroll) or subscribe, or open the decision without requireReachable.',
            });
          }
        }
        const inserted = await store.insertQuestion(pool, question);
        if (inserted) {
          logger.info({ workspaceId: inserted.workspace_id, decisionId: inserted.id }, 'decision opened');
          countQuestion('opened', 'decision');
          return { question: view(inserted), duplicate: false };
        }
        // The idempotency key was used before: the same request gets the first decision back.
        const first = await store.findByIdempotencyKey(pool, question.workspaceId, kind, question.keyId, question.idempotencyKey ?? '');
        if (!first) throw new Error('idempotency conflict without a row');
        if (first.request_hash !== question.requestHash) {
          throw new HeraldError('conflict', 'This idempotency key was already used for a different decision.', {
            title: 'Idempotency key reused',
            hint: 'Use a new idempotency key for a different request; replay only the exact same body.',
          });
        }
        return { question: view(first), duplicate: true };
      },

      async getQuestion(request) {
        return { question: view(await resolve(request.ref)) };
      },

      async answerQuestion(request) {
        const row = await resolve(request.ref);
        if (row.status !== 'pending' || row.expired) throw notOpen(row);
        const answer = checkAnswer(row, request.answer);
        return { question: view(await resolveOpen(row, 'answered', (tx) => store.recordAnswer(tx, row.id, answer))) };
      },

      async cancelQuestion(request) {
        const row = await resolve(request.ref);
        if (row.status !== 'pending' || row.expired) throw notOpen(row);
        return { question: view(await resolveOpen(row, 'cancelled', (tx) => store.recordCancel(tx, row.id))) };
      },
    },
    logger,
  );
}
