import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Answer-page tokens: `<question id>.<HMAC-SHA256(secret, id), base64url>`. Signed rather than
 * random-and-stored so every read can hand out the same link without keeping it; unguessable
 * because the MAC is. Anyone holding the link may answer, as with any emailed approval link.
 */
export class AnswerTokens {
  constructor(private readonly secret: string) {
    if (Buffer.byteLength(secret) < 32) throw new Error('ANSWER_TOKEN_SECRET must be at least 32 bytes');
  }

  private mac(id: string): string {
    return createHmac('sha256', this.secret).update(`herald.answer.${id}`).digest('base64url');
  }

  sign(id: string): string {
    return `${id}.${this.mac(id)}`;
  }

  /** The question id a token names, or undefined when it is not one this service signed. */
  verify(token: string): string | undefined {
    const dot = token.lastIndexOf('.');
    if (dot <= 0) return undefined;
    const id = token.slice(0, dot);
    // Compared as text: base64url's unused low bits would otherwise let several spellings pass.
    const given = Buffer.from(token.slice(dot + 1));
    const expected = Buffer.from(this.mac(id));
    return given.length === expected.length && timingSafeEqual(given, expected) ? id : undefined;
  }
}
