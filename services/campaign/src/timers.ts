import { withTransaction } from '@herald/db';
import { HeraldError } from '@herald/errors';
import { startWorkLoop, type WorkLoop } from '@herald/workloop';

import type { CampaignDeps } from './campaigns.js';
import { contentOf, startCampaign, targetingOf } from './starts.js';
import * as store from './store.js';

/** A start takes an account and an audience call, then one transaction: far below this. */
const LEASE_MS = 30_000;

/**
 * The campaign timers, on the shared work loop: scheduled campaigns start at their time without a
 * caller, and a throttled fan-out's next step is queued when it is due. Each row is claimed by one
 * replica at a time; a start commits with `claim = token`, so it happens once across replicas and
 * restarts (a replica that dies mid-start leaves the row to another after the lease).
 */
export function startCampaignTimers(deps: CampaignDeps & { pollMs?: number }): WorkLoop {
  const { pool, logger } = deps;

  async function startScheduled(timer: store.TimerRow, token: string): Promise<void> {
    const row = await store.findCampaign(pool, timer.workspace_id, timer.id);
    if (!row || row.status !== 'scheduled') return;
    try {
      const started = await startCampaign(deps, row, token);
      if (!started?.started_at || !timer.scheduled_at) return;
      const latenessMs = started.started_at.getTime() - timer.scheduled_at.getTime();
      logger.info({ workspaceId: row.workspace_id, campaignId: row.id, latenessMs, targeted: Number(started.targeted) }, 'scheduled campaign started');
    } catch (err) {
      // A refusal (no plan, allowance spent, no signing keys) will not pass by retrying: the
      // campaign goes back to draft showing why. Anything else is retried after the lease.
      if (!(err instanceof HeraldError) || err.status >= 500) throw err;
      await store.markStartFailed(pool, row.id, `${err.code}: ${err.message}`, token);
      logger.warn({ workspaceId: row.workspace_id, campaignId: row.id, code: err.code }, 'scheduled campaign not started; back to draft');
    }
  }

  async function queueStep(timer: store.TimerRow, token: string): Promise<void> {
    await withTransaction(pool, async (tx) => {
      const row = await store.takeFanoutStep(tx, timer.id, token);
      if (!row) return;
      await store.enqueueNotificationQueued(tx, { id: row.id, workspaceId: row.workspace_id, siteId: row.site_id, content: contentOf(row), targeting: targetingOf(row) });
    });
  }

  return startWorkLoop<store.TimerRow>({
    name: 'campaign timers',
    pool,
    logger,
    table: store.CAMPAIGN_TIMERS,
    leaseMs: LEASE_MS,
    channel: store.CAMPAIGN_TIMERS_CHANNEL,
    ...(deps.pollMs ? { pollMs: deps.pollMs } : {}),
    work: async ([timer], token) => {
      if (!timer) return;
      await (timer.status === 'scheduled' ? startScheduled(timer, token) : queueStep(timer, token));
    },
  });
}
