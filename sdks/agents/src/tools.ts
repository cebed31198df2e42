import { ValidationError, type AskRecord, type Herald, type SendResult } from '@herald/sdk';
import { z } from 'zod';

import { askBounds, askFields, sendBounds, sendFields } from './fields.gen.js';

/**
 * The two tools agents need, named and shaped as Herald's MCP tools (gateway/src/mcp/tools.ts), so
 * an agent behaves the same through MCP or a framework adapter. Each adapter wraps these in its
 * framework's own tool type; the calls go through the server SDK.
 */

/**
 * The fields the API takes are bounded as the API bounds them (fields.gen.ts, generated from the
 * OpenAPI document); as the MCP tool, body and context together fit a notification's body.
 */
const SEND_BODY_MAX = sendBounds.body.maxLength;
const MAX_WAIT_MS = askBounds.timeoutSeconds.maximum * 1_000;

export const SEND_NOTIFICATION = {
  name: 'send_notification',
  description:
    'Send a push notification to the person: their phone app and the browsers subscribed to this workspace. Use it to tell them something that needs no answer (a long task finished, a build failed). ' +
    'Returns {success, status: "queued", campaignId, sent, limits}. To get an answer, use ask_user instead.',
  inputSchema: z
    .object({
      title: sendFields.title.describe('The headline, e.g. "Deploy finished"'),
      body: sendFields.body.describe('The message'),
      url: sendFields.url.optional().describe('http(s) link opened when the notification is tapped'),
      context: z.string().min(1).max(2_000).optional().describe('More detail; appended to the body after a blank line (body and context together at most 2,048 characters)'),
    })
    .strict(),
} as const;

export const ASK_USER = {
  name: 'ask_user',
  description:
    'Ask the person a question and wait for the answer. Fail closed: only an explicit "yes" to a confirm question approves; no answer is never approval. ' +
    'type: "confirm" (yes/no, the default), "select" (one of 2-20 options) or "input" (free text). ' +
    'With wait (the default) the call returns when they answer or after timeoutMs (default 30,000, at most 55,000). ' +
    'Result: {correlationId, status: "answered" | "pending" | "timeout" | "withdrawn", answered, value, answeredBy, liveUrl, ...}; value is the answer ("yes"/"no" for confirm), answeredBy who gave it ({kind, id, displayName, channel, at}). ' +
    'approvers: only these people may answer ([{kind: "email" | "slack" | "subscriber" | "key" | "member", id}]); escalation: more channels and approvers while it stays unanswered.',
  inputSchema: z
    .object({
      question: askFields.question.describe('What the person is asked'),
      type: askFields.type.optional().describe('confirm (default), select or input'),
      options: askFields.options.optional().describe('The choices (select only)'),
      context: askFields.context.optional().describe('Background shown with the question'),
      placeholder: askFields.placeholder.optional().describe('Hint inside the text field (input)'),
      agentName: askFields.agentName.optional().describe('Who is asking, shown to the person'),
      approvers: askFields.approvers
        .optional()
        .describe('Who may answer. When named, an answer from anyone else is refused (403); each is delivered the question on their channel.'),
      escalation: askFields.escalation
        .optional()
        .describe('While the question stays unanswered, deliver it at each step to more channels and approvers (never extends its lifetime)'),
      wait: z.boolean().optional().describe('false: return at once with status "pending" and the correlationId'),
      timeoutMs: z.number().int().min(1).max(MAX_WAIT_MS).optional().describe('How long to wait for the answer, in milliseconds (rounded up to whole seconds)'),
    })
    .strict(),
} as const;

export type SendNotificationInput = z.infer<typeof SEND_NOTIFICATION.inputSchema>;
export type AskUserInput = z.infer<typeof ASK_USER.inputSchema>;

/** What send_notification does: one POST /send (never retried). */
export function sendNotification(herald: Herald, { title, body, url, context }: SendNotificationInput, signal?: AbortSignal): Promise<SendResult> {
  const text = context === undefined ? body : `${body}\n\n${context}`;
  if (text.length > SEND_BODY_MAX) {
    // The MCP tool's answer for the same arguments: a 400 naming the argument.
    const problem = `makes the body longer than ${SEND_BODY_MAX} characters`;
    throw new ValidationError(400, { error: 'Invalid arguments', code: 'invalid_request', status: 400, fields: [{ field: 'context', in: 'arguments', problem }] });
  }
  return herald.send({ title, body: text, ...(url === undefined ? {} : { url }) }, { signal });
}

/** What ask_user does: POST /ask, holding for the answer up to timeoutMs (default 30 s) unless wait is false. */
export function askUser(herald: Herald, { wait, timeoutMs, ...question }: AskUserInput, signal?: AbortSignal): Promise<AskRecord> {
  if (wait === false) return herald.ask({ ...question, wait: false }, { signal });
  return herald.askAndWait(question, { totalTimeoutMs: timeoutMs ?? 30_000, signal });
}
