import { withTransaction, type Pool } from '@herald/db';
import { HeraldError } from '@herald/errors';
import type { PromiseClient } from '@herald/grpc';
import type { AccountServiceClient } from '@herald/proto/herald/account/v1/account';
import { Targeting, type AudienceServiceClient } from '@herald/proto/herald/audience/v1/audience';
import type { NotificationContent } from '@herald/proto/herald/campaign/v1/campaign';

import * as store from './store.js';

export function limitExceeded(limit: number): HeraldError {
  return new HeraldError('plan_limit_exceeded', `This send would exceed the plan's monthly allowance of ${limit} notifications.`, {
    title: 'Monthly notification allowance exhausted',
    extra: { limits: { remaining: 0, limit } },
  });
}

export function segmentGone(campaignId: string, segmentId: string): HeraldError {
  return new HeraldError('conflict', `Campaign ${campaignId} targets segment ${segmentId}, which no longer exists.`, {
    title: 'Segment missing',
    hint: 'Give the campaign another segmentId, or null for every active subscriber (PATCH), then send it.',
  });
}

/** What a campaign's pushes carry: its stored content. */
export function contentOf(row: store.CampaignRow): NotificationContent {
  return { title: row.title, body: row.body, url: row.url ?? '', iconUrl: row.icon_url ?? '', imageUrl: row.image_url ?? '', actions: [], answerUrl: '' };
}

/**
 * Whom a campaign goes to: its stored targeting, with every field (rows stored before a field
 * existed lack it, and a message with a missing field cannot be encoded).
 */
export function targetingOf(row: store.CampaignRow): Targeting {
  return Targeting.fromPartial(row.targeting);
}

export interface StartDeps {
  pool: Pool;
  account: PromiseClient<AccountServiceClient>;
  audience: PromiseClient<AudienceServiceClient>;
}

/**
 * Starts a draft or scheduled campaign: on POST /campaigns/{id}/send, or at its scheduled time
 * from the timer loop (with the loop's claim token). The facts come from their owners at start,
 * caller or not: the site's signing keys and the plan's monthly allowance (account), the audience
 * (audience). One transaction moves it to sending, reserves the allowance and queues the fan-out,
 * so a start happens once or not at all. Undefined when it was no longer startable (moved by
 * someone else meanwhile, or the claim was lost).
 */
export async function startCampaign({ pool, account, audience }: StartDeps, row: store.CampaignRow, claim?: string): Promise<store.CampaignRow | undefined> {
  const facts = await account.getSendingFacts({ workspaceId: row.workspace_id });
  if (!facts.plan?.active) throw new HeraldError('subscription_required', 'This workspace has no active plan.');
  if (!facts.signingKeysConfigured) {
    throw new HeraldError('conflict', 'The site has no push signing keys configured, so its campaigns cannot be sent.', { title: 'Push signing keys missing' });
  }
  const limit = Number(facts.plan.monthlyNotificationAllowance);
  const targeting = targetingOf(row);
  const { count } = await audience.countTargets({ workspaceId: row.workspace_id, targeting }).catch((err: unknown) => {
    // Its segment was deleted since it was chosen: the campaign cannot start as it stands.
    if (err instanceof HeraldError && err.code === 'not_found' && targeting.segmentId) throw segmentGone(row.id, targeting.segmentId);
    throw err;
  });
  const targeted = Number(count);
  return withTransaction(pool, async (tx) => {
    const started = await store.markStarted(tx, row.workspace_id, row.id, targeted, claim);
    if (!started) return undefined;
    if ((await store.reserveAllowance(tx, row.workspace_id, targeted, limit)) === undefined) throw limitExceeded(limit);
    await store.enqueueNotificationQueued(tx, { id: row.id, workspaceId: row.workspace_id, siteId: row.site_id, content: contentOf(row), targeting });
    return started;
  });
}
