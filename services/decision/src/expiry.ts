import { withTransaction, type Pool } from '@herald/db';
import type { Logger } from '@herald/logging';
import { startWorkLoop, type WorkLoop } from '@herald/workloop';

import { countQuestion } from './metrics.js';
import * as store from './store.js';
import { reportResolution } from './webhooks.js';

/**
 * Expiry is computed on read, so nothing changes when a question expires; this sweep records it,
 * once per question: it wakes when the next question expires (or after `pollMs`), leases what
 * expired unanswered, and in one transaction marks each swept, appends its `expired` entry to the
 * question's record and, for a question with a callbackUrl, enqueues its expiry webhook.
 */
export function startExpirySweep(pool: Pool, pollMs: number, logger: Logger): WorkLoop {
  return startWorkLoop<{ id: string }>({
    name: 'expiry sweep',
    pool,
    logger,
    table: store.UNSWEPT_EXPIRIES,
    leaseMs: 30_000,
    batchSize: 100,
    concurrency: 100,
    pollMs,
    async work(rows, token) {
      const expired = await withTransaction(pool, async (tx) => {
        const swept = await store.markExpiriesSwept(tx, rows.map((row) => row.id), token);
        for (const row of swept) {
          await store.appendEvent(tx, row.id, 'expired', { detail: { expiresAt: row.expires_at.toISOString() } });
          if (row.report) await reportResolution(tx, row, 'expired');
        }
        return swept;
      });
      // Counted once committed: each question's expiry is swept once.
      for (const row of expired) countQuestion('expired', row.kind);
    },
  });
}
