import { secondsHistogram } from '@herald/telemetry';

/**
 * The campaign service's metrics. A notification completes when its fan-out is done and every
 * queued push settled (accepted, expired or failed for good): the time from its start (a send's
 * or question's creation, a campaign's start) to then is what a sender waits for "everyone got
 * it". `kind` is send, campaign or question.
 */
const completion = secondsHistogram('campaign', 'herald.notification.completion', 'Time from a notification starting to send to its last push settled');

/** A notification that just completed (returned by the statement that completed it). */
export interface Completed {
  kind: string;
  seconds: number;
}

/** Records completions once their transaction committed (a rolled-back one is redone, and counted then). */
export function recordCompletions(completed: readonly Completed[]): void {
  for (const { kind, seconds } of completed) completion.record(Math.max(0, seconds), { kind });
}
