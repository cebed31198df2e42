import { randomUUID } from 'node:crypto';

import { enqueue, topics } from '@herald/bus';
import { pageRequest, withTransaction, type Pool, type Queryable } from '@herald/db';
import { APPROVER_KINDS, channelCounts, DELIVERY_CHANNELS, MAX_APPROVER_ID_LENGTH, MAX_APPROVERS, MAX_ESCALATION_STEPS, normalizedApprover, partnerDecisionRequired, type Approver } from '@herald/domain';
import { HeraldError, invalidFields } from '@herald/errors';
import { implementService, type PromiseClient } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import type { AccountServiceClient, Principal } from '@herald/proto/herald/account/v1/account';
import type { AudienceServiceClient } from '@herald/proto/herald/audience/v1/audience';
import {
  DecisionServiceService,
  QuestionKind,
  type CreateQuestionRequest,
  type EscalationStep,
  type Question,
  type QuestionRef,
  type Reachability,
} from '@herald/proto/herald/decision/v1/decision';
import { DecisionEvent } from '@herald/proto/herald/decision/v1/events';
import { assertWebhookUrl } from '@herald/webhooks';

import type { Answerer, Answering, WakeWaiters } from './answering.js';
import type { DecisionConfig } from './config.js';
import * as store from './store.js';
import { deliveriesOf, workspaceChannelsFor } from './deliveries.js';
import { isApproved, requestHash } from './rules.js';
import type { AnswerTokens, VerifiedToken } from './tokens.js';
import { countQuestion } from './metrics.js';

/** Open asks per workspace (the spec's limit); one more is refused. */
export const MAX_PENDING_ASKS = 25;
/** How long a decision stays open when its caller names no lifetime (the spec's default). */
export const DEFAULT_DECISION_LIFETIME_SECONDS = 3_600;

const orNull = (value: string): string | null => (value === '' ? null : value);

const LISTED_STATUSES: ReadonlySet<string> = new Set<store.ListedStatus>(['pending', 'answered', 'cancelled', 'expired']);

function kindOf(kind: QuestionKind): store.Kind {
  if (kind === QuestionKind.QUESTION_KIND_ASK) return 'ask';
  if (kind === QuestionKind.QUESTION_KIND_DECISION) return 'decision';
  throw new HeraldError('invalid_request', 'kind is required');
}

/** A question's approvers, checked and normalized (email addresses lower-cased, duplicates dropped). */
function checkApprovers(approvers: Approver[], field: string): Approver[] {
  const problem = (text: string) => invalidFields('body', [{ field, in: 'body', problem: text }]);
  if (approvers.length > MAX_APPROVERS) throw problem(`must name at most ${MAX_APPROVERS} approvers`);
  const kept = new Map<string, Approver>();
  for (const approver of approvers) {
    if (!(APPROVER_KINDS as readonly string[]).includes(approver.kind)) throw problem(`kind must be one of ${APPROVER_KINDS.join(', ')}`);
    const normalized = normalizedApprover(approver);
    if (normalized.id.length < 1 || normalized.id.length > MAX_APPROVER_ID_LENGTH) throw problem(`id must be 1 to ${MAX_APPROVER_ID_LENGTH} characters`);
    if (normalized.kind === 'email' && !/^[^\s@]+@[^\s@]+$/.test(normalized.id)) throw problem(`${JSON.stringify(normalized.id)} is not an email address`);
    kept.set(`${normalized.kind}:${normalized.id}`, normalized);
  }
  return [...kept.values()];
}

/** Escalation steps, checked: at most MAX_ESCALATION_STEPS, each later than the one before, each delivering somewhere. */
function checkEscalation(steps: EscalationStep[]): store.EscalationStepJson[] {
  const problem = (index: number, text: string) => invalidFields('body', [{ field: `escalation[${index}]`, in: 'body', problem: text }]);
  if (steps.length > MAX_ESCALATION_STEPS) throw invalidFields('body', [{ field: 'escalation', in: 'body', problem: `must have at most ${MAX_ESCALATION_STEPS} steps` }]);
  let previous = 0;
  return steps.map((step, index) => {
    if (step.afterSeconds <= previous) throw problem(index, index === 0 ? 'afterSeconds must be at least 1' : 'afterSeconds must be later than the step before');
    previous = step.afterSeconds;
    const channels = [...new Set(step.channels)];
    const unknown = channels.find((channel) => !(DELIVERY_CHANNELS as readonly string[]).includes(channel));
    if (unknown !== undefined) throw problem(index, `channel ${JSON.stringify(unknown)} is not one of ${DELIVERY_CHANNELS.join(', ')}`);
    const approvers = checkApprovers(step.approvers, `escalation[${index}].approvers`);
    if (channels.length === 0 && approvers.length === 0) throw problem(index, 'must name channels or approvers');
    return { afterSeconds: step.afterSeconds, channels, approvers };
  });
}

/** Where a person opens a question's page by its link: the answer page, an email link's page. */
const VIEW_SURFACES: ReadonlySet<string> = new Set(['answer_page', 'email_link']);

