import type { Attempt } from './sender.js';
import type { FinalOutcome, Recipient, RetryOutcome } from './store.js';

export interface Sorted {
  finals: FinalOutcome[];
  /** Finals that failed because the last attempt ran out: these also go to the dead-letter topic. */
  exhausted: FinalOutcome[];
  again: RetryOutcome[];
}

/** Sorts attempts into final outcomes and retries; a retry past `maxAttempts` becomes a failure. */
export function sortAttempts(recipients: Recipient[], attempts: Attempt[], maxAttempts: number): Sorted {
  const sorted: Sorted = { finals: [], exhausted: [], again: [] };
  recipients.forEach((recipient, index) => {
    const attempt = attempts[index];
    if (!attempt) return;
    const made = recipient.attemptsBefore + 1;
    if (attempt.kind === 'final') {
      sorted.finals.push({ subscriberId: recipient.subscriberId, status: attempt.status, statusCode: attempt.statusCode, attempts: made });
    } else if (made >= maxAttempts) {
      const failed = { subscriberId: recipient.subscriberId, status: 'failed' as const, statusCode: attempt.statusCode, attempts: made };
      sorted.finals.push(failed);
      sorted.exhausted.push(failed);
    } else {
      sorted.again.push({
        subscriberId: recipient.subscriberId,
        ...(recipient.payload && { payload: recipient.payload }),
        endpoint: recipient.endpoint,
        p256dh: recipient.p256dh,
        auth: recipient.auth,
        statusCode: attempt.statusCode,
        attempts: made,
        nextAttemptAt: new Date(attempt.notBefore),
      });
    }
  });
  return sorted;
}
