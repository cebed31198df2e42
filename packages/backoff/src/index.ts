/**
 * The one backoff of Herald, for every retry and every restart: capped exponential with jitter
 * (AWS Architecture Blog, "Exponential Backoff And Jitter"). Retry number `attempt` (1 = the first)
 * has the ceiling c = min(cap, base * 2^(attempt-1)), and waits
 *
 * - `full` jitter (the default): uniform in [0, c). For retries that go on until the far side is
 *   back (reconnecting to PostgreSQL, Kafka, the LISTEN connection): callers that lost the same
 *   server spread out the most, and each waits half as long on average.
 * - `equal` jitter: uniform in [c/2, c). For a limited number of attempts (a push, a webhook, a
 *   Kafka message before its dead letter) and for restarts: half of each step is kept, so the
 *   attempts span a real stretch of time (with full jitter a few of them could all fall inside one
 *   short outage of the far side and use up every attempt) and a process that keeps crashing is
 *   never started again at once.
 *
 * A server's Retry-After is a floor, itself capped: the cap is the longest Herald waits, whatever a
 * server asks.
 */
export type Jitter = 'full' | 'equal';

export interface BackoffOptions {
  /** Ceiling of the first retry's delay. */
  baseMs: number;
  /** The longest delay, Retry-After included. */
  capMs: number;
  /** Default `full`. */
  jitter?: Jitter;
  /** Uniform [0, 1) source, injectable for tests. Default Math.random. */
  random?: () => number;
}

/** Milliseconds to wait before retry number `attempt` (an integer >= 1), at least min(Retry-After, cap). */
export function backoffMs(attempt: number, { baseMs, capMs, jitter = 'full', random = Math.random }: BackoffOptions, retryAfterMs?: number): number {
  if (!Number.isInteger(attempt) || attempt < 1) throw new RangeError('attempt must be an integer >= 1');
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt - 1, 52));
  const kept = jitter === 'equal' ? ceiling / 2 : 0;
  const jittered = Math.floor(kept + random() * (ceiling - kept));
  const floor = retryAfterMs !== undefined && Number.isFinite(retryAfterMs) && retryAfterMs > 0 ? Math.min(capMs, Math.ceil(retryAfterMs)) : 0;
  return Math.max(jittered, floor);
}
