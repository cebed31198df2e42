import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { HeraldError } from '@herald/errors';
import { QuestionKind, type Question } from '@herald/proto/herald/decision/v1/decision';
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';

import { acceptFormPosts, escapeHtml, PAGE_HEAD, sendFormPage } from '../html.js';
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

const shownAnswer = (question: Question) => (question.type === 'confirm' ? (question.answer === 'yes' ? 'Yes' : 'No') : question.answer);

/** What the page says instead of a form once the question is closed. */
function closedNotice(question: Question, justAnswered: boolean): string {
  const noun = question.kind === QuestionKind.QUESTION_KIND_ASK ? 'question' : 'decision';
  switch (question.status) {
    case 'answered':
      return justAnswered
        ? `Thank you. Your answer was recorded: <strong>${escapeHtml(shownAnswer(question))}</strong>.`
        : `This ${noun} was already answered: <strong>${escapeHtml(shownAnswer(question))}</strong>.`;
    case 'cancelled':
      return question.kind === QuestionKind.QUESTION_KIND_ASK ? 'This question was withdrawn; no answer is needed.' : 'This decision was cancelled; no answer is needed.';
    default:
      return `This ${noun} expired without an answer; it can no longer be answered.`;
  }
}

function controls(question: Question): string {
  const button = (value: string, label: string) => `<button type="submit" name="answer" value="${escapeHtml(value)}">${escapeHtml(label)}</button>`;
  if (question.type === 'confirm') return `<div class="choices">${button('yes', 'Yes')}${button('no', 'No')}</div>`;
  if (question.type === 'select') return `<div class="choices">${question.options.map((option) => button(option, option)).join('')}</div>`;
  return `<label for="answer">Your answer</label>
<textarea id="answer" name="answer" rows="4" maxlength="2000" required placeholder="${escapeHtml(question.placeholder)}"></textarea>
<div class="choices"><button type="submit">Send answer</button></div>`;
}

interface PageState {
  token: string;
  justAnswered?: boolean;
  problem?: string;
}

function page(question: Question, { token, justAnswered = false, problem }: PageState): string {
  const who = question.agentName || 'An agent';
  const body =
    question.status === 'pending'
      ? `${problem ? `<p class="problem" role="alert">${escapeHtml(problem)}</p>` : ''}
<form method="post" action="/a/${escapeHtml(encodeURIComponent(token))}">${controls(question)}</form>`
      : `<p class="notice" role="status">${closedNotice(question, justAnswered)}</p>`;
  return `${PAGE_HEAD}<title>${escapeHtml(who)} asks: ${escapeHtml(question.question)}</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;padding:1rem;line-height:1.5;color:#1a1a1a;background:#f6f6f6}
main{max-width:36rem;margin:0 auto;background:#fff;padding:1.25rem;border-radius:.5rem}
h1{font-size:1.35rem;margin:.25rem 0 1rem}
.who{color:#555;margin:0}
.context{white-space:pre-wrap;background:#f0f0f0;padding:.75rem;border-radius:.25rem}
.choices{display:flex;flex-wrap:wrap;gap:.5rem;margin-top:1rem}
button{font:inherit;min-height:2.75rem;padding:.5rem 1.25rem;border:2px solid #1a1a1a;border-radius:.375rem;background:#fff;cursor:pointer}
button:focus-visible,textarea:focus-visible{outline:3px solid #0b57d0;outline-offset:2px}
textarea{font:inherit;width:100%;box-sizing:border-box;padding:.5rem}
label{display:block;font-weight:600;margin-bottom:.25rem}
.problem{color:#a00000;font-weight:600}
</style>
</head>
<body>
<main>
<p class="who">${escapeHtml(who)} asks</p>
<h1>${escapeHtml(question.question)}</h1>
${question.context ? `<p class="context">${escapeHtml(question.context)}</p>` : ''}
${body}
</main>
</body>
</html>
`;
}

function notFoundPage(): string {
  return `${PAGE_HEAD}<title>Link not found</title>
</head>
<body><main><h1>This link is not valid</h1><p>Check that you opened the whole link from the notification.</p></main></body>
</html>
`;
}

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
        return sendFormPage(reply, 200, page(await read(request.params.token), { token: request.params.token }));
      } catch (err) {
        if (err instanceof HeraldError && err.code === 'not_found') return sendFormPage(reply, 404, notFoundPage());
        throw err;
      }
    });

    app.post('/a/:token', { config: { access: { public: true } }, onRequest: perIp, schema: { params: Token } }, async (request, reply) => {
      const { token } = request.params;
      const given = (request.body as Record<string, unknown> | undefined)?.answer;
      try {
        if (typeof given !== 'string' || given === '') {
          return sendFormPage(reply, 400, page(await read(token), { token, problem: 'Choose or type an answer.' }));
        }
        return sendFormPage(reply, 200, page(await answer(token, given), { token, justAnswered: true }));
      } catch (err) {
        if (!(err instanceof HeraldError)) throw err;
        if (err.code === 'not_found') return sendFormPage(reply, 404, notFoundPage());
        if (err.code === 'conflict') return sendFormPage(reply, 409, page(await read(token), { token }));
        if (err.code === 'forbidden') return sendFormPage(reply, 403, page(await read(token), { token, problem: 'Only the approvers named for this question may answer it, and this link was not sent to one of them.' }));
        if (err.code === 'invalid_request') return sendFormPage(reply, 400, page(await read(token), { token, problem: 'That answer is not one of the choices.' }));
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
