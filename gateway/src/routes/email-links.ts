import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { emailChoices } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import { QuestionKind, type EmailLink, type Question } from '@herald/proto/herald/decision/v1/decision';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';

import type { ServiceClients } from '../clients.js';
import { acceptFormPosts, escapeHtml, PAGE_HEAD, sendFormPage } from '../html.js';
import { questionOf } from '../questions.js';
import { perClientLimit, tokenId, type RateLimiter } from '../rate-limit.js';
import { assertSameOrigin } from '../sessions.js';

/**
 * An email answer link, {origin}/e/<token> (the email channel of the decision service mails one
 * per answer). The signed token names the question, the recipient's address and the answer.
 *   GET  /e/<token>  a confirmation page ("Approve 'Deploy 4.2'?" and a Confirm button). It changes
 *                    nothing but the question's record (a `viewed` event): mail scanners fetch links.
 *   POST /e/<token>  from that page only (Origin / Sec-Fetch-Site): answers as the address, once.
 * A browser (Accept: text/html) gets a readable page for every outcome; any other caller gets the
 * error shape: a forged link 404, a used link 409, a closed question 409, a cross-site post or an
 * address no longer among the approvers 403.
 */

const Token = Type.Object({ token: Type.String({ minLength: 1, maxLength: 1_000 }) });

const STYLE = `body{font-family:system-ui,sans-serif;margin:0;padding:1rem;line-height:1.5;color:#1a1a1a;background:#f6f6f6}
main{max-width:36rem;margin:0 auto;background:#fff;padding:1.25rem;border-radius:.5rem}
h1{font-size:1.35rem;margin:.25rem 0 1rem}
.who{color:#555;margin:0}
.context{white-space:pre-wrap;background:#f0f0f0;padding:.75rem;border-radius:.25rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem .75rem;margin:0 0 1rem}
dt{font-weight:600}dd{margin:0}pre{margin:0;white-space:pre-wrap;font-size:.875rem}
button{font:inherit;font-weight:600;min-height:2.75rem;padding:.5rem 1.25rem;border:2px solid #1a1a1a;border-radius:.375rem;background:#fff;cursor:pointer;margin-top:1rem}
button:focus-visible,textarea:focus-visible{outline:3px solid #0b57d0;outline-offset:2px}
textarea{font:inherit;width:100%;box-sizing:border-box;padding:.5rem}
label{display:block;font-weight:600;margin-bottom:.25rem}
.problem{color:#a00000;font-weight:600}`;

