import { answerPageUrl, ASK_EXPIRED_HINT, askStatusOf, askStillOpenHint, type QuestionStatus } from '@herald/domain';
import { invalidFields } from '@herald/errors';
import type { Principal } from '@herald/proto/herald/account/v1/account';
import type { AnsweredBy, OpenQuestionRequest, Question, QuestionKind, QuestionRef } from '@herald/proto/herald/decision/v1/decision';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';

import { principalOf } from './access.js';
import type { ServiceClients } from './clients.js';
import { orNull } from './schemas/common.js';
import { MAX_WAIT_SECONDS, type QuestionEventRecord, type QuestionType } from './schemas/questions.js';
import type { Waiters } from './waiters.js';

/** What POST /ask and POST /decisions share: their questions' checks (the fields are in schemas/questions.ts), and waiting for its answer (the decision service opens and delivers it). */

/** What the /ask, /decisions and answer-page routes are built from. */
export interface QuestionRouteOptions {
  clients: ServiceClients;
  waiters: Waiters;
  publicOrigin: string;
}

interface QuestionInput {
  question: string;
  type?: Static<typeof QuestionType>;
  options?: string[];
  context?: string;
  placeholder?: string;
  agentName?: string;
  callbackUrl?: string;
  approvers?: Array<{ kind: string; id: string }>;
  escalation?: Array<{ afterSeconds: number; channels?: string[]; approvers?: Array<{ kind: string; id: string }> }>;
}

/** An OpenQuestion request with what /ask and /decisions fill alike; each sets the rest. */
export function newQuestion(principal: Principal, kind: QuestionKind, body: QuestionInput): OpenQuestionRequest {
  return {
    caller: principal,
    kind,
    type: body.type ?? 'confirm',
    question: body.question,
    options: body.options ?? [],
    context: body.context ?? '',
    placeholder: body.placeholder ?? '',
    agentName: body.agentName ?? '',
    callbackUrl: body.callbackUrl ?? '',
    subscriberIds: [],
    externalIds: [],
    tags: [],
    audience: '',
    externalId: '',
    toolName: '',
    toolTarget: '',
    parametersJson: '',
    lifetimeSeconds: 0,
    idempotencyKey: '',
    requireReachable: false,
    approvers: body.approvers ?? [],
    escalation: (body.escalation ?? []).map((step) => ({ afterSeconds: step.afterSeconds, channels: step.channels ?? [], approvers: step.approvers ?? [] })),
  };
}

/**
 * Who answers through the API: a member signed in to the console (their id and name), else the
 * key, or a bound key's end-user (the subscriber it speaks for).
 */
export function answererOf(request: FastifyRequest): AnsweredBy {
  const member = request.session?.member;
  if (member) return { kind: 'member', id: member.id, displayName: member.displayName || member.email, channel: 'console', at: '' };
  const principal = principalOf(request);
  if (principal.boundExternalId) return { kind: 'subscriber', id: principal.boundExternalId, displayName: principal.boundExternalId, channel: 'api', at: '' };
  return { kind: 'key', id: principal.keyId, displayName: principal.keyId, channel: 'api', at: '' };
}

/** What the records show of who may answer and who did. */
function people(question: Question) {
  return {
    approvers: question.approvers,
    answeredBy: question.answeredBy ?? null,
    escalation: question.escalation,
  };
}

/** What the schema cannot say: options exactly for select. (The decision service checks callbackUrl where webhooks may go.) */
export function checkQuestion({ type = 'confirm', options }: QuestionInput): void {
  const problem = (text: string) => invalidFields('body', [{ field: 'options', in: 'body', problem: text }]);
  if (type === 'select' && options === undefined) throw problem('is required for a select question');
  if (type !== 'select' && options !== undefined) throw problem(`is only allowed for a select question, not ${type}`);
}

/** An answer as POST /decisions/{id} and POST /ask/{id} take it. */
export const AnswerValue = Type.Union([Type.String({ minLength: 1, maxLength: 2_000 }), Type.Boolean()], { description: 'confirm: "yes" | "no" | true | false' });

/** A confirm answer may be sent as a boolean; it is stored as yes | no. */
export const answerText = (answer: string | boolean): string => (typeof answer === 'boolean' ? (answer ? 'yes' : 'no') : answer);

export function questionOf(response: { question?: Question }): Question {
  if (!response.question) throw new Error('decision service returned no question');
  return response.question;
}

/** Aborts when the client goes away before its answer was written, so its waiter is freed at once. */
function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}

/**
 * The question after waiting up to `waitSeconds` (never past its expiry) for it to be resolved;
 * `timedOut` when the wait ran out with the question still open.
 */
