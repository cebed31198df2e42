import { backoffMs, type BackoffOptions } from '@herald/backoff';
import { withEngagementToken, type EngagementTokens } from '@herald/domain';
import { classifyResponse, encrypt, PushNetworkError, type PushClient, type Urgency, type VapidKeys, type VapidSigner } from '@herald/webpush';
import type { Logger } from '@herald/logging';

import { countAttempt, timePush } from './metrics.js';
import type { FinalStatus, PushContext, Recipient } from './store.js';

/** What one push attempt came to. */
export type Attempt =
  | { kind: 'final'; status: FinalStatus; statusCode: number }
  /** `heldBack`: not sent at all (its push service asked for a pause); it uses up no attempt. */
  | { kind: 'retry'; statusCode: number; notBefore: number; heldBack?: true };

/** One recipient of a notification; `payload` is the notification's, before the recipient's token. */
export type PushRequest = PushContext & Recipient;

const finalStatus = { sent: 'delivered', expired: 'expired', failed: 'failed' } as const;

/**
 * One push attempt: add the recipient's engagement token to the payload, encrypt (fresh key and
 * salt), sign (cached per key and origin), send, and
 * classify the answer. A push service that answered 429 is paced: until its Retry-After passes,
 * pushes to that origin are not attempted but scheduled after it.
 *
 * Retries keep half of each step of the backoff (equal jitter): PUSH_MAX_ATTEMPTS attempts then
 * span at least half of the schedule, so a push service away for a few seconds cannot use them all up.
 */
export class Sender {
  private readonly pausedUntil = new Map<string, number>();
  private readonly backoff: BackoffOptions;

  constructor(
    private readonly client: PushClient,
    private readonly signer: VapidSigner,
    private readonly engagementTokens: EngagementTokens,
    retry: { baseMs: number; capMs: number },
    private readonly logger: Logger,
  ) {
    this.backoff = { ...retry, jitter: 'equal' };
  }

  async attempt(request: PushRequest, vapid: VapidKeys): Promise<Attempt> {
    const origin = new URL(request.endpoint).origin;
    return countAttempt(await this.attemptTo(origin, request, vapid), origin);
  }

  private async attemptTo(origin: string, request: PushRequest, vapid: VapidKeys): Promise<Attempt> {
    const now = Date.now();
    const paused = this.pausedUntil.get(origin) ?? 0;
    if (paused > now) return { kind: 'retry', statusCode: 429, notBefore: paused, heldBack: true };
    let body: Buffer;
    try {
      const token = this.engagementTokens.sign(request);
      body = encrypt(withEngagementToken(request.payload, token), { p256dh: request.p256dh, auth: request.auth });
    } catch (err) {
      // Keys that cannot be used will never work: fail for good rather than retry.
      this.logger.warn({ err, origin }, 'subscription keys unusable');
      return { kind: 'final', status: 'failed', statusCode: 0 };
    }
    try {
      const vapidAuthorization = this.signer.authorization(vapid, origin);
      const response = await timePush(origin, () =>
        this.client.send({ endpoint: request.endpoint, body, ttl: request.ttlSeconds, urgency: request.urgency as Urgency, topic: request.topic, vapidAuthorization }),
      );
      const verdict = classifyResponse(response.status, response.headers['retry-after']);
      if (verdict.outcome !== 'retry') {
        return { kind: 'final', status: finalStatus[verdict.outcome], statusCode: response.status };
      }
      if (response.status === 429 && verdict.retryAfterMs !== undefined) {
        this.pausedUntil.set(origin, Date.now() + verdict.retryAfterMs);
      }
      return { kind: 'retry', statusCode: response.status, notBefore: Date.now() + backoffMs(request.attemptsBefore + 1, this.backoff, verdict.retryAfterMs) };
    } catch (err) {
      if (err instanceof PushNetworkError && err.retryable) {
        return { kind: 'retry', statusCode: 0, notBefore: Date.now() + backoffMs(request.attemptsBefore + 1, this.backoff) };
      }
      this.logger.warn({ err, origin }, 'push failed');
      return { kind: 'final', status: 'failed', statusCode: 0 };
    }
  }
}
