import { meter, secondsHistogram } from '@herald/telemetry';

import type { Attempt } from './sender.js';

/**
 * The delivery fleet's metrics. `origin` is the push service's origin (https://fcm.googleapis.com,
 * ...): a handful per deployment, since the gateway accepts only known push services' endpoints.
 */
const pushes = meter('delivery').createCounter('herald.delivery.pushes', {
  description: 'Push attempts by outcome (accepted, expired, retry, failed) and push-service origin',
  unit: '{push}',
});
const pushDuration = secondsHistogram('delivery', 'herald.delivery.push.duration', 'Time from sending a push to its push service answering');
const inFlight = meter('delivery').createUpDownCounter('herald.delivery.push.in_flight', {
  description: 'Pushes sent and not yet answered (HTTP/2 streams open) per push-service origin',
  unit: '{stream}',
});

const outcomeOf = { delivered: 'accepted', expired: 'expired', failed: 'failed' } as const;

/** Counts an attempt's outcome; one held back for its push service's Retry-After was never made and is not counted. */
export function countAttempt(attempt: Attempt, origin: string): Attempt {
  if (attempt.kind === 'final') pushes.add(1, { outcome: outcomeOf[attempt.status], origin });
  else if (!attempt.heldBack) pushes.add(1, { outcome: 'retry', origin });
  return attempt;
}

/** Times one push to its push service and keeps the in-flight count of its origin. */
export async function timePush<T>(origin: string, send: () => Promise<T>): Promise<T> {
  const startedAt = performance.now();
  inFlight.add(1, { origin });
  try {
    return await send();
  } finally {
    inFlight.add(-1, { origin });
    pushDuration.record((performance.now() - startedAt) / 1000, { origin });
  }
}
