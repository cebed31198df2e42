import { answerChannel, type QuestionChange, questionOfAnswerChannel, questionsChannel, workspaceOfQuestionsChannel } from '@herald/bus';
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

/**
 * One live stream of a workspace's question changes (GET /decisions/stream): told of each change,
 * and ended when the gateway drains.
 */
export interface Watcher {
  changed(change: QuestionChange): void;
  /** Redis was unreachable for a while: changes may have been missed, the stream's reader reads again. */
  resumed(): void;
  closing(): void;
}

export class Waiters {
  private readonly byQuestion = new Map<string, { waiters: Set<Waiting>; subscribed: Promise<void> }>();
  /** The live streams by workspace, on the same connection: one subscription per workspace with a stream. */
  private readonly byWorkspace = new Map<string, Set<Watcher>>();
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
      const workspaceId = workspaceOfQuestionsChannel(namespace, channel);
      if (workspaceId !== undefined) {
        this.announce(workspaceId, message);
        return;
      }
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

  /** Shutdown: every waiter answers at once with the current record, every stream ends; no new waits or streams start. */
  wakeAll(): void {
    this.closing = true;
    for (const { waiters } of this.byQuestion.values()) for (const waiting of waiters) waiting.wake();
    for (const watchers of this.byWorkspace.values()) for (const watcher of watchers) watcher.closing();
  }

  /**
   * Tells `watcher` of `workspaceId`'s question changes until the returned function is called.
   * Undefined when the workspace already has `limit` streams on this replica, or the gateway is
   * closing. Resolves once the subscription is in place (a change published after it is not missed).
   */
  async watch(workspaceId: string, watcher: Watcher, limit: number): Promise<(() => void) | undefined> {
    if (this.closing) return undefined;
    let watchers = this.byWorkspace.get(workspaceId);
    if (watchers && watchers.size >= limit) return undefined;
    const first = !watchers;
    watchers ??= new Set();
    watchers.add(watcher);
    this.byWorkspace.set(workspaceId, watchers);
    const stop = () => {
      const current = this.byWorkspace.get(workspaceId);
      if (!current?.delete(watcher) || current.size > 0) return;
      this.byWorkspace.delete(workspaceId);
      this.subscriber.unsubscribe(questionsChannel(this.namespace, workspaceId)).catch(() => undefined);
    };
    if (first) {
      // Without Redis the stream still opens; it hears changes once Redis is back (resumed).
      await this.subscriber.subscribe(questionsChannel(this.namespace, workspaceId)).catch((err: unknown) => this.logger.warn({ err, workspaceId }, 'could not subscribe for question changes'));
    }
    return stop;
  }

  private announce(workspaceId: string, message: string): void {
    let change: QuestionChange;
    try {
      change = JSON.parse(message) as QuestionChange;
    } catch {
      this.logger.warn({ workspaceId }, 'a question change that is not JSON was ignored');
      return;
    }
    for (const watcher of this.byWorkspace.get(workspaceId) ?? []) watcher.changed(change);
  }

  disconnect(): void {
    this.subscriber.disconnect();
  }

  private async resume(): Promise<void> {
    const channels = [...this.byQuestion.keys()].map((id) => answerChannel(this.namespace, id));
    const workspaces = [...this.byWorkspace.keys()].map((id) => questionsChannel(this.namespace, id));
    this.logger.info({ questions: channels.length, streamedWorkspaces: workspaces.length }, 'Redis reachable again: waiters re-check their questions');
    if (channels.length + workspaces.length > 0) {
      await this.subscriber.subscribe(...channels, ...workspaces).catch((err: unknown) => this.logger.warn({ err }, 'could not subscribe again for answer wake-ups'));
    }
    for (const { waiters } of this.byQuestion.values()) for (const waiting of waiters) waiting.wake();
    for (const watchers of this.byWorkspace.values()) for (const watcher of watchers) watcher.resumed();
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
