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

/** Delay before retry number `attempt` (1 = the first retry): uniform in [0, min(cap, base * 2^(attempt-1))), at least min(Retry-After, cap). */
export function backoffMs(attempt: number, { baseMs, capMs, random = Math.random }: BackoffOptions, retryAfterMs?: number): number {
  if (!Number.isInteger(attempt) || attempt < 1) throw new RangeError('attempt must be an integer >= 1');
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt - 1, 52));
  const jittered = Math.floor(random() * ceiling);
  const floor = retryAfterMs !== undefined && Number.isFinite(retryAfterMs) && retryAfterMs > 0 ? Math.min(capMs, Math.ceil(retryAfterMs)) : 0;
  return Math.max(jittered, floor);
}