function shell(title: string, body: string): string {
  return `${PAGE_HEAD}<title>${escapeHtml(title)}</title>
<style>
${STYLE}
</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;
}

/** What the question is and what a yes is bound to. */
function summary(question: Question): string {
  const facts: Array<[string, string]> = [];
  if (question.toolName) facts.push(['Tool', question.toolName]);
  if (question.toolTarget) facts.push(['Target', question.toolTarget]);
  if (question.parametersJson) facts.push(['Parameters', JSON.stringify(JSON.parse(question.parametersJson), null, 2)]);
  facts.push(['Expires', `${question.expiresAt.replace(/\.\d+Z$/, 'Z')} (UTC)`]);
  return `<p class="who">${escapeHtml(question.agentName || 'An agent')} asks</p>
<h1>${escapeHtml(question.question)}</h1>
${question.context ? `<p class="context">${escapeHtml(question.context)}</p>\n` : ''}<dl>${facts.map(([label, value]) => `<dt>${escapeHtml(label)}</dt><dd>${label === 'Parameters' ? `<pre>${escapeHtml(value)}</pre>` : escapeHtml(value)}</dd>`).join('')}</dl>`;
}

const labelOf = (question: Question, choice: string): string => emailChoices(question.type, question.options).find((option) => option.choice === choice)?.label ?? choice;

/** The confirmation page of a usable link: one button (a choice link) or a text field (an input link). */
function confirmPage(question: Question, link: EmailLink, token: string, problem?: string): string {
  const action = `/e/${escapeHtml(encodeURIComponent(token))}`;
  const heading = link.choice ? `${labelOf(question, link.choice)} '${question.question}'?` : `Answer '${question.question}'`;
  const form = link.choice
    ? `<form method="post" action="${action}"><button type="submit">Confirm: ${escapeHtml(labelOf(question, link.choice))}</button></form>`
    : `<form method="post" action="${action}"><label for="answer">Your answer</label>
<textarea id="answer" name="answer" rows="4" maxlength="2000" required placeholder="${escapeHtml(question.placeholder)}"></textarea>
<button type="submit">Send answer</button></form>`;
  return shell(heading, `${summary(question)}
${problem ? `<p class="problem" role="alert">${escapeHtml(problem)}</p>\n` : ''}<p><strong>${escapeHtml(heading)}</strong> You answer as ${escapeHtml(link.address)}.</p>
${form}`);
}

/** A page that only says something (the link cannot answer, or it just did). */
const noticePage = (heading: string, text: string): string => shell(heading, `<h1>${escapeHtml(heading)}</h1>\n<p role="status">${escapeHtml(text)}</p>`);

function closedText(question: Question): string {
  const noun = question.kind === QuestionKind.QUESTION_KIND_ASK ? 'question' : 'decision';
  if (question.status === 'answered') {
    const by = question.answeredBy?.displayName;
    return `This ${noun} was already answered${by ? ` by ${by}` : ''}: ${labelOf(question, question.answer)}.`;
  }
  if (question.status === 'cancelled') return `This ${noun} was withdrawn; no answer is needed.`;
  return `This ${noun} expired without an answer; it can no longer be answered.`;
}

/** The decision service's refusal of a link already used (a conflict with reason link_used). */
const linkUsed = (err: HeraldError): boolean => err.code === 'conflict' && err.extra.reason === 'link_used';

/** The page a browser gets for an error of the decision service (the error shape for anyone else). */
function errorPage(err: HeraldError): { status: number; html: string } {
  if (err.code === 'not_found') return { status: 404, html: noticePage('This link is not valid', 'Check that you opened the whole link from the email.') };
  if (err.code === 'forbidden') return { status: 403, html: noticePage('You cannot answer this', 'Your address is no longer among the people who may answer this question.') };
  if (linkUsed(err)) return { status: 409, html: noticePage('This link was already used', 'Each email link answers once; your answer was recorded.') };
  return { status: err.status, html: noticePage('Something went wrong', err.message) };
}

const wantsPage = (request: FastifyRequest): boolean => (request.headers.accept ?? '').includes('text/html');

export interface EmailLinkOptions {
  clients: ServiceClients;
  publicOrigin: string;
  limiter: RateLimiter;
  ipRateLimitPerMinute: number;
}

export const emailLinkRoutes =
  ({ clients, publicOrigin, limiter, ipRateLimitPerMinute }: EmailLinkOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    acceptFormPosts(app);
    // No key: the token is the credential, so the pages are limited per client IP and link.
    const perIp = perClientLimit(limiter, ipRateLimitPerMinute, (params) => `email-link:${tokenId(params.token)}`);
    const byToken = (token: string) => ({ ref: { by: { $case: 'token' as const, value: token } } });

    /** An error as a page for a browser, or thrown (the error shape) for any other caller. */
    function failed(request: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
      if (!(err instanceof HeraldError) || !wantsPage(request)) throw err;
      const { status, html } = errorPage(err);
      return sendFormPage(reply, status, html);
    }

    // Its post must carry this origin as Origin: the page keeps its referrer on this origin.
    app.get('/e/:token', { config: { access: { public: true } }, onRequest: perIp, schema: { params: Token } }, async (request, reply) => {
      const { token } = request.params;
      try {
        const { question, emailLink } = await clients.decision.recordQuestionView({ ...byToken(token), surface: 'email_link' });
        const shown = questionOf({ question });
        if (!emailLink) throw new Error('decision service returned no email link');
        if (emailLink.used) throw new HeraldError('conflict', 'This link was already used: each email link answers once.', { title: 'Link already used', extra: { reason: 'link_used' } });
        if (shown.status !== 'pending') return sendFormPage(reply, 200, noticePage('Nothing to answer', closedText(shown)));
        return sendFormPage(reply, 200, confirmPage(shown, emailLink, token), 'same-origin');
      } catch (err) {
        return failed(request, reply, err);
      }
    });

    app.post('/e/:token', { config: { access: { public: true } }, onRequest: perIp, schema: { params: Token } }, async (request, reply) => {
      const { token } = request.params;
      try {
        // Only this origin's page may post it: another site cannot make a reader answer.
        assertSameOrigin(request, publicOrigin);
        const given = (request.body as Record<string, unknown> | undefined)?.answer;
        const answered = questionOf(await clients.decision.answerQuestion({ ...byToken(token), answer: typeof given === 'string' ? given : '' }));
        return sendFormPage(reply, 200, noticePage('Thank you', `Your answer was recorded: ${labelOf(answered, answered.answer)}.`));
      } catch (err) {
        if (err instanceof HeraldError && err.code === 'conflict' && !linkUsed(err) && wantsPage(request)) {
          const { question } = await clients.decision.getQuestion(byToken(token));
          return sendFormPage(reply, 409, noticePage('Nothing to answer', closedText(questionOf({ question }))));
        }
        return failed(request, reply, err);
      }
    });
  };
