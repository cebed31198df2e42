import { createHash } from 'node:crypto';

/**
 * Who may answer a question, who did, and the record of what happened to it: the facts the
 * decision service, the gateway and the operator CLI (which verifies a question's record) agree on.
 */

/** Who may be named an approver: a Slack user, an email address, a subscriber's externalId, an API key, a console member. */
export const APPROVER_KINDS = ['slack', 'email', 'subscriber', 'key', 'member'] as const;
export type ApproverKind = (typeof APPROVER_KINDS)[number];

/** Who answered: an approver kind, or `link`, the holder of an answer link that names no recipient. */
export type AnswererKind = ApproverKind | 'link';

/** Where an answer came from. */
export const ANSWER_CHANNELS = ['slack', 'email', 'web_push', 'answer_page', 'api', 'console'] as const;
export type AnswerChannel = (typeof ANSWER_CHANNELS)[number];

/** The channels a question (or an escalation step) may be delivered on. */
export const DELIVERY_CHANNELS = ['web_push', 'slack', 'email'] as const;

export interface Approver {
  kind: string;
  id: string;
}

/** The limits on what a question may name (checked at the edge and again by the decision service). */
export const MAX_APPROVERS = 20;
export const MAX_ESCALATION_STEPS = 5;
export const MAX_APPROVER_ID_LENGTH = 320;

/** An approver as stored and compared: email addresses lower-cased, everything else as given. */
export function normalizedApprover({ kind, id }: Approver): Approver {
  return { kind, id: kind === 'email' ? id.trim().toLowerCase() : id.trim() };
}

/** Whether `who` is one of `approvers` (both normalized here). */
export function isApprover(approvers: readonly Approver[], who: Approver): boolean {
  const candidate = normalizedApprover(who);
  return approvers.some((approver) => {
    const named = normalizedApprover(approver);
    return named.kind === candidate.kind && named.id === candidate.id;
  });
}

/** One entry of a question's record, as hashed (the stored row without its hashes). */
export interface QuestionEventEntry {
  questionId: string;
  seq: number;
  kind: string;
  /** ISO 8601 with milliseconds. */
  at: string;
  actor: Record<string, unknown> | null;
  detail: Record<string, unknown>;
}

/** JSON with object keys sorted at every level: the same text whatever order a store (jsonb) keeps them in. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, field]) => field !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, field]) => `${JSON.stringify(key)}:${canonicalJson(field)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * An entry's hash: SHA-256 (hex) over the previous entry's hash ('' for the first) and the entry's
 * canonical JSON. Changing, removing or reordering an entry breaks every hash after it.
 */
export function questionEventHash(prevHash: string, entry: QuestionEventEntry): string {
  return createHash('sha256').update(prevHash).update('\n').update(canonicalJson(entry)).digest('hex');
}
