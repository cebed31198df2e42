import { createHmac, timingSafeEqual } from 'node:crypto';

import type { Approver } from '@herald/domain';

/**
 * Answer-page tokens: `<question id>.<MAC>`, or `<question id>.<recipient>.<MAC>` for a link
 * delivered to one person (a subscriber's devices, one email address), so that an answer through
 * it says who answered. The recipient is `<kind>:<id>` in base64url; the MAC is HMAC-SHA256(secret)
 * over everything before it. Signed rather than random-and-stored so every read can hand out the
 * same link without keeping it; unguessable because the MAC is.
 */
export interface VerifiedToken {
  questionId: string;
  /** Whom the link was delivered to; absent: whoever holds it. */
  recipient?: Approver;
}

export class AnswerTokens {
  constructor(private readonly secret: string) {
    if (Buffer.byteLength(secret) < 32) throw new Error('ANSWER_TOKEN_SECRET must be at least 32 bytes');
  }

  private mac(payload: string): string {
    return createHmac('sha256', this.secret).update(`herald.answer.${payload}`).digest('base64url');
  }

  sign(questionId: string, recipient?: Approver): string {
    const payload = recipient ? `${questionId}.${Buffer.from(`${recipient.kind}:${recipient.id}`).toString('base64url')}` : questionId;
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
    const [questionId = '', encoded] = payload.split('.', 2);
    if (encoded === undefined) return { questionId };
    const recipient = Buffer.from(encoded, 'base64url').toString();
    const colon = recipient.indexOf(':');
    return { questionId, recipient: { kind: recipient.slice(0, colon), id: recipient.slice(colon + 1) } };
  }
}
