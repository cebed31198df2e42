// What the peer saw: every request as an attempt with its answer, every accepted message
// (replaced by a later one of the same Topic while still stored, RFC 8030 section 5.4), and the
// counters behind `stats()`. In count mode only the counters are kept: a million pushes cost a
// few maps of numbers, not a million records.
import { randomBytes } from 'node:crypto';

import type { Attempt, FaultRule, PeerMode, PeerStats, ReceivedMessage } from './types.js';

/** An accepted message as stored: the public fields plus what replacement needs. */
export interface StoredMessage extends Omit<ReceivedMessage, 'replacedBy' | 'replaces' | 'id' | 'location'> {
  readonly storedUntil: number;
}

interface MutableMessage extends Omit<ReceivedMessage, 'replacedBy'> {
  replacedBy: string | undefined;
  readonly storedUntil: number;
}

/** An attempt while its answer is decided. */
export interface OpenAttempt extends Omit<Attempt, 'status' | 'error' | 'fault'> {
  status: Attempt['status'];
  error: string | undefined;
  fault: FaultRule | undefined;
}

function increment(record: Record<string, number>, key: string): void {
  record[key] = (record[key] ?? 0) + 1;
}

function publicMessage(m: MutableMessage): ReceivedMessage {
  return {
    id: m.id,
    location: m.location,
    endpoint: m.endpoint,
    plaintext: m.plaintext,
    ttl: m.ttl,
    urgency: m.urgency,
    topic: m.topic,
    vapid: m.vapid,
    at: m.at,
    httpVersion: m.httpVersion,
    rs: m.rs,
    paddingLength: m.paddingLength,
    bodyLength: m.bodyLength,
    senderPublicKey: m.senderPublicKey,
    replaces: m.replaces,
    replacedBy: m.replacedBy,
  };
}

export class Recorder {
  private messages: MutableMessage[] = [];
  private messagesById = new Map<string, MutableMessage[]>();
  private topics = new Map<string, Map<string, MutableMessage>>();
  private attemptList: OpenAttempt[] = [];
  private attemptsById = new Map<string, OpenAttempt[]>();
  private attemptCounts = new Map<string, number>();
  private acceptedById = new Map<string, number>();
  private accepted = 0;
  private replaced = 0;
  private requests = 0;
  private resets = 0;
  private aborted = 0;
  private byStatus: Record<string, number> = {};
  private errors: Record<string, number> = {};
  private messageCounter = 0;
  private readonly messagePrefix = randomBytes(4).toString('hex');

  constructor(
    private readonly mode: PeerMode,
    private readonly endpointOf: (id: string) => string,
  ) {}

  get acceptedCount(): number {
    return this.accepted;
  }

  /** A request to `/push/<id>` arrived (`id` undefined: a malformed path); its attempt in verify mode. */
  requestArrived(id: string | undefined, method: string, at: number, httpVersion: Attempt['httpVersion']): OpenAttempt | undefined {
    this.requests++;
    if (id === undefined) return undefined;
    this.attemptCounts.set(id, (this.attemptCounts.get(id) ?? 0) + 1);
    if (this.mode !== 'verify') return undefined;
    const attempt: OpenAttempt = { endpoint: this.endpointOf(id), method, at, httpVersion, status: 0, error: undefined, fault: undefined };
    this.attemptList.push(attempt);
    const list = this.attemptsById.get(id);
    if (list) list.push(attempt);
    else this.attemptsById.set(id, [attempt]);
    return attempt;
  }

  rejected(attempt: OpenAttempt | undefined, status: number, code: string): void {
    increment(this.byStatus, String(status));
    increment(this.errors, code);
    if (attempt) {
      attempt.status = status;
      attempt.error = code;
    }
  }

  /** The sender went away before an answer. */
  abandoned(attempt: OpenAttempt | undefined): void {
    this.aborted++;
    if (attempt) attempt.status = 'aborted';
  }

  /** A fault rule reset the stream. */
  streamReset(attempt: OpenAttempt | undefined): void {
    this.resets++;
    if (attempt) attempt.status = 'reset';
  }

  /** Counts a 201 for `id` and returns the new message's id. */
  accept(id: string, attempt: OpenAttempt | undefined): string {
    this.accepted++;
    this.acceptedById.set(id, (this.acceptedById.get(id) ?? 0) + 1);
    increment(this.byStatus, '201');
    if (attempt) attempt.status = 201;
    return `${this.messagePrefix}${(this.messageCounter++).toString(36)}`;
  }

  /** Keeps an accepted, decrypted message (verify mode), replacing a stored one of the same Topic. */
  store(id: string, messageId: string, location: string, message: StoredMessage): void {
    let replaces: string | undefined;
    const { topic, at } = message;
    let byTopic: Map<string, MutableMessage> | undefined;
    if (topic !== undefined) {
      byTopic = this.topics.get(id);
      if (!byTopic) this.topics.set(id, (byTopic = new Map()));
      const previous = byTopic.get(topic);
      if (previous && previous.replacedBy === undefined && previous.storedUntil > at) {
        previous.replacedBy = messageId;
        replaces = previous.id;
        this.replaced++;
      }
    }
    const stored: MutableMessage = { ...message, id: messageId, location, replaces, replacedBy: undefined };
    if (topic !== undefined) byTopic!.set(topic, stored);
    this.messages.push(stored);
    const list = this.messagesById.get(id);
    if (list) list.push(stored);
    else this.messagesById.set(id, [stored]);
  }

  received(id: string | undefined, includeReplaced: boolean): ReceivedMessage[] {
    const list = id === undefined ? this.messages : (this.messagesById.get(id) ?? []);
    return list.filter((m) => includeReplaced || m.replacedBy === undefined).map(publicMessage);
  }

  acceptedCountFor(id: string): number {
    return this.acceptedById.get(id) ?? 0;
  }

  attempts(id: string | undefined): Attempt[] {
    const list = id === undefined ? this.attemptList : (this.attemptsById.get(id) ?? []);
    return list.map((a) => ({ ...a }));
  }

  /** Requests to one subscription, or to every `/push/` path. */
  attemptCount(id: string | undefined): number {
    return id === undefined ? this.requests : (this.attemptCounts.get(id) ?? 0);
  }

  stats(): PeerStats {
    const histogram: Record<string, number> = {};
    for (const n of this.acceptedById.values()) increment(histogram, String(n));
    return {
      mode: this.mode,
      requests: this.requests,
      accepted: this.accepted,
      stored: this.accepted - this.replaced,
      replaced: this.replaced,
      resets: this.resets,
      aborted: this.aborted,
      byStatus: { ...this.byStatus },
      errors: { ...this.errors },
      endpoints: this.acceptedById.size,
      acceptedHistogram: histogram,
    };
  }

  /** Per-endpoint 201 counts (for `/__peer/stats?perEndpoint=1`). */
  acceptedPerEndpoint(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [id, n] of this.acceptedById) out[this.endpointOf(id)] = n;
    return out;
  }

  clear(): void {
    this.messages = [];
    this.messagesById = new Map();
    this.topics = new Map();
    this.attemptList = [];
    this.attemptsById = new Map();
    this.attemptCounts = new Map();
    this.acceptedById = new Map();
    this.accepted = 0;
    this.replaced = 0;
    this.requests = 0;
    this.resets = 0;
    this.aborted = 0;
    this.byStatus = {};
    this.errors = {};
  }
}
