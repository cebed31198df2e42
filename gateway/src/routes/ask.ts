import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { HeraldError } from '@herald/errors';
import { QuestionKind, type Question } from '@herald/proto/herald/decision/v1/decision';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';

import { principalOf } from '../access.js';
import {
  answerPageUrl,
  checkQuestion,
  holdForAnswer,
  MAX_WAIT_SECONDS,
  newQuestion,
  pushQuestion,
  QuestionFields,
  questionOf,
  type QuestionRouteOptions,
} from '../questions.js';
import { ErrorResponse, Targeting, withErrors } from '../schemas.js';

/** POST /ask (a question that blocks on a person), GET /ask/{id}?wait, DELETE /ask/{id} (withdraw). */

const AskBody = Type.Object(
  {
    ...QuestionFields,
    wait: Type.Optional(Type.Boolean({ default: true, description: 'false: return at once with status pending' })),
    ...Targeting,
  },
  { additionalProperties: false },
);

export const AskRecord = Type.Object({
  correlationId: Type.String(),
  question: Type.String(),
  type: Type.String({ description: 'confirm | select | input' }),
  status: Type.Union([Type.Literal('pending'), Type.Literal('answered'), Type.Literal('timeout'), Type.Literal('withdrawn')]),
  answered: Type.Boolean(),
  value: Type.Optional(Type.String({ description: 'The answer (confirm: yes | no); present when answered' })),
  liveUrl: Type.String({ description: 'The answer page' }),
  pollUrl: Type.String(),
  expiresInSeconds: Type.Integer({ description: 'Seconds the question stays open (600 when asked)' }),
  mode: Type.String({ description: 'The workspace approval mode: browser | terminal' }),
  hint: Type.Optional(Type.String({ description: 'Present on timeout' })),
});

/** 429 beyond the pending limit: only `{error}`, as the spec says, and no Retry-After. */
const PendingLimit = Type.Object({ error: Type.String() }, { additionalProperties: true });

const Params = Type.Object({ correlationId: Type.String({ minLength: 1, maxLength: 64 }) });

/** The ask record. `timedOut`: this call waited and no answer came, though the question is still open. */
export function askRecord(question: Question, publicOrigin: string, timedOut = false) {
  const pollUrl = `${publicOrigin}/api/v1/server/ask/${question.id}`;
  const base = {
    correlationId: question.id,
    question: question.question,
    type: question.type,
    liveUrl: answerPageUrl(publicOrigin, question),
    pollUrl,
    expiresInSeconds: question.expiresInSeconds,
    mode: question.mode,
  };
  switch (question.status) {
    case 'answered':
      return { ...base, status: 'answered' as const, answered: true, value: question.answer };
    case 'cancelled':
      return { ...base, status: 'withdrawn' as const, answered: false };
    case 'expired':
      return {
        ...base,
        status: 'timeout' as const,
        answered: false,
        hint: 'Nobody answered before the question expired; treat it as not approved. Ask again if it still matters.',
      };
    default:
      if (!timedOut) return { ...base, status: 'pending' as const, answered: false };
      return {
        ...base,
        status: 'timeout' as const,
        answered: false,
        hint: `No answer yet. The question stays open for ${question.expiresInSeconds} more seconds: wait again with GET ${pollUrl}?wait=${MAX_WAIT_SECONDS}, or withdraw it with DELETE.`,
      };
  }
}

/** Partner workspaces reach people through POST /decisions (the spec's rule). */
async function refusePartner(request: FastifyRequest): Promise<void> {
  if (principalOf(request).plan?.partner) {
    throw new HeraldError('partner_decision_required', 'Partner workspaces cannot use /ask; open a decision with POST /decisions instead.', {
      title: 'Use POST /decisions',
      hint: 'POST /api/v1/server/decisions addresses the owner, the team or one of your end-users, and waits the same way.',
    });
  }
}

export const askRoutes =
  ({ clients, waiters, publicOrigin }: QuestionRouteOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    const config = { access: { scope: 'ask' as const } };
    const owned = (request: FastifyRequest, correlationId: string) => ({
      by: { $case: 'owned' as const, value: { workspaceId: principalOf(request).workspaceId, kind: QuestionKind.QUESTION_KIND_ASK, id: correlationId, externalIdScope: '' } },
    });
    const read = (request: FastifyRequest, correlationId: string) => async () => questionOf(await clients.decision.getQuestion({ ref: owned(request, correlationId) }));

    app.post(
      '/ask',
      {
        config,
        onRequest: refusePartner,
        schema: {
          tags: ['Ask'],
          operationId: 'ask',
          summary: 'Ask a person a question and wait for the answer',
          description: 'Live, though the 1.0.0 contract left /ask out of its description. A Partner workspace gets 403 partner_decision_required: it uses POST /decisions.',
          body: AskBody,
          response: { ...withErrors({ 200: AskRecord }), 429: PendingLimit },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const body = request.body;
        checkQuestion(body);
        let created: Question;
        try {
          created = questionOf(
            await clients.decision.createQuestion({
              ...newQuestion(principal, QuestionKind.QUESTION_KIND_ASK, body),
              subscriberIds: body.subscriberIds ?? [],
              externalIds: body.externalIds ?? [],
              tags: body.tags ?? [],
            }),
          );
        } catch (err) {
          if (err instanceof HeraldError && err.code === 'rate_limited') return reply.code(429).send({ error: err.message });
          throw err;
        }
        await pushQuestion({ clients, publicOrigin }, request, created, {
          subscriberIds: body.subscriberIds ?? [],
          externalIds: body.externalIds ?? [],
          tags: body.tags ?? [],
        });
        const wait = body.wait === false ? 0 : (body.timeoutSeconds ?? 30);
        const { question, timedOut } = await holdForAnswer(waiters, reply, created, wait, read(request, created.id));
        return askRecord(question, publicOrigin, timedOut);
      },
    );

    app.get(
      '/ask/:correlationId',
      {
        config,
        onRequest: refusePartner,
        schema: {
          tags: ['Ask'],
          operationId: 'getAsk',
          summary: 'Read a question, optionally waiting for its answer',
          params: Params,
          querystring: Type.Object(
            { wait: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_WAIT_SECONDS, description: 'Seconds to wait for an answer (0: read at once)' })) },
            { additionalProperties: false },
          ),
          response: withErrors({ 200: AskRecord }),
        },
      },
      async (request, reply) => {
        const current = read(request, request.params.correlationId);
        const { question, timedOut } = await holdForAnswer(waiters, reply, await current(), request.query.wait ?? 0, current);
        return askRecord(question, publicOrigin, timedOut);
      },
    );

    app.delete(
      '/ask/:correlationId',
      { config, onRequest: refusePartner, schema: { tags: ['Ask'], operationId: 'withdrawAsk', summary: 'Withdraw an open question', params: Params, response: withErrors({ 200: AskRecord, 409: ErrorResponse }) } },
      async (request) => {
        const withdrawn = questionOf(await clients.decision.cancelQuestion({ ref: owned(request, request.params.correlationId) }));
        await waiters.notify(withdrawn.id);
        return askRecord(withdrawn, publicOrigin);
      },
    );
  };
