import { randomUUID } from 'node:crypto';

import { enqueue, topics } from '@herald/bus';
import { pageRequest, withTransaction, type Pool, type Queryable } from '@herald/db';
import { channelCounts, partnerDecisionRequired } from '@herald/domain';
import { HeraldError, invalidFields } from '@herald/errors';
import { implementService, type PromiseClient } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import type { AccountServiceClient, Principal } from '@herald/proto/herald/account/v1/account';
import type { AudienceServiceClient } from '@herald/proto/herald/audience/v1/audience';
import { DecisionServiceService, QuestionKind, type CreateQuestionRequest, type Question, type QuestionRef, type Reachability } from '@herald/proto/herald/decision/v1/decision';
import { DecisionEvent } from '@herald/proto/herald/decision/v1/events';
import { assertWebhookUrl } from '@herald/webhooks';

import type { DecisionConfig } from './config.js';
import * as store from './store.js';
import { deliveriesOf } from './deliveries.js';
import { isApproved, requestHash } from './rules.js';
import type { AnswerTokens } from './tokens.js';
import { countQuestion } from './metrics.js';
import { reportResolution } from './webhooks.js';

/** Open asks per workspace (the spec's limit); one more is refused. */
export const MAX_PENDING_ASKS = 25;
/** Longest free-text (input) answer. */
export const MAX_INPUT_ANSWER = 2_000;
/** How long a decision stays open when its caller names no lifetime (the spec's default). */
export const DEFAULT_DECISION_LIFETIME_SECONDS = 3_600;

const orNull = (value: string): string | null => (value === '' ? null : value);

const LISTED_STATUSES: ReadonlySet<string> = new Set<store.ListedStatus>(['pending', 'answered', 'cancelled', 'expired']);

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

/** The fields of a question to store, as CreateQuestion names them (OpenQuestion's, once its caller's rules are applied). */
type OpenRequest = Omit<CreateQuestionRequest, 'requestHash' | 'requireReachable'>;

/** Wakes callers waiting on a question (every gateway replica); called once its answer or cancellation is committed. */
export type WakeWaiters = (questionId: string) => Promise<void>;

/** The services a question is opened with: reachability counts the addressed person's paired devices (account) and approver browsers (audience). */
export interface Peers {
  account: PromiseClient<AccountServiceClient>;
  audience: PromiseClient<AudienceServiceClient>;
}

/** The addressed person's live channels: one end-user's (user, owner), or every approver device of the workspace (team). */
async function reachabilityOf({ account, audience }: Peers, workspaceId: string, externalId: string, team: boolean): Promise<Reachability> {
  const [devices, subscriptions] = await Promise.all([account.countDevices({ workspaceId, externalId }), audience.countSubscriptions({ workspaceId, externalId })]);
  const counts = channelCounts(devices, subscriptions);
  return team ? counts.team : counts.user;
}

/** Whom a decision addresses: a bound key only its own end-user; without an audience, that end-user (user) or the key owner (owner). */
function addressee(caller: Principal, requested: { audience: string; externalId: string }): { audience: string; externalId: string } {
  if (caller.boundExternalId && requested.externalId && requested.externalId !== caller.boundExternalId) {
    throw new HeraldError('forbidden', 'This key may only open decisions for its own end-user.', {
      title: 'Permission denied',
      hint: 'Omit externalId, or send the externalId the key was issued for.',
    });
  }
  const externalId = caller.boundExternalId || requested.externalId;
  const audience = requested.audience || (externalId ? 'user' : 'owner');
  if (!['user', 'owner', 'team'].includes(audience)) throw invalidFields('body', [{ field: 'audience', in: 'body', problem: 'must be user, owner or team' }]);
  if ((audience === 'user') !== (externalId !== '')) {
    throw invalidFields('body', [{ field: 'audience', in: 'body', problem: externalId ? 'must be user when an externalId is given' : 'user needs an externalId' }]);
  }
  return { audience, externalId: externalId || (audience === 'owner' ? caller.ownerExternalId : '') };
}

