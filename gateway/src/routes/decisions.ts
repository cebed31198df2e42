import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { QuestionKind, type Question } from '@herald/proto/herald/decision/v1/decision';
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';

import { endUserOf, principalOf } from '../access.js';
import {
  answererOf,
  AnswerValue,
  answerText,
  checkQuestion,
  decisionRecord,
  holdForAnswer,
  listQuestions,
  newQuestion,
  questionEvents,
  questionOf,
  type QuestionRouteOptions,
} from '../questions.js';
import { countChannels } from '../reachability.js';
import { ErrorResponse, IdempotencyHeaders, IdempotencyKey, idempotencyKeyOf, Nullable, orNull, PageOf, PageQuery, Parameters, withErrors } from '../schemas/common.js';
import { DecisionRecord, MAX_WAIT_SECONDS, QuestionEventRecord, QuestionFields, ReachabilityCounts } from '../schemas/questions.js';
import { ExternalId } from '../schemas/subscribers.js';

/** /decisions (open, list, read and wait, answer, cancel) and GET /reachability. */

const Audience = Type.Union([Type.Literal('user'), Type.Literal('owner'), Type.Literal('team')]);

const DecisionBody = Type.Object(
  {
    ...QuestionFields,
    externalId: Type.Optional(ExternalId),
    audience: Type.Optional(Audience),
    wait: Type.Optional(Type.Boolean({ default: false, description: 'true: hold the call until the decision resolves or timeoutSeconds pass' })),
    expiresInSeconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 86_400, default: 3_600, description: 'How long it stays answerable' })),
    requireReachable: Type.Optional(Type.Boolean({ description: 'Refuse (409) when the addressed person has no live channel' })),
    idempotencyKey: Type.Optional(IdempotencyKey),
    toolName: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'The tool call that needs approval' })),
    toolTarget: Type.Optional(Type.String({ minLength: 1, maxLength: 1_000 })),
    parameters: Type.Optional(Parameters),
  },
  { additionalProperties: false },
);

const Params = Type.Object({ decisionId: Type.String({ minLength: 1, maxLength: 64 }) });

const ListQuery = Type.Object(
  {
    status: Type.Optional(
      Type.Union([Type.Literal('pending'), Type.Literal('answered'), Type.Literal('expired'), Type.Literal('cancelled')], { description: 'Only decisions in this state' }),
    ),
    ...PageQuery,
  },
  { additionalProperties: false },
);

