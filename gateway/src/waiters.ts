import { answerChannel, questionOfAnswerChannel } from '@herald/bus';
import type { Logger } from '@herald/logging';
import type { Redis } from 'ioredis';

import { observeWaiters, recordWakeUp } from './metrics.js';

/**
 * Callers held open until a question is answered (POST /ask, GET /ask/{id}?wait, /decisions with
 * wait). The gateway only waits: the decision service publishes on the question's Redis channel
 * once an answer or a cancellation is committed, whichever replica or client made it, and every
 * replica with a waiter for that question is subscribed to it (one subscriber connection per
 * replica, one subscription per question however many callers wait on it). Nothing polls
 * PostgreSQL: a waiter reads the record once after subscribing (an answer that landed before the
 * subscription is seen then), waits for the message, its time-out, its client going away or the
 * gateway shutting down, and reads the record once more.
 */

/** One caller's wait: woken by its question's channel, its time-out, its client leaving, or a re-check. */
class Waiting {
  private resolve!: () => void;
  woken!: Promise<void>;

  constructor() {
    this.arm();
  }

  /** Ready for the next wake-up (one that came before is spent). */
  arm(): void {
    this.woken = new Promise<void>((resolve) => (this.resolve = resolve));
  }

  wake(): void {
    this.resolve();
  }
}

export class Waiters {
  private readonly byQuestion = new Map<string, { waiters: Set<Waiting>; subscribed: Promise<void> }>();
  private closing = false;
  private connectedBefore: boolean;

  constructor(
    /** A connection of its own: a subscribed Redis connection can do nothing else. */
    private readonly subscriber: Redis,
    private readonly logger: Logger,
    /** HERALD_NAMESPACE: the wake-up channels are this namespace's. */
    private readonly namespace: string,
  ) {
    // The first connection may be up already (it is made before the gateway listens).
    this.connectedBefore = subscriber.status === 'ready';
    subscriber.on('message', (channel: string, message: string) => {
      const waiters = this.byQuestion.get(questionOfAnswerChannel(namespace, channel))?.waiters ?? new Set<Waiting>();
      for (const waiting of waiters) waiting.wake();
      recordWakeUp(message, waiters.size);
    });
    observeWaiters(() => [...this.byQuestion.values()].reduce((sum, { waiters }) => sum + waiters.size, 0));
    // Wake-ups published while Redis was down are lost, and subscriptions tried then never took:
    // once it is back, every question waited on is subscribed again and its waiters re-read it.
    subscriber.on('ready', () => {
      if (this.connectedBefore) void this.resume();
      this.connectedBefore = true;
    });
  }

  /**
   * `read()` now; if `settled` says it is final, that; otherwise `read()` again after the
   * question's channel fires, `timeoutMs` passes, `signal` aborts (the client left) or the
   * gateway closes. `timedOut` tells whether the wait ran out without a wake-up.
   */
  async wait<T>(questionId: string, timeoutMs: number, read: () => Promise<T>, settled: (record: T) => boolean, signal: AbortSignal): Promise<{ record: T; timedOut: boolean }> {
    if (timeoutMs <= 0 || this.closing || signal.aborted) return { record: await read(), timedOut: false };
    const waiting = new Waiting();
    await this.add(questionId, waiting);
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    const onAbort = () => waiting.wake();
    try {
      let record = await read();
      if (settled(record) || signal.aborted || this.closing) return { record, timedOut: false };
      signal.addEventListener('abort', onAbort, { once: true });
      timer = setTimeout(() => {
        timedOut = true;
        waiting.wake();
      }, timeoutMs);
      for (;;) {
        await waiting.woken;
        // Armed before reading, so a wake-up that lands during the read is not lost.
        waiting.arm();
        record = await read();
        // Still pending after a re-check (Redis came back): keep waiting.
        if (settled(record) || timedOut || signal.aborted || this.closing) return { record, timedOut };
      }
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      // Not awaited: the caller's answer must not wait for Redis to confirm the unsubscribe. A new
      // waiter's subscribe goes out on the same connection after it, so Redis applies them in order.
      this.remove(questionId, waiting);
    }
  }

  /** Shutdown: every waiter answers at once with the current record; no new waits start. */
  wakeAll(): void {
    this.closing = true;
    for (const { waiters } of this.byQuestion.values()) for (const waiting of waiters) waiting.wake();
  }

  disconnect(): void {
    this.subscriber.disconnect();
  }

  private async resume(): Promise<void> {
    const channels = [...this.byQuestion.keys()].map((id) => answerChannel(this.namespace, id));
    this.logger.info({ questions: channels.length }, 'Redis reachable again: waiters re-check their questions');
    if (channels.length > 0) await this.subscriber.subscribe(...channels).catch((err: unknown) => this.logger.warn({ err }, 'could not subscribe again for answer wake-ups'));
    for (const { waiters } of this.byQuestion.values()) for (const waiting of waiters) waiting.wake();
  }

  private async add(questionId: string, waiting: Waiting): Promise<void> {
    const entry = this.byQuestion.get(questionId);
    if (entry) {
      entry.waiters.add(waiting);
      // A later waiter of the same question also reads only once the subscription is in place.
      return entry.subscribed;
    }
    const subscribed = this.subscriber.subscribe(answerChannel(this.namespace, questionId)).then(
      () => undefined,
      // Without Redis the wait still ends at its time-out with a fresh read.
      (err: unknown) => this.logger.warn({ err, questionId }, 'could not subscribe for an answer wake-up'),
    );
    this.byQuestion.set(questionId, { waiters: new Set([waiting]), subscribed });
    return subscribed;
  }

  private remove(questionId: string, waiting: Waiting): void {
    const entry = this.byQuestion.get(questionId);
    if (!entry) return;
    entry.waiters.delete(waiting);
    if (entry.waiters.size > 0) return;
    this.byQuestion.delete(questionId);
    this.subscriber.unsubscribe(answerChannel(this.namespace, questionId)).catch(() => undefined);
  }
}
