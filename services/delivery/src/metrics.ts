import { meter, secondsHistogram } from '@herald/telemetry';

import type { Attempt } from './sender.js';

/**
 * The delivery fleet's metrics. `origin` is the push service's origin (https://fcm.googleapis.com,
 * ...): a handful per deployment, since the gateway accepts only known push services' endpoints.
 * The counts are kept in plain maps and read at each collection: on the push path a map update
 * costs a fraction of an instrument's (which hashes its attributes on every call).
 */
const deliveryMeter = meter('delivery');
const pushDuration = secondsHistogram('delivery', 'herald.delivery.push.duration', 'Time from sending a push to its push service answering');

type Outcome = 'accepted' | 'expired' | 'retry' | 'failed';
/** origin -> outcome -> pushes since the start. */
const pushCounts = new Map<string, Record<Outcome, number>>();
/** origin -> pushes sent and not answered yet. */
const inFlight = new Map<string, number>();

deliveryMeter
  .createObservableCounter('herald.delivery.pushes', { description: 'Push attempts by outcome (accepted, expired, retry, failed) and push-service origin', unit: '{push}' })
  .addCallback((result) => {
    for (const [origin, counts] of pushCounts) {
      for (const [outcome, count] of Object.entries(counts)) if (count > 0) result.observe(count, { outcome, origin });
    }
  });
deliveryMeter
  .createObservableUpDownCounter('herald.delivery.push.in_flight', { description: 'Pushes sent and not yet answered (HTTP/2 streams open) per push-service origin', unit: '{stream}' })
  .addCallback((result) => {
    for (const [origin, count] of inFlight) result.observe(count, { origin });
  });

const outcomeOf = { delivered: 'accepted', expired: 'expired', failed: 'failed' } as const;

/** Counts an attempt's outcome; one held back for its push service's Retry-After was never made and is not counted. */
export function countAttempt(attempt: Attempt, origin: string): Attempt {
  if (attempt.kind === 'retry' && attempt.heldBack) return attempt;
  let counts = pushCounts.get(origin);
  if (!counts) pushCounts.set(origin, (counts = { accepted: 0, expired: 0, retry: 0, failed: 0 }));
  counts[attempt.kind === 'final' ? outcomeOf[attempt.status] : 'retry'] += 1;
  return attempt;
}

/** Times one push to its push service and keeps the in-flight count of its origin. */
export async function timePush<T>(origin: string, send: () => Promise<T>): Promise<T> {
  const startedAt = performance.now();
  inFlight.set(origin, (inFlight.get(origin) ?? 0) + 1);
  try {
    return await send();
  } finally {
    inFlight.set(origin, (inFlight.get(origin) ?? 1) - 1);
    pushDuration.record((performance.now() - startedAt) / 1000, { origin });
  }
}
