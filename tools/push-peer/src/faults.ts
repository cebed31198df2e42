// The peer's fault rules: per endpoint, or a default for every endpoint without its own; a list
// is applied in order, each rule for its `times` requests.
import type { FaultRule } from './types.js';

interface QueuedRule {
  readonly rule: FaultRule;
  remaining: number | undefined;
}

function validateRule(rule: FaultRule, last: boolean): FaultRule {
  if (typeof rule !== 'object' || rule === null) throw new TypeError('fault rule must be an object');
  const { status, retryAfter, delayMs, delayResponseMs, resetStream, times } = rule;
  if (status !== undefined && (!Number.isInteger(status) || status < 400 || status > 599)) throw new TypeError(`fault status must be an integer 400-599, got ${status}`);
  if (delayMs !== undefined && (!Number.isFinite(delayMs) || delayMs < 0)) throw new TypeError(`delayMs must be a non-negative number, got ${delayMs}`);
  if (delayResponseMs !== undefined && (!Number.isFinite(delayResponseMs) || delayResponseMs < 0)) throw new TypeError(`delayResponseMs must be a non-negative number, got ${delayResponseMs}`);
  if (delayResponseMs !== undefined && (status !== undefined || resetStream)) throw new TypeError('delayResponseMs holds the 201 of an accepted push: not with status or resetStream');
  if (times !== undefined && (!Number.isInteger(times) || times < 1)) throw new TypeError(`times must be a positive integer, got ${times}`);
  if (resetStream !== undefined && typeof resetStream !== 'boolean') throw new TypeError('resetStream must be a boolean');
  if (resetStream && status !== undefined) throw new TypeError('a fault rule cannot both reset the stream and answer a status');
  if (status === undefined && !resetStream && delayMs === undefined && delayResponseMs === undefined) throw new TypeError('a fault rule needs status, resetStream, delayMs or delayResponseMs');
  if (retryAfter !== undefined) {
    if (status === undefined) throw new TypeError('retryAfter needs a status');
    if (typeof retryAfter === 'number' ? !Number.isInteger(retryAfter) || retryAfter < 0 : typeof retryAfter !== 'string' || retryAfter === '') {
      throw new TypeError(`retryAfter must be a non-negative integer (seconds) or an HTTP-date, got ${String(retryAfter)}`);
    }
  }
  if (!last && times === undefined) throw new TypeError('in a list of fault rules, every rule but the last needs `times`');
  return { ...rule };
}

function queueOf(rule: FaultRule | readonly FaultRule[] | null): QueuedRule[] {
  if (rule === null) return [];
  const list: readonly FaultRule[] = Array.isArray(rule) ? (rule as readonly FaultRule[]) : [rule as FaultRule];
  return list.map((r, i) => {
    const valid = validateRule(r, i === list.length - 1);
    return { rule: valid, remaining: valid.times };
  });
}

export class FaultRules {
  private own = new Map<string, QueuedRule[]>();
  private fallback: QueuedRule[] = [];

  /** Rule(s) for one subscription id (`null` clears). */
  setFor(id: string, rule: FaultRule | readonly FaultRule[] | null): void {
    const queue = queueOf(rule);
    if (queue.length === 0) this.own.delete(id);
    else this.own.set(id, queue);
  }

  /** Rule(s) for every subscription without its own (`null` clears). */
  setDefault(rule: FaultRule | readonly FaultRule[] | null): void {
    this.fallback = queueOf(rule);
  }

  /** The rule that decides this request to `id`, counting it against the rule's `times`. */
  take(id: string): FaultRule | undefined {
    const own = this.own.get(id);
    const queue = own && own.length > 0 ? own : this.fallback;
    const head = queue[0];
    if (!head) return undefined;
    if (head.remaining !== undefined && --head.remaining === 0) {
      queue.shift();
      if (own && own.length === 0) this.own.delete(id);
    }
    return head.rule;
  }

  clear(): void {
    this.own = new Map();
    this.fallback = [];
  }
}