export async function holdForAnswer(
  waiters: Waiters,
  reply: FastifyReply,
  question: Question,
  waitSeconds: number,
  read: () => Promise<Question>,
): Promise<{ question: Question; timedOut: boolean }> {
  if (question.status !== 'pending' || waitSeconds <= 0) return { question, timedOut: false };
  const timeoutMs = Math.min(waitSeconds, question.expiresInSeconds) * 1_000;
  const { record, timedOut } = await waiters.wait(question.id, timeoutMs, read, (current) => current.status !== 'pending', clientGone(reply));
  return { question: record, timedOut: timedOut && record.status === 'pending' };
}

/** One page of a workspace's questions of one kind, newest first (GET /ask, GET /decisions). */
export async function listQuestions(
  clients: ServiceClients,
  request: FastifyRequest,
  kind: QuestionKind,
  { status, limit, cursor }: { status?: QuestionStatus; limit: number; cursor?: string },
): Promise<{ questions: Question[]; hasMore: boolean; nextCursor: string | null }> {
  const principal = principalOf(request);
  const { questions, nextCursor } = await clients.decision.listQuestions({
    workspaceId: principal.workspaceId,
    kind,
    status: status ?? '',
    externalIdScope: principal.boundExternalId,
    limit,
    cursor: cursor ?? '',
  });
  return { questions, hasMore: nextCursor !== '', nextCursor: orNull(nextCursor) };
}

/** The ask record. `timedOut`: this call waited and no answer came, though the question is still open. */
export function askRecord(question: Question, publicOrigin: string, timedOut = false) {
  const pollUrl = `${publicOrigin}/api/v1/server/ask/${question.id}`;
  const base = {
    correlationId: question.id,
    question: question.question,
    type: question.type,
    liveUrl: answerPageUrl(publicOrigin, question.answerToken),
    pollUrl,
    options: question.options,
    context: orNull(question.context),
    placeholder: orNull(question.placeholder),
    agentName: orNull(question.agentName),
    expiresInSeconds: question.expiresInSeconds,
    expiresAt: question.expiresAt,
    createdAt: question.createdAt,
    mode: question.mode,
    ...people(question),
  };
  const status = askStatusOf(question.status as QuestionStatus);
  switch (status) {
    case 'answered':
      return { ...base, status, answered: true, value: question.answer };
    case 'withdrawn':
      return { ...base, status, answered: false };
    case 'timeout':
      return { ...base, status, answered: false, hint: ASK_EXPIRED_HINT };
    default:
      if (!timedOut) return { ...base, status, answered: false };
      return {
        ...base,
        status: 'timeout' as const,
        answered: false,
        hint: askStillOpenHint(question.expiresInSeconds, `wait again with GET ${pollUrl}?wait=${MAX_WAIT_SECONDS}, or withdraw it with DELETE`),
      };
  }
}

export function decisionRecord(question: Question, publicOrigin: string, duplicate = false) {
  return {
    decisionId: question.id,
    status: question.status as 'pending' | 'answered' | 'expired' | 'cancelled',
    // The decision service's fail-closed rule (only a yes to a confirm question approves).
    approved: question.approved,
    answer: question.status === 'answered' ? question.answer : null,
    question: question.question,
    type: question.type,
    options: question.options,
    context: orNull(question.context),
    placeholder: orNull(question.placeholder),
    agentName: orNull(question.agentName),
    audience: question.audience,
    externalId: orNull(question.externalId),
    toolName: orNull(question.toolName),
    toolTarget: orNull(question.toolTarget),
    parameters: question.parametersJson === '' ? null : (JSON.parse(question.parametersJson) as Record<string, string | number | boolean | null>),
    mode: question.mode,
    pollUrl: `${publicOrigin}/api/v1/server/decisions/${question.id}`,
    decisionPageUrl: answerPageUrl(publicOrigin, question.answerToken),
    expiresInSeconds: question.expiresInSeconds,
    expiresAt: question.expiresAt,
    createdAt: question.createdAt,
    answeredAt: orNull(question.answeredAt),
    cancelledAt: orNull(question.cancelledAt),
    reachability: question.reachability ?? { reachable: false, browserSubscriptions: 0, nativeAppDevices: 0 },
    idempotencyKey: orNull(question.idempotencyKey),
    ...people(question),
    duplicate,
  };
}

/** A page of a question's record, oldest first, as GET /decisions/{id}/events and GET /ask/{id}/events show it. */
export async function questionEvents(clients: ServiceClients, ref: QuestionRef, { limit, cursor }: { limit: number; cursor?: string }) {
  const { events, nextCursor } = await clients.decision.listQuestionEvents({ ref, limit, cursor: cursor ?? '' });
  return {
    data: events.map((event) => ({
      seq: event.seq,
      kind: event.kind as Static<typeof QuestionEventRecord>['kind'],
      at: event.at,
      actor: event.actorJson === '' ? null : (JSON.parse(event.actorJson) as Record<string, string>),
      detail: JSON.parse(event.detailJson) as Record<string, unknown>,
      prevHash: event.prevHash,
      hash: event.hash,
    })),
    hasMore: nextCursor !== '',
    nextCursor: orNull(nextCursor),
  };
}
