import { createHash } from 'node:crypto';

import { askingKeyLabel, emailChoices, emailLinkUrl, escapeHtml, type EmailChoice } from '@herald/domain';
import type { MailSender, Message } from '@herald/mail';

import type { Channel } from './deliveries.js';
import type * as store from './store.js';
import type { AnswerTokens } from './tokens.js';

/**
 * The email channel: one message per approver address (a delivery's target), through the one
 * mail sender (@herald/mail, SMTP). It says what the question is, what a yes is bound to (tool,
 * target, parameters), who asks and until when, and carries one link per answer
 * ({PUBLIC_ORIGIN}/e/<token>, signed for the question, the address and the answer). A link opens
 * a confirmation page; only the POST from that page answers (mail scanners fetch links).
 *
 * Delivered at least once: the delivery row is marked delivered right after the SMTP server
 * accepts the message, so a replica that dies between the two sends it again after the lease.
 * The second copy carries the same Message-ID (derived from the delivery key), which mail
 * clients and many servers use to show it once; its links are the same links, single use.
 */

/** The longest subject sent: the question is cut there (the whole question is in the body). */
const SUBJECT_LENGTH = 120;

const subjectOf = (question: store.QuestionRow): string => {
  const subject = `${question.agent_name || 'An agent'} asks: ${question.question}`;
  return subject.length <= SUBJECT_LENGTH ? subject : `${subject.slice(0, SUBJECT_LENGTH - 1)}…`;
};

/** The facts under the question, as label/value pairs (empty ones left out). */
function factsOf(question: store.QuestionRow): Array<[string, string]> {
  const facts: Array<[string, string]> = [];
  if (question.tool_name) facts.push(['Tool', question.tool_name]);
  if (question.tool_target) facts.push(['Target', question.tool_target]);
  if (question.parameters !== null) facts.push(['Parameters', JSON.stringify(question.parameters, null, 2)]);
  facts.push(['Asked by', question.agent_name || 'an agent (no name given)']);
  facts.push(['With key', askingKeyLabel(question.key_id, question.key_name)]);
  facts.push(['Expires', `${question.expires_at.toISOString().replace(/\.\d+Z$/, 'Z')} (UTC)`]);
  return facts;
}

const FOOTER = 'Each link opens a page where you confirm your answer, and answers once. It stops working when the question expires or is answered. Do not forward this message: its links answer as you.';

/** The message to one address; `links` are its answer links, in the order of emailChoices. */
function questionMessage(question: store.QuestionRow, address: string, links: Array<EmailChoice & { url: string }>, messageId: string): Message {
  const facts = factsOf(question);
  const text = [
    `${question.agent_name || 'An agent'} asks:`,
    '',
    question.question,
    ...(question.context ? ['', question.context] : []),
    '',
    ...facts.map(([label, value]) => `${label}: ${value.includes('\n') ? `\n${value}` : value}`),
    '',
    ...links.map(({ label, url }) => `${label}: ${url}`),
    '',
    FOOTER,
    '',
  ].join('\n');
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(subjectOf(question))}</title></head>
<body style="margin:0;padding:16px;background:#f6f6f6;font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1a1a1a;line-height:1.5">
<div style="max-width:36rem;margin:0 auto;background:#ffffff;padding:20px;border-radius:8px">
<p style="margin:0;color:#555555">${escapeHtml(question.agent_name || 'An agent')} asks</p>
<h1 style="font-size:22px;line-height:1.3;margin:4px 0 16px">${escapeHtml(question.question)}</h1>
${question.context ? `<p style="white-space:pre-wrap;background:#f0f0f0;padding:12px;border-radius:4px">${escapeHtml(question.context)}</p>\n` : ''}<table role="presentation" style="border-collapse:collapse;margin:0 0 16px">
${facts
  .map(
    ([label, value]) =>
      `<tr><th scope="row" style="text-align:left;vertical-align:top;padding:2px 12px 2px 0;font-weight:600">${escapeHtml(label)}</th><td style="padding:2px 0">${
        value.includes('\n') ? `<pre style="margin:0;white-space:pre-wrap;font-size:13px">${escapeHtml(value)}</pre>` : escapeHtml(value)
      }</td></tr>`,
  )
  .join('\n')}
</table>
<p>${links
    .map(
      ({ label, url }) =>
        `<a href="${escapeHtml(url)}" style="display:inline-block;margin:0 8px 8px 0;padding:10px 18px;border:2px solid #1a1a1a;border-radius:6px;color:#1a1a1a;text-decoration:none;font-weight:600">${escapeHtml(label)}</a>`,
    )
    .join('')}</p>
<p style="color:#555555;font-size:13px">${escapeHtml(FOOTER)}</p>
</div>
</body></html>
`;
  return { to: address, subject: subjectOf(question), text, html, messageId };
}

/** The Message-ID (without its angle brackets) of a delivery key: the same for every attempt of one delivery. */
const messageIdOf = (key: string, publicOrigin: string): string => `${createHash('sha256').update(key).digest('hex').slice(0, 32)}@${new URL(publicOrigin).hostname}`;

export interface EmailChannelDeps {
  mail: MailSender;
  tokens: AnswerTokens;
  publicOrigin: string;
}

/** The email Channel: target is the approver's address (lower-cased). */
export function emailChannel({ mail, tokens, publicOrigin }: EmailChannelDeps): Channel {
  return {
    async deliver(question, address, key) {
      const links = emailChoices(question.type, question.options).map((choice) => ({ ...choice, url: emailLinkUrl(publicOrigin, tokens.sign(question.id, { kind: 'email', id: address }, choice.choice)) }));
      const messageId = messageIdOf(key, publicOrigin);
      try {
        await mail.send(questionMessage(question, address, links, `<${messageId}>`));
      } catch (err) {
        // A permanent refusal (5xx: no such mailbox, relay denied) will not change: failed for good.
        // Anything else (4xx, the server unreachable) is thrown and tried again after a backoff.
        const code = (err as { responseCode?: unknown }).responseCode;
        if (typeof code === 'number' && code >= 500) return { state: 'failed', error: `the mail server refused it: ${code}` };
        throw err;
      }
      // The result is the Message-ID: what finds the message in the server's log or a mailbox.
      return { state: 'delivered', result: messageId, reached: 1 };
    },
  };
}
