import { secondsHistogram } from '@herald/telemetry';

/** The work loop's metrics; the label `loop` is the loop's name (a constant of its user, never an id). */
export const workLoopMetrics = {
  lateness: secondsHistogram('workloop', 'herald.workloop.lateness', 'How long after its due time a row was claimed for work'),
};
