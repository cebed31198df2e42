import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';

import { enqueue, topics } from '@herald/bus';
import { CREATED_US_SQL, type PagePosition, type Queryable } from '@herald/db';
import type { WorkTable } from '@herald/workloop';
import type { Targeting } from '@herald/proto/herald/audience/v1/audience';
import type { NotificationContent } from '@herald/proto/herald/campaign/v1/campaign';
import { CampaignEvent } from '@herald/proto/herald/campaign/v1/events';

import type { Completed } from './metrics.js';

/** Every SQL statement of the campaign service. Each query is scoped by workspace id. */

export const SCHEMA = 'campaign';
export const migrationsDir = fileURLToPath(new URL('../../migrations', import.meta.url));

export type CampaignStatus = 'draft' | 'scheduled' | 'sending' | 'active' | 'paused' | 'completed';
export type CampaignKind = 'send' | 'campaign' | 'question';

export interface CampaignRow {
  id: string;
  workspace_id: string;
  site_id: string;
  kind: CampaignKind;
  name: string;
  status: CampaignStatus;
  title: string;
  body: string;
  url: string | null;
  icon_url: string | null;
  image_url: string | null;
  template_id: string | null;
  scheduled_at: Date | null;
  throttle_per_minute: number | null;
  targeting: Targeting;
  targeted: string;
  queued: string;
  fanout_cursor: string;
  fanout_batches: number;
  fanout_done: boolean;
  delivered: string;
  failed: string;
  expired: string;
  impressions: string;
  clicks: string;
  dismissals: string;
  last_status_code: number | null;
  last_outcome: string | null;
  last_reported_at: Date | null;
  start_error: string | null;
  created_at: Date;
  updated_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  due_at: Date | null;
  deleted_at: Date | null;
  created_us: string;
}

const CAMPAIGN_COLUMNS = `*, ${CREATED_US_SQL} AS created_us`;
/** Campaigns a caller can see: not deleted, not a question's push. */
const VISIBLE = `deleted_at IS NULL AND kind <> 'question'`;
/** States whose fan-out runs. */
export const RUNNING: readonly CampaignStatus[] = ['sending', 'active'];

export interface SendRecord {
  request_hash: string;
  notification_id: string;
  sent: string;
}

/** The first send of `keyId` (the calling API key; '' for the flow service) with this idempotency key. */
export async function findSendRecord(db: Queryable, workspaceId: string, keyId: string, idempotencyKey: string): Promise<SendRecord | undefined> {
  const { rows } = await db.query<SendRecord>(
    `SELECT request_hash, notification_id, sent FROM send_requests WHERE workspace_id = $1 AND key_id = $2 AND idempotency_key = $3`,
    [workspaceId, keyId, idempotencyKey],
  );
  return rows[0];
}

/** A campaign started as it is stored: a /send (kind send) or a question's push (kind question). */
export interface StartedNotification {
  id: string;
  kind: 'send' | 'question';
  workspaceId: string;
  siteId: string;
  content: NotificationContent;
  targeting: Targeting;
}

/** With `fannedOut`, its one delivery job is queued in the same transaction: the fan-out is done from the start. */
export async function insertStartedCampaign(
  tx: Queryable,
  n: StartedNotification & { targeted: number; fannedOut?: { queued: number; cursor: string } },
): Promise<void> {
  await tx.query(
    `INSERT INTO campaigns (id, kind, name, status, started_at, workspace_id, site_id, title, body, url, icon_url, image_url, targeting, targeted,
                            queued, fanout_cursor, fanout_batches, fanout_done)
     VALUES ($1, $2, $4, 'sending', now(), $3, $11, $4, $5, NULLIF($6, ''), NULLIF($7, ''), NULLIF($8, ''), $9, $10,
             $12, $13, CASE WHEN $14::boolean THEN 1 ELSE 0 END, $14::boolean)`,
    [
      n.id, n.kind, n.workspaceId, n.content.title, n.content.body, n.content.url, n.content.iconUrl, n.content.imageUrl, n.targeting, n.targeted, n.siteId,
      n.fannedOut?.queued ?? 0, n.fannedOut?.cursor ?? '', n.fannedOut !== undefined,
    ],
  );
}

