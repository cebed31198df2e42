import { HeraldError } from '@herald/errors';

/** What the gateway (its /ask records, the MCP tools) and the decision service (its ask webhooks) say alike about a question put with POST /ask. */

/** A question's stored state (pending past its expiry reads as expired). */
export type QuestionStatus = 'pending' | 'answered' | 'cancelled' | 'expired';
/** The same, as /ask names it: a withdrawn ask, an expired one timed out. */
export type AskStatus = 'pending' | 'answered' | 'withdrawn' | 'timeout';

export function askStatusOf(status: QuestionStatus): AskStatus {
  if (status === 'cancelled') return 'withdrawn';
  if (status === 'expired') return 'timeout';
  return status;
}

/** The state an /ask status names (what GET /ask?status= filters on). */
export function questionStatusOfAsk(status: AskStatus): QuestionStatus {
  if (status === 'withdrawn') return 'cancelled';
  if (status === 'timeout') return 'expired';
  return status;
}

/** A question's answer page, served by the gateway, for its signed token. */
export const answerPageUrl = (publicOrigin: string, answerToken: string): string => `${publicOrigin}/a/${answerToken}`;

/** A question in the console's inbox (a member's web push opens it; the member answers there, signed in). */
export const consoleQuestionUrl = (publicOrigin: string, questionId: string): string => `${publicOrigin}/console/inbox?question=${encodeURIComponent(questionId)}`;

/** An email answer link (the email channel): its page, served by the gateway, confirms before it answers. */
export const emailLinkUrl = (publicOrigin: string, linkToken: string): string => `${publicOrigin}/e/${linkToken}`;

/** One answer an email offers: its words and the answer it gives ('' for an input question: its page has a text field). */
export interface EmailChoice {
  label: string;
  choice: string;
}

/** The answers an email offers, one link each: confirm as Approve / Reject, select one per option, input one page with a text field. */
export function emailChoices(type: string, options: readonly string[]): EmailChoice[] {
  if (type === 'confirm') {
    return [
      { label: 'Approve', choice: 'yes' },
      { label: 'Reject', choice: 'no' },
    ];
  }
  if (type === 'select') return options.map((option) => ({ label: option, choice: option }));
  return [{ label: 'Write an answer', choice: '' }];
}

/** Where a notification's action buttons post the answer (the service worker, no key). */
/**
 * The API key a question was opened with, as the people it reaches see it beside the asking agent:
 * its name and id ("deploy-bot (k_2Yd…)"), or the id alone when the question predates key names.
 */
export const askingKeyLabel = (keyId: string, keyName: string | null | undefined): string => (keyName ? `${keyName} (${keyId})` : keyId);

export const answerActionUrl = (publicOrigin: string, answerToken: string): string => `${publicOrigin}/api/v1/answer/${answerToken}`;

/** The hint of an ask that expired unanswered. */
export const ASK_EXPIRED_HINT = 'Nobody answered before the question expired; treat it as not approved. Ask again if it still matters.';

/** The hint of an ask whose wait ran out while it is still open; `next` says how to keep waiting or give up (REST or MCP words). */
export const askStillOpenHint = (expiresInSeconds: number, next: string): string => `No answer yet. The question stays open for ${expiresInSeconds} more seconds: ${next}.`;

/** A Partner workspace reaches people through POST /decisions (the spec's rule). */
export function partnerDecisionRequired(): HeraldError {
  return new HeraldError('partner_decision_required', 'Partner workspaces cannot use /ask; open a decision with POST /decisions instead.', {
    title: 'Use POST /decisions',
    hint: 'POST /api/v1/server/decisions addresses the owner, the team or one of your end-users, and waits the same way.',
  });
}
