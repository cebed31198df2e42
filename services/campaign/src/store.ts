import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';

import { enqueue, topics } from '@herald/bus';
import { CREATED_US_SQL, type PagePosition, type Queryable } from '@herald/db';
import type { Targeting } from '@herald/proto/herald/audience/v1/audience';
import type { NotificationContent } from '@herald/proto/herald/campaign/v1/campaign';
import { CampaignEvent } from '@herald/proto/herald/campaign/v1/events';

/** Every SQL statement of the campaign service. Each query is scoped by workspace id. */

export const SCHEMA = 'campaign';
export const migrationsDir = fileURLToPath(new URL('../../migrations', import.meta.url));

export interface NotificationRow {
  id: string;
  workspace_id: string;
  site_id: string;
  status: 'queued' | 'sending' | 'completed';
  title: string;
  body: string;
  url: string | null;
  icon_url: string | null;
  image_url: string | null;
  targeting: Targeting;
  targeted: string;
  queued: string;
  fanout_cursor: string;
  fanout_batches: number;
  fanout_done: boolean;
  delivered: string;
  failed: string;
  expired: string;
  last_status_code: number | null;
  last_outcome: string | null;
  last_reported_at: Date | null;
  created_at: Date;
  completed_at: Date | null;
}

export interface SendRecord {
  request_hash: string;
  notification_id: string;
  sent: string;
}

export async function findSendRecord(db: Queryable, workspaceId: string, idempotencyKey: string): Promise<SendRecord | undefined> {
  const { rows } = await db.query<SendRecord>(
    `SELECT request_hash, notification_id, sent FROM send_requests WHERE workspace_id = $1 AND idempotency_key = $2`,
    [workspaceId, idempotencyKey],
  );
  return rows[0];
}

export async function insertNotification(
  tx: Queryable,
  n: { id: string; workspaceId: string; siteId: string; content: NotificationContent; targeting: Targeting; targeted: number },
): Promise<void> {
  await tx.query(
    `INSERT INTO notifications (id, workspace_id, site_id, title, body, url, icon_url, image_url, targeting, targeted)
     VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), NULLIF($7, ''), NULLIF($8, ''), $9, $10)`,
    [n.id, n.workspaceId, n.siteId, n.content.title, n.content.body, n.content.url, n.content.iconUrl, n.content.imageUrl, n.targeting, n.targeted],
  );
}

/**
 * Claims an idempotency key inside the send's transaction. A concurrent request with the same
 * key waits on the primary key until this transaction ends, then sees the conflict.
 */
export async function claimIdempotencyKey(
  tx: Queryable,
  record: { workspaceId: string; key: string; requestHash: string; notificationId: string; sent: number },
): Promise<boolean> {
  const { rowCount } = await tx.query(
    `INSERT INTO send_requests (workspace_id, idempotency_key, request_hash, notification_id, sent)
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
    [record.workspaceId, record.key, record.requestHash, record.notificationId, record.sent],
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

export async function findNotification(db: Queryable, workspaceId: string, id: string): Promise<NotificationRow | undefined> {
  const { rows } = await db.query<NotificationRow>(`SELECT * FROM notifications WHERE workspace_id = $1 AND id = $2`, [workspaceId, id]);
  return rows[0];
}

export async function recordFanoutBatches(db: Queryable, id: string, batches: number, recipients: number, cursor: string): Promise<void> {
  await db.query(
    `UPDATE notifications SET queued = queued + $3, fanout_cursor = $4, fanout_batches = fanout_batches + $2, status = 'sending'
      WHERE id = $1`,
    [id, batches, recipients, cursor],
  );
}

const completeWhenSettled = `
  status = CASE WHEN fanout_done AND delivered + failed + expired >= queued THEN 'completed' ELSE 'sending' END,
  completed_at = CASE WHEN fanout_done AND delivered + failed + expired >= queued THEN COALESCE(completed_at, now()) END`;

export async function finishFanout(db: Queryable, id: string): Promise<void> {
  await db.query(`UPDATE notifications SET fanout_done = true WHERE id = $1`, [id]);
  await db.query(`UPDATE notifications SET ${completeWhenSettled} WHERE id = $1`, [id]);
}

export async function applyDeliveryResult(
  tx: Queryable,
  result: { notificationId: string; delivered: number; failed: number; expired: number; lastStatusCode: number; lastOutcome: string; reportedAt: string },
): Promise<void> {
  await tx.query(
    `UPDATE notifications
        SET delivered = delivered + $2, failed = failed + $3, expired = expired + $4,
            last_status_code = $5, last_outcome = $6, last_reported_at = $7
      WHERE id = $1`,
    [result.notificationId, result.delivered, result.failed, result.expired, result.lastStatusCode, result.lastOutcome, result.reportedAt],
  );
  await tx.query(`UPDATE notifications SET ${completeWhenSettled} WHERE id = $1`, [result.notificationId]);
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