/** What POST /campaigns stores: a draft, or scheduled when `scheduledAt` is given. */
export interface NewCampaign {
  id: string;
  workspaceId: string;
  siteId: string;
  name: string;
  title: string;
  body: string;
  actionUrl: string | null;
  iconUrl: string | null;
  imageUrl: string | null;
  templateId: string | null;
  scheduledAt: Date | null;
  throttlePerMinute: number | null;
  /** Whom it goes to (a segment, or every active subscriber). */
  targeting: Targeting;
}

export async function insertCampaign(db: Queryable, c: NewCampaign): Promise<CampaignRow> {
  const { rows } = await db.query<CampaignRow>(
    `INSERT INTO campaigns (id, kind, workspace_id, site_id, name, title, body, url, icon_url, image_url, template_id, scheduled_at, due_at,
                            throttle_per_minute, status, targeting, targeted)
     VALUES ($1, 'campaign', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12, CASE WHEN $11::timestamptz IS NULL THEN 'draft' ELSE 'scheduled' END,
             $13, 0)
     RETURNING ${CAMPAIGN_COLUMNS}`,
    [c.id, c.workspaceId, c.siteId, c.name, c.title, c.body, c.actionUrl, c.iconUrl, c.imageUrl, c.templateId, c.scheduledAt, c.throttlePerMinute, c.targeting],
  );
  return rows[0] as CampaignRow;
}

/** A workspace's campaigns (sends included), newest first, after `after`. */
export async function listCampaigns(db: Queryable, workspaceId: string, after: PagePosition | undefined, limit: number): Promise<CampaignRow[]> {
  const { rows } = await db.query<CampaignRow>(
    `SELECT ${CAMPAIGN_COLUMNS} FROM campaigns
      WHERE workspace_id = $1 AND ${VISIBLE}
        AND ($2::bigint IS NULL OR (created_at, id) < (timestamptz 'epoch' + $2::bigint * interval '1 microsecond', $3))
      ORDER BY created_at DESC, id DESC LIMIT $4`,
    [workspaceId, after?.createdUs ?? null, after?.id ?? '', limit],
  );
  return rows;
}

/** A campaign as /campaigns shows it (undefined once deleted, and for a question's push). */
export async function findCampaign(db: Queryable, workspaceId: string, id: string): Promise<CampaignRow | undefined> {
  const { rows } = await db.query<CampaignRow>(`SELECT ${CAMPAIGN_COLUMNS} FROM campaigns WHERE workspace_id = $1 AND id = $2 AND ${VISIBLE}`, [workspaceId, id]);
  return rows[0];
}

/** Any campaign, deleted or a question's push included: what /notifications/{id} and the fan-out read. */
export async function findNotification(db: Queryable, workspaceId: string, id: string): Promise<CampaignRow | undefined> {
  const { rows } = await db.query<CampaignRow>(`SELECT ${CAMPAIGN_COLUMNS} FROM campaigns WHERE workspace_id = $1 AND id = $2`, [workspaceId, id]);
  return rows[0];
}

/** The columns an update may set, by name; values already in column form. */
export interface CampaignChanges {
  name?: string;
  title?: string;
  body?: string;
  url?: string | null;
  icon_url?: string | null;
  image_url?: string | null;
  scheduled_at?: Date | null;
  throttle_per_minute?: number | null;
  status?: CampaignStatus;
  targeting?: Targeting;
}

/**
 * Applies `changes` if the campaign is still in one of `from` (compare-and-set: a concurrent move
 * makes this change nothing and return undefined). A schedule set or cleared moves the timer with it.
 */
