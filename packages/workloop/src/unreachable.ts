import { backoffMs, type BackoffOptions } from '@herald/backoff';
import { isBackingServiceDown } from '@herald/errors';

/** Between two tries of a step whose server is unreachable: up to 0.1 s, 0.2 s, ... 2 s (full jitter). */
const UNREACHABLE_BACKOFF: BackoffOptions = { baseMs: 100, capMs: 2_000 };

/**
 * Runs `step` again while it fails because PostgreSQL, Redis or Kafka is unreachable (backing
 * off, for at most `forMs`), then gives up with its error. For the step that records work
 * already done outside (a push sent, a webhook posted): recorded once the server is back, rather
 * than left to a lease and done a second time. `between` runs before each new try (e.g. a Kafka
 * heartbeat, so the consumer keeps its partitions while it waits).
 */
export async function retryWhileUnreachable<T>(step: () => Promise<T>, forMs: number, between?: () => Promise<void>): Promise<T> {
  const deadline = Date.now() + forMs;
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await step();
    } catch (err) {
      if (!isBackingServiceDown(err) || Date.now() >= deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, backoffMs(attempt, UNREACHABLE_BACKOFF)));
      await between?.().catch(() => undefined);
    }
  }
}
