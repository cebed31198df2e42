import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { partnerDecisionRequired, questionStatusOfAsk } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import { QuestionKind, type Question } from '@herald/proto/herald/decision/v1/decision';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';

import { principalOf } from '../access.js';
import {
  answererOf,
  AnswerValue,
  answerText,
  askRecord,
  checkQuestion,
  holdForAnswer,
  listQuestions,
  newQuestion,
  questionEvents,
  questionOf,
  type QuestionRouteOptions,
} from '../questions.js';
import { ErrorResponse, PageOf, PageQuery, Targeting, withErrors } from '../schemas/common.js';
import { AskRecord, MAX_WAIT_SECONDS, QuestionEventRecord, QuestionFields } from '../schemas/questions.js';

/** POST /ask (a question that blocks on a person), GET /ask (the list), GET /ask/{id}?wait, DELETE /ask/{id} (withdraw). */

const AskBody = Type.Object(
  {
    ...QuestionFields,
    wait: Type.Optional(Type.Boolean({ default: true, description: 'false: return at once with status pending' })),
    ...Targeting,
  },
  { additionalProperties: false },
);

/** 429 beyond the pending limit: only `{error}`, as the spec says, and no Retry-After. */
const PendingLimit = Type.Object({ error: Type.String() }, { additionalProperties: true });

const Params = Type.Object({ correlationId: Type.String({ minLength: 1, maxLength: 64 }) });

const ListQuery = Type.Object(
  {
    status: Type.Optional(
      Type.Union([Type.Literal('pending'), Type.Literal('answered'), Type.Literal('timeout'), Type.Literal('withdrawn')], { description: 'Only questions in this state' }),
    ),
    ...PageQuery,
  },
  { additionalProperties: false },
);

/** Partner workspaces have no asks (the decision service refuses to open one): reading or withdrawing one says why. */
async function refusePartner(request: FastifyRequest): Promise<void> {
  if (principalOf(request).plan?.partner) throw partnerDecisionRequired();
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
          // One call: the decision service opens the question (the partner rule too) and delivers it.
          created = questionOf(
            await clients.decision.openQuestion({
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

    app.get(
      '/ask',
      {
        config,
        onRequest: refusePartner,
        schema: {
          tags: ['Ask'],
          operationId: 'listAsks',
          summary: "The workspace's questions, newest first (status=pending: those waiting for a person)",
          querystring: ListQuery,
          response: withErrors({ 200: PageOf(AskRecord) }),
        },
      },
      async (request) => {
        const { status, limit, cursor } = request.query;
        const page = await listQuestions(clients, request, QuestionKind.QUESTION_KIND_ASK, { status: status && questionStatusOfAsk(status), limit, cursor });
        return { data: page.questions.map((question) => askRecord(question, publicOrigin)), hasMore: page.hasMore, nextCursor: page.nextCursor };
      },
    );

    app.post(
      '/ask/:correlationId',
      {
        config,
        onRequest: refusePartner,
        schema: {
          tags: ['Ask'],
          operationId: 'answerAsk',
          summary: 'Record the answer to an open question (an approver in the console, or a key that may ask)',
          params: Params,
          body: Type.Object({ answer: AnswerValue }, { additionalProperties: false }),
          response: withErrors({ 200: AskRecord, 409: ErrorResponse }),
        },
      },
      async (request) => {
        const answered = questionOf(await clients.decision.answerQuestion({ ref: owned(request, request.params.correlationId), answer: answerText(request.body.answer), answeredBy: answererOf(request) }));
        return askRecord(answered, publicOrigin);
      },
    );

    app.get(
      '/ask/:correlationId/events',
      {
        config,
        onRequest: refusePartner,
        schema: {
          tags: ['Ask'],
          operationId: 'listAskEvents',
          summary: "The question's record, oldest first: each entry chained to the one before by its hash",
          params: Params,
          querystring: Type.Object(PageQuery, { additionalProperties: false }),
          response: withErrors({ 200: PageOf(QuestionEventRecord) }),
        },
      },
      async (request) => questionEvents(clients, owned(request, request.params.correlationId), request.query),
    );

    app.delete(
      '/ask/:correlationId',
      { config, onRequest: refusePartner, schema: { tags: ['Ask'], operationId: 'withdrawAsk', summary: 'Withdraw an open question', params: Params, response: withErrors({ 200: AskRecord, 409: ErrorResponse }) } },
      async (request) => {
        const withdrawn = questionOf(await clients.decision.cancelQuestion({ ref: owned(request, request.params.correlationId) }));
        return askRecord(withdrawn, publicOrigin);
      },
    );
  };
