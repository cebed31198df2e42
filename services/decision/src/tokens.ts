import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';

import type { Approver } from '@herald/domain';

/**
 * Answer-page tokens: `<question id>.<MAC>`, or `<question id>.<recipient>.<MAC>` for a link
 * delivered to one person (a subscriber's devices, one email address), so that an answer through
 * it says who answered, or `<question id>.<recipient>.<choice>.<MAC>` for an email answer link,
 * which names the answer it gives and answers once. The recipient is `<kind>:<id>` and the choice
 * `c:<answer>` (empty for an input question's link), each in base64url; the MAC is
 * HMAC-SHA256(secret) over everything before it. Signed rather than random-and-stored so every
 * read can hand out the same link without keeping it; unguessable because the MAC is.
 */
export interface VerifiedToken {
  questionId: string;
  /** Whom the link was delivered to; absent: whoever holds it. */
  recipient?: Approver;
  /** An email answer link's answer ('' for an input question's: its page has a text field); absent for any other link. */
  choice?: string;
}

const CHOICE_PREFIX = 'c:';
const encode = (text: string): string => Buffer.from(text).toString('base64url');
const decode = (text: string): string => Buffer.from(text, 'base64url').toString();

export class AnswerTokens {
  /** A KeyObject, not the string: Node 24 brand-checks a raw key on every HMAC (about 15 µs each). */
  private readonly key: KeyObject;

  constructor(secret: string) {
    if (Buffer.byteLength(secret) < 32) throw new Error('ANSWER_TOKEN_SECRET must be at least 32 bytes');
    this.key = createSecretKey(secret, 'utf8');
  }

  private mac(payload: string): string {
    return createHmac('sha256', this.key).update(`herald.answer.${payload}`).digest('base64url');
  }

  sign(questionId: string, recipient?: Approver, choice?: string): string {
    const parts = [questionId];
    if (recipient) parts.push(encode(`${recipient.kind}:${recipient.id}`));
    if (recipient && choice !== undefined) parts.push(encode(`${CHOICE_PREFIX}${choice}`));
    const payload = parts.join('.');
    return `${payload}.${this.mac(payload)}`;
  }

  /** What a token names, or undefined when it is not one this service signed. */
  verify(token: string): VerifiedToken | undefined {
    const dot = token.lastIndexOf('.');
    if (dot <= 0) return undefined;
    const payload = token.slice(0, dot);
    // Compared as text: base64url's unused low bits would otherwise let several spellings pass.
    const given = Buffer.from(token.slice(dot + 1));
    const expected = Buffer.from(this.mac(payload));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    const [questionId = '', recipientPart, choicePart, ...rest] = payload.split('.');
    if (rest.length > 0) return undefined;
    if (recipientPart === undefined) return { questionId };
    const recipient = decode(recipientPart);
    const colon = recipient.indexOf(':');
    const verified: VerifiedToken = { questionId, recipient: { kind: recipient.slice(0, colon), id: recipient.slice(colon + 1) } };
    if (choicePart === undefined) return verified;
    const choice = decode(choicePart);
    return choice.startsWith(CHOICE_PREFIX) ? { ...verified, choice: choice.slice(CHOICE_PREFIX.length) } : undefined;
  }
}
