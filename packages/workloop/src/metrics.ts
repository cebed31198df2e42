import type { Pool } from '@herald/db';
import { meter, secondsHistogram } from '@herald/telemetry';

/** The work loop's metrics; the label `loop` is the loop's name (a constant of its user, never an id). */
export const workLoopMetrics = {
  lateness: secondsHistogram('workloop', 'herald.workloop.lateness', 'How long after its due time a row was claimed for work'),
  claimsLost: meter('workloop').createCounter('herald.workloop.claims.lost', {
    description: "Rows claimed again because an earlier claim's lease ran out before its worker recorded an outcome",
    unit: '{row}',
  }),
};

const due = meter('workloop').createObservableGauge('herald.workloop.due', {
  description: 'Rows due and not claimed yet (every replica running the loop reports the same backlog)',
  unit: '{row}',
});
/** The loops this process runs: name -> how to count their backlog. */
const loops = new Map<string, { pool: Pool; sql: string }>();

/** Reports a loop's backlog while it runs; returns the function that stops that. */
export function observeBacklog(name: string, pool: Pool, sql: string): () => void {
  loops.set(name, { pool, sql });
  return () => loops.delete(name);
}

due.addCallback(async (result) => {
  await Promise.all(
    [...loops].map(async ([loop, { pool, sql }]) => {
      // PostgreSQL unreachable: no sample this time rather than a wrong one.
      const { rows } = await pool.query<{ due: number }>(sql).catch(() => ({ rows: [] as { due: number }[] }));
      if (rows[0] !== undefined) result.observe(rows[0].due, { loop });
    }),
  );
});