export async function updateCampaign(
  db: Queryable,
  workspaceId: string,
  id: string,
  from: readonly CampaignStatus[],
  changes: CampaignChanges,
  also: string[] = [],
): Promise<CampaignRow | undefined> {
  const columns = Object.keys(changes) as (keyof CampaignChanges)[];
  const assignments = columns.map((column, index) => `${column} = $${index + 4}`);
  // The timer follows the schedule (SET reads the old row, so from the parameter).
  const schedule = columns.indexOf('scheduled_at');
  if (schedule >= 0) assignments.push(`due_at = $${schedule + 4}`);
  const { rows } = await db.query<CampaignRow>(
    `UPDATE campaigns SET ${[...assignments, ...also, 'updated_at = clock_timestamp()'].join(', ')}
      WHERE workspace_id = $1 AND id = $2 AND ${VISIBLE} AND status = ANY($3) RETURNING ${CAMPAIGN_COLUMNS}`,
    [workspaceId, id, from, ...columns.map((column) => changes[column])],
  );
  return rows[0];
}

/**
 * Starts a draft or scheduled campaign (the caller's transaction also reserves the allowance and
 * queues the fan-out). With a claim token, only while that claim (the timer loop's) still holds.
 */
export async function markStarted(
  tx: Queryable,
  workspaceId: string,
  id: string,
  targeted: number,
  claim?: string,
): Promise<CampaignRow | undefined> {
  const { rows } = await tx.query<CampaignRow>(
    `UPDATE campaigns SET status = 'sending', targeted = $3, started_at = clock_timestamp(), updated_at = clock_timestamp(),
            start_error = NULL, due_at = NULL, claim = NULL, leased_until = NULL
      WHERE workspace_id = $1 AND id = $2 AND ${VISIBLE} AND status IN ('draft', 'scheduled') AND ($4::uuid IS NULL OR claim = $4)
      RETURNING ${CAMPAIGN_COLUMNS}`,
    [workspaceId, id, targeted, claim ?? null],
  );
  return rows[0];
}

/** A scheduled start that cannot happen: back to draft, with the reason shown on the campaign. */
export async function markStartFailed(db: Queryable, id: string, reason: string, claim: string): Promise<void> {
  await db.query(
    `UPDATE campaigns SET status = 'draft', start_error = $2, due_at = NULL, claim = NULL, leased_until = NULL, updated_at = clock_timestamp()
      WHERE id = $1 AND status = 'scheduled' AND claim = $3`,
    [id, reason, claim],
  );
}

/** Nothing more is sent: the fan-out stops at its next batch, the timer forgets it. */
export async function markDeleted(db: Queryable, workspaceId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE campaigns SET deleted_at = clock_timestamp(), due_at = NULL WHERE workspace_id = $1 AND id = $2 AND ${VISIBLE}`,
    [workspaceId, id],
  );
  return (rowCount ?? 0) > 0;
}

/** Whether the fan-out may queue more recipients now (not paused, deleted or finished). */
export async function fanoutMayContinue(db: Queryable, id: string): Promise<boolean> {
  const { rows } = await db.query(`SELECT 1 FROM campaigns WHERE id = $1 AND deleted_at IS NULL AND status = ANY($2)`, [id, RUNNING]);
  return rows.length > 0;
}

/** A throttled fan-out's next step: the timer loop queues it at `at`. */
export async function scheduleNextStep(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query(`UPDATE campaigns SET due_at = $2 WHERE id = $1 AND deleted_at IS NULL`, [id, at]);
  await wakeTimers(db);
}

/** The timer loop's NOTIFY channel: a campaign due soon is seen at once, not at the next poll. */
export const CAMPAIGN_TIMERS_CHANNEL = `${SCHEMA}_timers`;

export async function wakeTimers(db: Queryable): Promise<void> {
  await db.query(`NOTIFY ${CAMPAIGN_TIMERS_CHANNEL}`);
}

/** Campaigns with a timer: a scheduled start, or a running fan-out's next throttled step. */
export const CAMPAIGN_TIMERS: WorkTable = {
  table: `${SCHEMA}.campaigns`,
  key: ['id'],
  due: 'due_at',
  waiting: `deleted_at IS NULL AND status IN ('scheduled', 'sending', 'active')`,
  returning: 'id, workspace_id, status, scheduled_at',
};

export interface TimerRow {
  id: string;
  workspace_id: string;
  status: CampaignStatus;
  scheduled_at: Date | null;
}

/** A claimed fan-out step: clears the timer and queues the step, while the claim holds. */
export async function takeFanoutStep(tx: Queryable, id: string, claim: string): Promise<CampaignRow | undefined> {
  const { rows } = await tx.query<CampaignRow>(
    `UPDATE campaigns SET due_at = NULL, claim = NULL, leased_until = NULL WHERE id = $1 AND claim = $2 AND status IN ('sending', 'active')
     RETURNING ${CAMPAIGN_COLUMNS}`,
    [id, claim],
  );
  return rows[0];
}

/**
 * Claims an idempotency key inside the send's transaction. A concurrent request with the same
 * key waits on the primary key until this transaction ends, then sees the conflict.
 */
export async function claimIdempotencyKey(
  tx: Queryable,
  record: { workspaceId: string; keyId: string; key: string; requestHash: string; notificationId: string; sent: number },
): Promise<boolean> {
  const { rowCount } = await tx.query(
    `INSERT INTO send_requests (workspace_id, key_id, idempotency_key, request_hash, notification_id, sent)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
    [record.workspaceId, record.keyId, record.key, record.requestHash, record.notificationId, record.sent],
  );
  return rowCount === 1;
}