/** An email answer link's single-use key, when the token is one. */
function emailLinkOf(row: store.QuestionRow, token: VerifiedToken | undefined): store.EmailLinkKey | undefined {
  if (token?.choice === undefined || token.recipient?.kind !== 'email') return undefined;
  return { questionId: row.id, address: token.recipient.id, choice: token.choice };
}

const linkUsed = (): HeraldError =>
  new HeraldError('conflict', 'This link was already used: each email link answers once.', { title: 'Link already used', hint: 'Read the question to see its answer.', extra: { reason: 'link_used' } });

/** Who answers through an answer link: its recipient when it names one, else whoever holds it. */
function linkAnswerer(token: VerifiedToken): Answerer {
  const recipient = token.recipient;
  if (!recipient) return { kind: 'link', id: '', displayName: 'the holder of the answer link', channel: 'answer_page' };
  return { kind: recipient.kind, id: recipient.id, displayName: recipient.id, channel: recipient.kind === 'email' ? 'email' : 'web_push' };
}

/** The fields of a question to store, as CreateQuestion names them (OpenQuestion's, once its caller's rules are applied). */
type OpenRequest = Omit<CreateQuestionRequest, 'requestHash' | 'requireReachable'>;

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
  answering: Answering,
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
    approvers: row.approvers,
    answeredBy: row.answered_by ?? undefined,
    escalation: row.escalation,
    keyId: row.key_id,
    keyName: row.key_name ?? '',
  });

  /** The question a reference names (and, for a token, what the token says); a foreign, unknown or forged one is 404 alike. */
  async function resolveRef(ref: QuestionRef | undefined): Promise<{ row: store.QuestionRow; token?: VerifiedToken }> {
    let row: store.QuestionRow | undefined;
    let token: VerifiedToken | undefined;
    if (ref?.by?.$case === 'owned') {
      const { workspaceId, kind, id, externalIdScope } = ref.by.value;
      if (!workspaceId) throw new HeraldError('invalid_request', 'workspace_id is required');
      row = await store.findQuestion(pool, id, { workspaceId, kind: kindOf(kind), externalId: orNull(externalIdScope) ?? undefined });
    } else if (ref?.by?.$case === 'token') {
      token = tokens.verify(ref.by.value);
      row = token === undefined ? undefined : await store.findQuestion(pool, token.questionId, {});
    } else {
      throw new HeraldError('invalid_request', 'ref is required');
    }
    if (!row) throw new HeraldError('not_found', 'No such question.', { title: 'Not found' });
    return { row, token };
  }

  const resolve = async (ref: QuestionRef | undefined) => (await resolveRef(ref)).row;

  /** What an open needs besides the question's fields. */
  interface Opening {
    siteId: string | null;
    /** The name of the key that opens it (the deprecated CreateQuestion carries none). */
    keyName: string;
    requireReachable: boolean;
    /** Write its QuestionOpened event with it (OpenQuestion); false for the deprecated CreateQuestion, whose caller pushes. */
    opened: boolean;
    approvers: Approver[];
    escalation: EscalationStep[];
  }

  /** The QuestionOpened event of a new question, enqueued in the transaction that stores it. */
  async function announce(tx: Queryable, row: store.QuestionRow): Promise<void> {
    const eventId = randomUUID();
    const event = DecisionEvent.encode({
      eventId,
      occurredAt: row.created_at.toISOString(),
      workspaceId: row.workspace_id,
      kind: { $case: 'questionOpened', value: { questionId: row.id, kind: view(row).kind, deliveries: deliveriesOf(row, await workspaceChannelsFor(tx, row.workspace_id, row.approvers)) } },
    }).finish();
    await enqueue(tx, store.SCHEMA, [{ topic: topics.decisionEvents.name, key: row.id, payload: event, eventId }]);
  }

  /** The first entry of a new question's record and, for OpenQuestion, its QuestionOpened event: in the transaction that stores it. */
  async function record(tx: Queryable, row: store.QuestionRow, opened: boolean): Promise<void> {
    await store.appendEvent(tx, row.id, 'opened', {
      actor: { kind: 'key', id: row.key_id },
      detail: { kind: row.kind, type: row.type, question: row.question, approvers: row.approvers, escalation: row.escalation },
    });
    if (opened) await announce(tx, row);
  }

  /**
   * Stores a new question and, for OpenQuestion, its QuestionOpened event in the same transaction
   * (its deliveries are made from that event). An idempotent replay of a decision returns the
   * first one and writes nothing.
   */
  async function open(request: OpenRequest, { siteId, keyName, requireReachable, opened, ...asked }: Opening): Promise<{ question: Question; duplicate: boolean }> {
    const kind = kindOf(request.kind);
    const approvers = checkApprovers(asked.approvers, 'approvers');
    const escalation = checkEscalation(asked.escalation);
    const question: store.NewQuestion = {
      id: `${kind === 'ask' ? 'ask' : 'dec'}_${randomUUID().replaceAll('-', '')}`,
      workspaceId: request.workspaceId,
      siteId: orNull(siteId ?? ''),
      kind,
      keyId: request.keyId,
      keyName: orNull(keyName),
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
      requestHash: kind === 'decision' ? requestHash({ ...request, requireReachable }, { approvers, escalation }) : null,
      lifetimeSeconds: kind === 'ask' ? config.askLifetimeSeconds : request.lifetimeSeconds,
      approvers,
      escalation,
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
        if (inserted) await record(tx, inserted, opened);
        return inserted;
      });
      if (!row) throw new Error('ask insert returned no row');
      logger.info({ workspaceId: row.workspace_id, questionId: row.id }, 'question asked');
      countQuestion('opened', 'ask');
      await wakeWaiters(row, 'opened');
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
    const inserted = await withTransaction(pool, async (tx) => {
      const row = await store.insertQuestion(tx, question);
      if (row) await record(tx, row, opened);
      return row;
    });
    if (inserted) {
      logger.info({ workspaceId: inserted.workspace_id, decisionId: inserted.id }, 'decision opened');
      countQuestion('opened', 'decision');
      await wakeWaiters(inserted, 'opened');
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
          { siteId: caller.siteId, keyName: caller.keyName, requireReachable: request.requireReachable, opened: true, approvers: request.approvers, escalation: request.escalation },
        );
      },

      async createQuestion(request) {
        return open(request, { siteId: null, keyName: '', requireReachable: request.requireReachable, opened: false, approvers: [], escalation: [] });
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
        const { row, token } = await resolveRef(request.ref);
        let by: Answerer;
        if (token) {
          by = linkAnswerer(token);
        } else {
          const given = request.answeredBy;
          if (!given?.kind || !given.id || !given.channel) throw new HeraldError('invalid_request', 'answered_by (kind, id, channel) is required to answer by reference');
          by = { kind: given.kind, id: given.id, displayName: given.displayName || given.id, channel: given.channel };
        }
        const link = emailLinkOf(row, token);
        if (!link) return { question: view(await answering.answer(row, request.answer, by)) };
        // An email link names its answer (an input question's names none: the page sends it) and answers once.
        if (link.choice !== '' && request.answer !== '' && request.answer !== link.choice) {
          throw invalidFields('body', [{ field: 'answer', in: 'body', problem: 'must be the answer the link names' }]);
        }
        if (await store.emailLinkUsed(pool, link)) throw linkUsed();
        const useLink = async (tx: Queryable) => {
          if (!(await store.useEmailLink(tx, link))) throw linkUsed();
        };
        return { question: view(await answering.answer(row, link.choice || request.answer, by, useLink)) };
      },

      async recordQuestionView({ ref, surface }) {
        if (ref?.by?.$case !== 'token') throw new HeraldError('invalid_request', 'ref must be a token: a view is of a page opened by its link');
        if (!VIEW_SURFACES.has(surface)) throw new HeraldError('invalid_request', `surface must be one of ${[...VIEW_SURFACES].join(', ')}`);
        const { row, token } = await resolveRef(ref);
        if (!token) throw new Error('a token reference resolved without its token');
        const link = emailLinkOf(row, token);
        // An email link's page opened with any other link: not one of its links.
        if (surface === 'email_link' && !link) throw new HeraldError('not_found', 'No such link.', { title: 'Not found' });
        await withTransaction(pool, (tx) => store.appendEvent(tx, row.id, 'viewed', { actor: { ...linkAnswerer(token) }, detail: { surface } }));
        return { question: view(row), emailLink: link && { address: link.address, choice: link.choice, used: await store.emailLinkUsed(pool, link) } };
      },

      async cancelQuestion(request) {
        return { question: view(await answering.cancel(await resolve(request.ref))) };
      },

      async listQuestionEvents({ ref, limit, cursor }) {
        const row = await resolve(ref);
        // The cursor is the position of the page's last entry (its seq), in the lists' cursor format.
        const page = pageRequest(limit, cursor);
        if (page.after !== undefined && (page.after.createdUs !== '0' || !/^[1-9][0-9]{0,8}$/.test(page.after.id))) throw invalidFields('querystring', [{ field: 'cursor', in: 'querystring', problem: 'is not a cursor returned by this endpoint' }]);
        const entries = await store.listEvents(pool, row.id, Number(page.after?.id ?? 0), page.fetch);
        const { rows, nextCursor } = page.page(entries.map((entry) => ({ ...entry, id: String(entry.seq), created_us: '0' })));
        return {
          events: rows.map((entry) => ({
            seq: entry.seq,
            kind: entry.kind,
            at: entry.at.toISOString(),
            actorJson: entry.actor === null ? '' : JSON.stringify(entry.actor),
            detailJson: JSON.stringify(entry.detail),
            prevHash: entry.prev_hash,
            hash: entry.hash,
          })),
          nextCursor,
        };
      },
    },
    logger,
  );
}