export const decisionRoutes =
  ({ clients, waiters, publicOrigin }: QuestionRouteOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    const config = { access: { scope: 'decisions' as const } };
    // A bound key finds only decisions addressed to its own end-user; any other is 404.
    const owned = (request: FastifyRequest, decisionId: string) => {
      const principal = principalOf(request);
      return {
        ref: {
          by: {
            $case: 'owned' as const,
            value: { workspaceId: principal.workspaceId, kind: QuestionKind.QUESTION_KIND_DECISION, id: decisionId, externalIdScope: principal.boundExternalId },
          },
        },
      };
    };

    app.post(
      '/decisions',
      {
        config,
        schema: { tags: ['Decisions'], operationId: 'createDecision', summary: 'Open a decision for a person', body: DecisionBody, headers: IdempotencyHeaders, response: withErrors({ 200: DecisionRecord, 409: ErrorResponse }) },
      },
      async (request, reply) => {
        const { wait, timeoutSeconds = 30, idempotencyKey: bodyKey, requireReachable = false, ...body } = request.body;
        checkQuestion(body);
        const idempotencyKey = idempotencyKeyOf(request.headers['idempotency-key'], bodyKey);
        // One call: the decision service applies the audience, bound-key and reachability rules, opens the decision and delivers it.
        const { question: created, duplicate } = await clients.decision.openQuestion({
          ...newQuestion(principalOf(request), QuestionKind.QUESTION_KIND_DECISION, body),
          audience: body.audience ?? '',
          externalId: body.externalId ?? '',
          toolName: body.toolName ?? '',
          toolTarget: body.toolTarget ?? '',
          parametersJson: body.parameters === undefined ? '' : JSON.stringify(body.parameters),
          lifetimeSeconds: body.expiresInSeconds ?? 0,
          idempotencyKey: idempotencyKey ?? '',
          requireReachable,
        });
        const opened = questionOf({ question: created });
        const read = async () => questionOf(await clients.decision.getQuestion(owned(request, opened.id)));
        const { question } = await holdForAnswer(waiters, reply, opened, wait ? timeoutSeconds : 0, read);
        return decisionRecord(question, publicOrigin, duplicate);
      },
    );

    app.get(
      '/decisions',
      {
        config,
        schema: {
          tags: ['Decisions'],
          operationId: 'listDecisions',
          summary: "The workspace's decisions, newest first (status=pending: an approver's inbox; a bound key sees its end-user's)",
          querystring: ListQuery,
          response: withErrors({ 200: PageOf(DecisionRecord) }),
        },
      },
      async (request) => {
        const page = await listQuestions(clients, request, QuestionKind.QUESTION_KIND_DECISION, request.query);
        return { data: page.questions.map((question) => decisionRecord(question, publicOrigin)), hasMore: page.hasMore, nextCursor: page.nextCursor };
      },
    );

    app.get(
      '/decisions/:decisionId',
      {
        config,
        schema: {
          tags: ['Decisions'],
          operationId: 'getDecision',
          summary: 'Read a decision, optionally waiting until it resolves',
          params: Params,
          querystring: Type.Object(
            { wait: Type.Optional(Type.Boolean({ description: `true: hold until the decision resolves or ${MAX_WAIT_SECONDS} s pass` })) },
            { additionalProperties: false },
          ),
          response: withErrors({ 200: DecisionRecord }),
        },
      },
      async (request, reply) => {
        const read = async () => questionOf(await clients.decision.getQuestion(owned(request, request.params.decisionId)));
        const { question } = await holdForAnswer(waiters, reply, await read(), request.query.wait ? MAX_WAIT_SECONDS : 0, read);
        return decisionRecord(question, publicOrigin);
      },
    );

    app.post(
      '/decisions/:decisionId',
      {
        config,
        schema: {
          tags: ['Decisions'],
          operationId: 'answerDecision',
          summary: 'Record the answer to a decision',
          params: Params,
          body: Type.Object(
            { answer: AnswerValue },
            { additionalProperties: false },
          ),
          response: withErrors({ 200: DecisionRecord, 403: ErrorResponse, 409: ErrorResponse }),
        },
      },
      async (request) => {
        const answered = questionOf(
          await clients.decision.answerQuestion({ ...owned(request, request.params.decisionId), answer: answerText(request.body.answer), answeredBy: answererOf(request) }),
        );
        return decisionRecord(answered, publicOrigin);
      },
    );

    app.delete(
      '/decisions/:decisionId',
      { config, schema: { tags: ['Decisions'], operationId: 'cancelDecision', summary: 'Cancel a pending decision', params: Params, response: withErrors({ 200: DecisionRecord, 409: ErrorResponse }) } },
      async (request) => {
        const cancelled = questionOf(await clients.decision.cancelQuestion(owned(request, request.params.decisionId)));
        return decisionRecord(cancelled, publicOrigin);
      },
    );

    app.get(
      '/decisions/:decisionId/events',
      {
        config,
        schema: {
          tags: ['Decisions'],
          operationId: 'listDecisionEvents',
          summary: "The decision's record, oldest first: each entry chained to the one before by its hash",
          params: Params,
          querystring: Type.Object(PageQuery, { additionalProperties: false }),
          response: withErrors({ 200: PageOf(QuestionEventRecord) }),
        },
      },
      async (request) => questionEvents(clients, owned(request, request.params.decisionId).ref, request.query),
    );

    app.get(
      '/reachability',
      {
        config,
        schema: {
          tags: ['Decisions'],
          operationId: 'getReachability',
          summary: 'Whether a person can be reached, and through which channels',
          querystring: Type.Object({ externalId: Type.Optional(ExternalId) }, { additionalProperties: false }),
          response: withErrors({
            200: Type.Object({
              externalId: Type.String(),
              ...ReachabilityCounts.properties,
              channels: Type.Array(Type.Union([Type.Literal('native_app'), Type.Literal('browser')]), { description: 'The kinds of live channel' }),
            }),
          }),
        },
      },
      async (request) => {
        const principal = principalOf(request);
        const externalId = endUserOf(principal, request.query.externalId, 'check reachability') ?? principal.ownerExternalId;
        const { user } = await countChannels(clients, principal.workspaceId, externalId);
        const channels = [...(user.nativeAppDevices > 0 ? (['native_app'] as const) : []), ...(user.browserSubscriptions > 0 ? (['browser'] as const) : [])];
        return { externalId, ...user, channels };
      },
    );
  };
