import { askingKeyLabel, escapeHtml, type AnswerChannel, type ApproverKind } from '@herald/domain';
import { QuestionKind, type Question } from '@herald/proto/herald/decision/v1/decision';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** Server-rendered pages. */

/** How every page opens: language, charset, a mobile viewport, not indexed (its URL holds a token). */
export const PAGE_HEAD = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
`;

/** The style of the sign-in pages (email link, single sign-on, passkeys): one centred column, a large primary button. */
export const SIGN_IN_PAGE_STYLE = `  :root { color-scheme: light dark; }
  body { margin: 0; min-height: 100vh; display: grid; place-items: center; padding: 1.25rem; box-sizing: border-box;
         font: 1.0625rem/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
  main { width: 100%; max-width: 28rem; }
  h1 { font-size: 1.5rem; line-height: 1.25; margin: 0 0 .75rem; }
  button { font: inherit; font-weight: 600; min-height: 3rem; padding: .75rem 1rem; border: 0;
           border-radius: .5rem; background: #1f6feb; color: #fff; cursor: pointer; }
  button:focus-visible, input:focus-visible { outline: 3px solid CanvasText; outline-offset: 3px; }`;

export { escapeHtml } from '@herald/domain';

/** Colours are site data: only a plain hex colour reaches a style sheet. */
export const accentColor = (color: string | undefined): string => (color && /^#[0-9a-fA-F]{3,8}$/.test(color) ? color : '#1f6feb');

/**
 * A page whose URL holds a token: nothing caches it, no referrer leaks it, no frame hosts it (CSP).
 * `same-origin` keeps the referrer (and a form post's Origin, which `no-referrer` turns into
 * "null") for this origin alone: for a form whose post is checked to come from this origin.
 */
export function sendTokenPage(reply: FastifyReply, status: number, html: string, contentSecurityPolicy: string, referrerPolicy: 'no-referrer' | 'same-origin' = 'no-referrer'): FastifyReply {
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('referrer-policy', referrerPolicy)
    .header('content-security-policy', contentSecurityPolicy)
    .header('x-content-type-options', 'nosniff')
    .send(html);
}

/** Lets the routes of `app` (a plugin) take plain HTML form posts (urlencoded, small). */
export function acceptFormPosts(app: FastifyInstance): void {
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 16_384 }, (_request, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });
}

/** A server-rendered page whose only action is a form posting back to this origin (no script). */
export function sendFormPage(reply: FastifyReply, status: number, html: string, referrerPolicy: 'no-referrer' | 'same-origin' = 'no-referrer'): FastifyReply {
  return sendTokenPage(reply, status, html, "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'", referrerPolicy);
}

/** A sign-in page (email link, single sign-on): a heading, a sentence and, while there is one, its button. */
export interface SignInPage {
  heading: string;
  text: string;
  /** Present while the link may be used: the button that posts it. */
  action?: string;
  /** Once signed in: where to go next. */
  next?: { href: string; text: string };
}

export function renderSignInPage({ heading, text, action, next }: SignInPage): string {
  const form = action
    ? `<form method="post" action="${escapeHtml(action)}"><button type="submit">Sign in</button></form>`
    : next
      ? `<p><a href="${escapeHtml(next.href)}">${escapeHtml(next.text)}</a></p>`
      : '';
  return `${PAGE_HEAD}<title>${escapeHtml(heading)} · Herald</title>
<style>
${SIGN_IN_PAGE_STYLE}
  button { width: 100%; }
</style>
</head>
<body>
<main>
  <h1>${escapeHtml(heading)}</h1>
  <p>${escapeHtml(text)}</p>
  ${form}
</main>
</body>
</html>
`;
}

/**
 * The page a person answers a question on (the answer page, /a/<token>; the email confirmation
 * page reuses it with its own form action): who asks, what a yes does, the time left, and the
 * form while the question is pending, or who answered and when once it is not.
 */

/** A plural in words: "1 minute", "3 minutes". */
const count = (n: number, unit: string) => `${n} ${unit}${n === 1 ? '' : 's'}`;

const UNITS: [string, number][] = [
  ['day', 86_400],
  ['hour', 3_600],
  ['minute', 60],
  ['second', 1],
];

/** Seconds as at most two whole units, largest first, seconds only under a minute: "2 days 3 hours", "14 minutes", "40 seconds". */
export function durationText(seconds: number): string {
  let rest = Math.max(0, Math.floor(seconds));
  const amounts = UNITS.map(([unit, size]) => {
    const n = Math.floor(rest / size);
    rest -= n * size;
    return [unit, n] as const;
  });
  const first = amounts.findIndex(([, n]) => n > 0);
  if (first === -1) return count(0, 'second');
  return amounts
    .slice(first, first + 2)
    .filter(([unit, n]) => n > 0 && (unit !== 'second' || first === UNITS.length - 1))
    .map(([unit, n]) => count(n, unit))
    .join(' ');
}

/** An RFC 3339 time as a <time> element, shown in UTC to the minute ("2026-11-27 17:40 UTC"). */
export const timeElement = (at: string): string => `<time datetime="${escapeHtml(at)}">${escapeHtml(`${at.slice(0, 10)} ${at.slice(11, 16)} UTC`)}</time>`;

const shownAnswer = (question: Question) => (question.type === 'confirm' ? (question.answer === 'yes' ? 'Yes' : 'No') : question.answer);

const nounOf = (question: Question) => (question.kind === QuestionKind.QUESTION_KIND_ASK ? 'question' : 'decision');

/** How an answerer's kind reads ("alice@example.com (email address)"); a link holder's name says it all. */
const KIND_WORDS: Record<ApproverKind, string> = {
  slack: 'Slack user',
  email: 'email address',
  subscriber: 'subscriber',
  key: 'API key',
  member: 'console member',
};

/** Where an answer came from. */
const CHANNEL_WORDS: Record<AnswerChannel, string> = {
  slack: 'in Slack',
  email: 'by email',
  web_push: 'from a notification',
  answer_page: 'on the answer page',
  api: 'through the API',
  console: 'in the console',
};

/** Who answered, how and when: "Answered by <strong>ops@example.com</strong> (email address), by email, at <time>." */
function answeredLine(question: Question): string {
  const at = timeElement(question.answeredAt);
  const by = question.answeredBy;
  // Answers recorded before answeredBy existed say only when.
  if (!by) return `Answered at ${at}.`;
  const kind = by.kind === 'link' ? '' : ` (${escapeHtml((KIND_WORDS as Record<string, string>)[by.kind] ?? by.kind)})`;
  const channel = (CHANNEL_WORDS as Record<string, string>)[by.channel] ?? by.channel;
  return `Answered by <strong>${escapeHtml(by.displayName || by.id)}</strong>${kind}, ${escapeHtml(channel)}, at ${at}.`;
}

/** What the page says instead of a form once the question is closed. */
function closedNotice(question: Question, justAnswered: boolean): string {
  switch (question.status) {
    case 'answered': {
      const answer = `<strong>${escapeHtml(shownAnswer(question))}</strong>`;
      const said = justAnswered ? `Thank you. Your answer was recorded: ${answer}.` : `This ${nounOf(question)} was already answered: ${answer}.`;
      return `<p class="notice" role="status">${said}</p>\n<p class="answered">${answeredLine(question)}</p>`;
    }
    case 'cancelled':
      return `<p class="notice" role="status">${question.kind === QuestionKind.QUESTION_KIND_ASK ? 'This question was withdrawn; no answer is needed.' : 'This decision was cancelled; no answer is needed.'}</p>`;
    default:
      return `<p class="notice" role="status">This ${nounOf(question)} expired without an answer; it can no longer be answered.</p>`;
  }
}

/** The choices: the safe one (No) first in tab order, both the same weight, none focused by default. */
function controls(question: Question): string {
  const button = (value: string, label: string) => `<button type="submit" name="answer" value="${escapeHtml(value)}">${escapeHtml(label)}</button>`;
  if (question.type === 'confirm') return `<div class="choices">${button('no', 'No')}${button('yes', 'Yes')}</div>`;
  if (question.type === 'select') return `<div class="choices">${question.options.map((option) => button(option, option)).join('')}</div>`;
  return `<label for="answer">Your answer</label>
<textarea id="answer" name="answer" rows="4" maxlength="2000" required placeholder="${escapeHtml(question.placeholder)}"></textarea>
<div class="choices"><button type="submit">Send answer</button></div>`;
}

/** What the decision is bound to (its tool, target and parameters): what a yes will do. */
function binding(question: Question): string {
  const parameters = question.parametersJson === '' ? {} : (JSON.parse(question.parametersJson) as Record<string, unknown>);
  const rows = [
    ...(question.toolName ? [['Tool', question.toolName]] : []),
    ...(question.toolTarget ? [['Target', question.toolTarget]] : []),
  ].map(([term, value]) => `<dt>${term}</dt><dd><code>${escapeHtml(value!)}</code></dd>`);
  // By name: PostgreSQL's jsonb keeps no order of its own.
  const parameterRows = Object.entries(parameters)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(
    ([name, value]) => `<dt><code>${escapeHtml(name)}</code></dt><dd><code>${escapeHtml(typeof value === 'string' ? value : JSON.stringify(value))}</code></dd>`,
  );
  if (rows.length === 0 && parameterRows.length === 0) return '';
  return `<section class="binding" aria-labelledby="binding">
<h2 id="binding">What a yes does</h2>
${rows.length > 0 ? `<dl>${rows.join('')}</dl>` : ''}
${parameterRows.length > 0 ? `<h3>Parameters</h3>\n<dl class="parameters">${parameterRows.join('')}</dl>` : ''}
</section>`;
}

export interface QuestionPageState {
  /** Where the form posts (the answer page: /a/<token>). */
  action: string;
  justAnswered?: boolean;
  problem?: string;
}

export function renderQuestionPage(question: Question, { action, justAnswered = false, problem }: QuestionPageState): string {
  const agent = question.agentName || 'An agent';
  const body =
    question.status === 'pending'
      ? `<p class="time">Time left: <strong>${escapeHtml(durationText(question.expiresInSeconds))}</strong> (until ${timeElement(question.expiresAt)}).</p>
${problem ? `<p class="problem" role="alert">${escapeHtml(problem)}</p>` : ''}
<form method="post" action="${escapeHtml(action)}">${controls(question)}</form>`
      : closedNotice(question, justAnswered);
  return `${PAGE_HEAD}<title>${escapeHtml(agent)} asks: ${escapeHtml(question.question)}</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;padding:1rem;line-height:1.5;color:#1a1a1a;background:#f6f6f6}
main{max-width:36rem;margin:0 auto;background:#fff;padding:1.25rem;border-radius:.5rem;overflow-wrap:anywhere}
h1{font-size:1.35rem;margin:.25rem 0 1rem}
h2{font-size:1.05rem;margin:1.25rem 0 .5rem}
h3{font-size:1rem;margin:.75rem 0 .25rem}
.who{color:#4a4a4a;margin:0}
.context{white-space:pre-wrap;background:#f0f0f0;padding:.75rem;border-radius:.25rem}
dl{display:grid;grid-template-columns:minmax(0,max-content) minmax(0,1fr);gap:.25rem .75rem;margin:0}
dt{font-weight:600}
dd{margin:0}
code{font-family:ui-monospace,monospace;font-size:.95em;white-space:pre-wrap;overflow-wrap:anywhere}
.parameters{background:#f0f0f0;padding:.75rem;border-radius:.25rem}
.choices{display:flex;flex-wrap:wrap;gap:.75rem;margin-top:1rem}
.choices button{flex:1 1 8rem}
button{font:inherit;min-height:2.75rem;padding:.5rem 1.25rem;border:2px solid #1a1a1a;border-radius:.375rem;background:#fff;color:#1a1a1a;cursor:pointer}
button:focus-visible,textarea:focus-visible{outline:3px solid #0b57d0;outline-offset:2px}
textarea{font:inherit;width:100%;box-sizing:border-box;padding:.5rem}
label{display:block;font-weight:600;margin-bottom:.25rem}
.problem{color:#a00000;font-weight:600}
</style>
</head>
<body>
<main>
<p class="who">${escapeHtml(agent)} asks, with key <code>${escapeHtml(askingKeyLabel(question.keyId, question.keyName))}</code></p>
<h1>${escapeHtml(question.question)}</h1>
${question.context ? `<p class="context">${escapeHtml(question.context)}</p>` : ''}
${binding(question)}
${body}
</main>
</body>
</html>
`;
}

export function renderNotFoundPage(): string {
  return `${PAGE_HEAD}<title>Link not found</title>
</head>
<body><main><h1>This link is not valid</h1><p>Check that you opened the whole link from the notification.</p></main></body>
</html>
`;
}