export function decisionHandlers(
  pool: Pool,
  tokens: AnswerTokens,
  config: Pick<DecisionConfig, 'askLifetimeSeconds' | 'webhooks'>,
  wakeWaiters: WakeWaiters,
  logger: Logger,
  peers: Peers,
) {
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
    keyId: row.key_id,
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

  /** What an open needs besides the question's fields. */
  interface Opening {
    siteId: string | null;
    requireReachable: boolean;
    /** Write its QuestionOpened event with it (OpenQuestion); false for the deprecated CreateQuestion, whose caller pushes. */
    opened: boolean;
  }

  /** The QuestionOpened event of a new question, enqueued in the transaction that stores it. */
  async function announce(tx: Queryable, row: store.QuestionRow): Promise<void> {
    const eventId = randomUUID();
    const event = DecisionEvent.encode({
      eventId,
      occurredAt: row.created_at.toISOString(),
      workspaceId: row.workspace_id,
      kind: { $case: 'questionOpened', value: { questionId: row.id, kind: view(row).kind, deliveries: deliveriesOf(row.mode) } },
    }).finish();
    await enqueue(tx, store.SCHEMA, [{ topic: topics.decisionEvents.name, key: row.id, payload: event, eventId }]);
  }

  /**
   * Stores a new question and, for OpenQuestion, its QuestionOpened event in the same transaction
   * (its deliveries are made from that event). An idempotent replay of a decision returns the
   * first one and writes nothing.
   */
  async function open(request: OpenRequest, { siteId, requireReachable, opened }: Opening): Promise<{ question: Question; duplicate: boolean }> {
    const kind = kindOf(request.kind);
    const question: store.NewQuestion = {
      id: `${kind === 'ask' ? 'ask' : 'dec'}_${randomUUID().replaceAll('-', '')}`,
      workspaceId: request.workspaceId,
      siteId: orNull(siteId ?? ''),
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
      requestHash: kind === 'decision' ? requestHash({ ...request, requireReachable }) : null,
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
        const inserted = await store.insertQuestion(tx, question);
        if (inserted && opened) await announce(tx, inserted);
        return inserted;
      });
      if (!row) throw new Error('ask insert returned no row');
      logger.info({ workspaceId: row.workspace_id, questionId: row.id }, 'question asked');
      countQuestion('opened', 'ask');
      return { question: view(row), duplicate: false };
    }

    if (requireReachable && !request.reachability?.reachable) {
      const replay = question.idempotencyKey === null ? undefined : await store.findByIdempotencyKey(pool, question.workspaceId, kind, question.keyId, question.idempotencyKey);
      if (!replay) {
        throw new HeraldError('conflict', 'The addressed person has no live channel (no paired app, no active browser subscription).', {
          title: 'Not reachable',
          hint: 'Ask them to connect a device (POST /enroll) or subscribe, or open the decision without requireReachable.',
        });
      }
    }
    const inserted = opened
      ? await withTransaction(pool, async (tx) => {
          const row = await store.insertQuestion(tx, question);
          if (row) await announce(tx, row);
          return row;
        })
      : await store.insertQuestion(pool, question);
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
  }

  return implementService(
    DecisionServiceService,
    {
      async openQuestion(request) {
        const caller = request.caller;
        if (!caller?.workspaceId) throw new HeraldError('invalid_request', 'caller is required');
        const kind = kindOf(request.kind);
        if (kind === 'ask' && caller.plan?.partner) throw partnerDecisionRequired();
        let reachability: Reachability | undefined;
        let asked = { audience: '', externalId: '' };
        if (kind === 'decision') {
          asked = addressee(caller, request);
          reachability = await reachabilityOf(peers, caller.workspaceId, asked.externalId || caller.ownerExternalId, asked.audience === 'team');
        }
        const lifetimeSeconds = kind === 'ask' ? 0 : request.lifetimeSeconds || DEFAULT_DECISION_LIFETIME_SECONDS;
        return open(
          { ...request, ...asked, lifetimeSeconds, workspaceId: caller.workspaceId, keyId: caller.keyId, mode: caller.approvalMode, reachability, kind: request.kind },
          { siteId: caller.siteId, requireReachable: request.requireReachable, opened: true },
        );
      },

      async createQuestion(request) {
        return open(request, { siteId: null, requireReachable: request.requireReachable, opened: false });
      },

      async getQuestion(request) {
        return { question: view(await resolve(request.ref)) };
      },

      async listQuestions({ workspaceId, kind, status, externalIdScope, limit, cursor }) {
        if (status !== '' && !LISTED_STATUSES.has(status)) throw invalidFields('querystring', [{ field: 'status', in: 'querystring', problem: `is not one of ${[...LISTED_STATUSES].join(', ')}` }]);
        const page = pageRequest(limit, cursor);
        const scope = { workspaceId, kind: kindOf(kind), externalId: orNull(externalIdScope) ?? undefined };
        const { rows, nextCursor } = page.page(await store.listQuestions(pool, scope, (status || undefined) as store.ListedStatus | undefined, page.after, page.fetch));
        return { questions: rows.map(view), nextCursor };
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
