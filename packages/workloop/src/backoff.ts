import { isBackingServiceDown } from '@herald/errors';

/**
 * The one retry backoff of Herald (push retries, webhook retries, anything on the work loop):
 * "full jitter" (AWS Architecture Blog, "Exponential Backoff And Jitter"), never sooner than the
 * server's Retry-After, and never longer than the cap, Retry-After included: the operator's cap is
 * the longest Herald parks an item, whatever a server asks.
 */
export interface BackoffOptions {
  /** Upper bound of the first retry's delay. */
  baseMs: number;
  /** The longest delay, Retry-After included. */
  capMs: number;
  /** Uniform [0, 1) source, injectable for tests. Default Math.random. */
  random?: () => number;
}

/**
 * Delay before retry number `attempt` (1 = the first retry): uniform in [c/2, c) where
 * c = min(cap, base * 2^(attempt-1)), and at least min(Retry-After, cap). Half of each step is
 * kept (equal jitter) so that the attempts span a real stretch of time: with full jitter a few
 * retries could all fall inside one short outage of the far side and use up every attempt.
 */
export function backoffMs(attempt: number, { baseMs, capMs, random = Math.random }: BackoffOptions, retryAfterMs?: number): number {
  if (!Number.isInteger(attempt) || attempt < 1) throw new RangeError('attempt must be an integer >= 1');
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt - 1, 52));
  const jittered = Math.floor(ceiling / 2 + random() * (ceiling / 2));
  const floor = retryAfterMs !== undefined && Number.isFinite(retryAfterMs) && retryAfterMs > 0 ? Math.min(capMs, Math.ceil(retryAfterMs)) : 0;
  return Math.max(jittered, floor);
}

/**
 * Runs `step` again while it fails because PostgreSQL, Redis or Kafka is unreachable (capped
 * backoff, for at most `forMs`), then gives up with its error. For the step that records work
 * already done outside (a push sent, a webhook posted): recorded once the server is back, rather
 * than left to a lease and done a second time. `between` runs before each new try (e.g. a Kafka
 * heartbeat, so the consumer keeps its partitions while it waits).
 */
export async function retryWhileUnreachable<T>(step: () => Promise<T>, forMs: number, between?: () => Promise<void>): Promise<T> {
  const deadline = Date.now() + forMs;
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await step();
    } catch (err) {
      if (!isBackingServiceDown(err) || Date.now() >= deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 100 * 2 ** Math.min(attempt, 5))));
      await between?.().catch(() => undefined);
    }
  }
}
