import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { HeraldError } from '@herald/errors';
import { QuestionKind, type Question } from '@herald/proto/herald/decision/v1/decision';
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';

import { acceptFormPosts, renderNotFoundPage, renderQuestionPage, sendFormPage } from '../html.js';
import { answerText, askRecord, decisionRecord, questionOf, type QuestionRouteOptions } from '../questions.js';
import { perClientLimit, tokenId, type RateLimiter } from '../rate-limit.js';
import { ErrorResponse, withErrors } from '../schemas/common.js';
import { AskRecord, DecisionRecord } from '../schemas/questions.js';

/**
 * The answer page, {origin}/a/<token>: a server-rendered HTML form (no JavaScript needed) for
 * the person asked, and POST {origin}/api/v1/answer/<token> for notification action buttons. The
 * signed token is the only credential: it names one question and nothing else.
 */

const Token = Type.Object({ token: Type.String({ minLength: 1, maxLength: 200 }) });

const page = (question: Question, token: string, state: { justAnswered?: boolean; problem?: string } = {}) =>
  renderQuestionPage(question, { action: `/a/${encodeURIComponent(token)}`, ...state });

export interface AnswerPageOptions extends QuestionRouteOptions {
  limiter: RateLimiter;
  ipRateLimitPerMinute: number;
}

export const answerPageRoutes =
  ({ clients, waiters, limiter, publicOrigin, ipRateLimitPerMinute }: AnswerPageOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    // Plain HTML forms post urlencoded; only these routes accept it.
    acceptFormPosts(app);
    // No key: the token is the credential, so the pages are limited per client IP and question.
    const perIp = perClientLimit(limiter, ipRateLimitPerMinute, (params) => `question:${tokenId(params.token)}`);
    const byToken = (token: string) => ({ ref: { by: { $case: 'token' as const, value: token } } });
    const read = async (token: string) => questionOf(await clients.decision.getQuestion(byToken(token)));

    /** Answers (the decision service wakes every waiter); a conflict or a bad answer comes back as the page's state. */
    async function answer(token: string, value: string): Promise<Question> {
      return questionOf(await clients.decision.answerQuestion({ ...byToken(token), answer: value }));
    }

    app.get('/a/:token', { config: { access: { public: true } }, onRequest: perIp, schema: { params: Token } }, async (request, reply) => {
      try {
        return sendFormPage(reply, 200, page(questionOf(await clients.decision.recordQuestionView({ ...byToken(request.params.token), surface: 'answer_page' })), request.params.token));
      } catch (err) {
        if (err instanceof HeraldError && err.code === 'not_found') return sendFormPage(reply, 404, renderNotFoundPage());
        throw err;
      }
    });

    app.post('/a/:token', { config: { access: { public: true } }, onRequest: perIp, schema: { params: Token } }, async (request, reply) => {
      const { token } = request.params;
      const given = (request.body as Record<string, unknown> | undefined)?.answer;
      try {
        if (typeof given !== 'string' || given === '') {
          return sendFormPage(reply, 400, page(await read(token), token, { problem: 'Choose or type an answer.' }));
        }
        return sendFormPage(reply, 200, page(await answer(token, given), token, { justAnswered: true }));
      } catch (err) {
        if (!(err instanceof HeraldError)) throw err;
        if (err.code === 'not_found') return sendFormPage(reply, 404, renderNotFoundPage());
        if (err.code === 'conflict') return sendFormPage(reply, 409, page(await read(token), token));
        if (err.code === 'forbidden') {
          return sendFormPage(reply, 403, page(await read(token), token, { problem: 'Only the approvers named for this question may answer it, and this link was not sent to one of them.' }));
        }
        if (err.code === 'invalid_request') return sendFormPage(reply, 400, page(await read(token), token, { problem: 'That answer is not one of the choices.' }));
        throw err;
      }
    });

    // Notification action buttons run in the site's service worker, on another origin: the token
    // is the credential, so any origin may call (no cookies are involved).
    const record = (question: Question) =>
      question.kind === QuestionKind.QUESTION_KIND_ASK ? askRecord(question, publicOrigin) : decisionRecord(question, publicOrigin);
    app.options('/api/v1/answer/:token', { config: { access: { public: true } }, schema: { params: Token } }, async (_request, reply) =>
      reply
        .code(204)
        .header('access-control-allow-origin', '*')
        .header('access-control-allow-methods', 'POST, OPTIONS')
        .header('access-control-allow-headers', 'content-type')
        .header('access-control-max-age', '600')
        .send(null),
    );
    app.post(
      '/api/v1/answer/:token',
      {
        config: { access: { public: true } },
        onRequest: async (request, reply) => {
          reply.header('access-control-allow-origin', '*');
          await perIp(request, reply);
        },
        schema: {
          tags: ['Decisions'],
          operationId: 'answerByToken',
          summary: 'Answer a question or decision with its answer-link token (notification action buttons)',
          params: Token,
          body: Type.Object(
            { answer: Type.Union([Type.String({ minLength: 1, maxLength: 2_000 }), Type.Boolean()], { description: 'confirm: "yes" | "no" | true | false' }) },
            { additionalProperties: false },
          ),
          response: withErrors({ 200: Type.Union([AskRecord, DecisionRecord]), 403: ErrorResponse, 409: ErrorResponse }),
        },
      },
      async (request) => record(await answer(request.params.token, answerText(request.body.answer))),
    );
  };