export function currentMonth(now = new Date()): string {
  return `${now.getUTCFullYear()}-${String(now.getUTCMonth() + 1).padStart(2, '0')}-01`;
}

/** Adds `count` to this month's usage if it stays within `limit`; returns the new total or undefined. */
export async function reserveAllowance(tx: Queryable, workspaceId: string, count: number, limit: number): Promise<number | undefined> {
  const { rows } = await tx.query<{ sent: string }>(
    `INSERT INTO monthly_usage AS u (workspace_id, month, sent) SELECT $1, $2::date, $3::bigint WHERE $3::bigint <= $4::bigint
     ON CONFLICT (workspace_id, month) DO UPDATE SET sent = u.sent + EXCLUDED.sent WHERE u.sent + EXCLUDED.sent <= $4::bigint
     RETURNING sent`,
    [workspaceId, currentMonth(), count, limit],
  );
  return rows[0] ? Number(rows[0].sent) : undefined;
}

export async function usedThisMonth(db: Queryable, workspaceId: string): Promise<number> {
  const { rows } = await db.query<{ sent: string }>(`SELECT sent FROM monthly_usage WHERE workspace_id = $1 AND month = $2::date`, [
    workspaceId,
    currentMonth(),
  ]);
  return Number(rows[0]?.sent ?? 0);
}

/** Queues (through the outbox, so it commits with the state) the fan-out of a started campaign. */
export async function enqueueNotificationQueued(
  tx: Queryable,
  n: { id: string; workspaceId: string; siteId: string; content: NotificationContent; targeting: Targeting },
): Promise<void> {
  const eventId = randomUUID();
  const payload = CampaignEvent.encode({
    eventId,
    occurredAt: new Date().toISOString(),
    workspaceId: n.workspaceId,
    kind: { $case: 'notificationQueued', value: { notificationId: n.id, siteId: n.siteId, content: n.content, targeting: n.targeting } },
  }).finish();
  await enqueue(tx, SCHEMA, [{ topic: topics.campaignEvents.name, key: n.id, payload, eventId }]);
}

/** Queues (through the outbox) a delivery job written in the transaction of its notification. */
export async function enqueueDeliveryJob(tx: Queryable, job: { key: string; value: Uint8Array }): Promise<void> {
  await enqueue(tx, SCHEMA, [{ topic: topics.deliveryJobs.name, key: job.key, payload: job.value }]);
}

export async function recordFanoutBatches(db: Queryable, id: string, batches: number, recipients: number, cursor: string): Promise<void> {
  await db.query(
    `UPDATE campaigns SET queued = queued + $3, fanout_cursor = $4, fanout_batches = fanout_batches + $2 WHERE id = $1`,
    [id, batches, recipients, cursor],
  );
}

/** The automatic move out of sending (or active): the fan-out is done and every queued push settled. Returns the completion, if this made it. */
async function completeWhenSettled(db: Queryable, id: string): Promise<Completed[]> {
  const { rows } = await db.query<Completed>(
    `UPDATE campaigns SET status = 'completed', completed_at = clock_timestamp(), updated_at = clock_timestamp()
      WHERE id = $1 AND status IN ('sending', 'active') AND fanout_done AND delivered + failed + expired >= queued
      RETURNING kind, EXTRACT(EPOCH FROM completed_at - coalesce(started_at, created_at))::float8 AS seconds`,
    [id],
  );
  return rows;
}

export async function finishFanout(db: Queryable, id: string): Promise<Completed[]> {
  await db.query(`UPDATE campaigns SET fanout_done = true, due_at = NULL WHERE id = $1`, [id]);
  return completeWhenSettled(db, id);
}

export async function applyDeliveryResult(
  tx: Queryable,
  result: { notificationId: string; delivered: number; failed: number; expired: number; lastStatusCode: number; lastOutcome: string; reportedAt: string },
): Promise<Completed[]> {
  const { rows } = await tx.query<{ workspace_id: string }>(
    `UPDATE campaigns
        SET delivered = delivered + $2, failed = failed + $3, expired = expired + $4,
            last_status_code = $5, last_outcome = $6, last_reported_at = $7
      WHERE id = $1 RETURNING workspace_id`,
    [result.notificationId, result.delivered, result.failed, result.expired, result.lastStatusCode, result.lastOutcome, result.reportedAt],
  );
  const workspaceId = rows[0]?.workspace_id;
  if (workspaceId !== undefined && result.delivered > 0) await countInMinute(tx, workspaceId, result.notificationId, 'sent', result.delivered, result.reportedAt);
  return completeWhenSettled(tx, result.notificationId);
}

/** A counter of the per-minute series (docs/campaigns.md, stats/series). */
export type SeriesCounter = 'sent' | 'delivered' | 'clicked' | 'dismissed';

/** Adds `count` to the minute of `at` (ISO 8601; empty: now), in the transaction of the lifetime counter. */
async function countInMinute(tx: Queryable, workspaceId: string, campaignId: string, counter: SeriesCounter, count: number, at: string): Promise<void> {
  await tx.query(
    `INSERT INTO campaign_stats_minutes (workspace_id, campaign_id, minute, ${counter})
     VALUES ($1, $2, date_trunc('minute', coalesce(NULLIF($4, '')::timestamptz, clock_timestamp()) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', $3)
     ON CONFLICT (workspace_id, campaign_id, minute) DO UPDATE SET ${counter} = campaign_stats_minutes.${counter} + EXCLUDED.${counter}`,
    [workspaceId, campaignId, count, at],
  );
}

/** The lifetime counter and the series counter each reported kind adds to. */
const ENGAGEMENT_COLUMNS: Record<string, { column: string; counter: SeriesCounter }> = {
  impression: { column: 'impressions', counter: 'delivered' },
  click: { column: 'clicks', counter: 'clicked' },
  dismiss: { column: 'dismissals', counter: 'dismissed' },
};

/** One more impression, click or dismissal of a campaign at `at` (the caller counts each report once). */
export async function countEngagement(tx: Queryable, workspaceId: string, id: string, kind: string, at: string): Promise<void> {
  const counted = ENGAGEMENT_COLUMNS[kind];
  if (!counted) throw new Error(`unknown engagement kind ${kind}`);
  const { rowCount } = await tx.query(`UPDATE campaigns SET ${counted.column} = ${counted.column} + 1 WHERE workspace_id = $1 AND id = $2`, [workspaceId, id]);
  if ((rowCount ?? 0) > 0) await countInMinute(tx, workspaceId, id, counted.counter, 1, at);
}

export interface SeriesRow {
  at: Date;
  sent: string;
  delivered: string;
  clicked: string;
  dismissed: string;
}

/** Every bucket from `first` to `last` (starts, `seconds` apart) with the sums of its minutes; zeros included. */
export async function statsSeries(db: Queryable, workspaceId: string, campaignId: string, first: Date, last: Date, seconds: number): Promise<SeriesRow[]> {
  const { rows } = await db.query<SeriesRow>(
    `SELECT b.at, coalesce(sum(m.sent), 0) AS sent, coalesce(sum(m.delivered), 0) AS delivered,
            coalesce(sum(m.clicked), 0) AS clicked, coalesce(sum(m.dismissed), 0) AS dismissed
       FROM generate_series($3::timestamptz, $4::timestamptz, make_interval(secs => $5)) AS b(at)
       LEFT JOIN campaign_stats_minutes m
         ON m.workspace_id = $1 AND m.campaign_id = $2 AND m.minute >= b.at AND m.minute < b.at + make_interval(secs => $5)
      GROUP BY b.at ORDER BY b.at`,
    [workspaceId, campaignId, first, last, seconds],
  );
  return rows;
}

/** A template's editable content, column by column (null clears an optional URL). */
export interface TemplateContent {
  name: string;
  title: string;
  body: string;
  icon_url: string | null;
  image_url: string | null;
  action_url: string | null;
}

export interface TemplateRow extends TemplateContent {
  id: string;
  workspace_id: string;
  created_at: Date;
  updated_at: Date;
  created_us: string;
}

const TEMPLATE_COLUMNS = `id, workspace_id, name, title, body, icon_url, image_url, action_url, created_at, updated_at, ${CREATED_US_SQL} AS created_us`;

export async function insertTemplate(db: Queryable, id: string, workspaceId: string, content: TemplateContent): Promise<TemplateRow> {
  const { rows } = await db.query<TemplateRow>(
    `INSERT INTO templates (id, workspace_id, name, title, body, icon_url, image_url, action_url) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     RETURNING ${TEMPLATE_COLUMNS}`,
    [id, workspaceId, content.name, content.title, content.body, content.icon_url, content.image_url, content.action_url],
  );
  return rows[0] as TemplateRow;
}

/** A workspace's templates, newest first, after `after` (the last row of the previous page). */
export async function listTemplates(db: Queryable, workspaceId: string, after: PagePosition | undefined, limit: number): Promise<TemplateRow[]> {
  const { rows } = await db.query<TemplateRow>(
    `SELECT ${TEMPLATE_COLUMNS} FROM templates
      WHERE workspace_id = $1
        AND ($2::bigint IS NULL OR (created_at, id) < (timestamptz 'epoch' + $2::bigint * interval '1 microsecond', $3))
      ORDER BY created_at DESC, id DESC LIMIT $4`,
    [workspaceId, after?.createdUs ?? null, after?.id ?? '', limit],
  );
  return rows;
}

export async function findTemplate(db: Queryable, workspaceId: string, id: string): Promise<TemplateRow | undefined> {
  const { rows } = await db.query<TemplateRow>(`SELECT ${TEMPLATE_COLUMNS} FROM templates WHERE workspace_id = $1 AND id = $2`, [workspaceId, id]);
  return rows[0];
}

/** Changes the given columns only; undefined when the workspace has no such template. */
export async function updateTemplate(db: Queryable, workspaceId: string, id: string, changes: Partial<TemplateContent>): Promise<TemplateRow | undefined> {
  const columns = Object.keys(changes) as (keyof TemplateContent)[];
  const assignments = columns.map((column, index) => `${column} = $${index + 3}`);
  const { rows } = await db.query<TemplateRow>(
    `UPDATE templates SET ${[...assignments, 'updated_at = clock_timestamp()'].join(', ')} WHERE workspace_id = $1 AND id = $2 RETURNING ${TEMPLATE_COLUMNS}`,
    [workspaceId, id, ...columns.map((column) => changes[column])],
  );
  return rows[0];
}

export async function deleteTemplate(db: Queryable, workspaceId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query(`DELETE FROM templates WHERE workspace_id = $1 AND id = $2`, [workspaceId, id]);
  return (rowCount ?? 0) > 0;
}
