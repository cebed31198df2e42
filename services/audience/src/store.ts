import { fileURLToPath } from 'node:url';

import { enqueue, topics } from '@herald/bus';
import { CREATED_US_SQL, withTransaction, type PagePosition, type Pool, type Queryable } from '@herald/db';
import { randomId, SUBSCRIBER_LIMITS, type SubscriberStatus } from '@herald/domain';
import { AudienceEvent } from '@herald/proto/herald/audience/v1/events';
import type { SegmentFilter } from '@herald/proto/herald/audience/v1/segments';

/** Every SQL statement of the audience service. Each query is scoped by workspace id. */

export const SCHEMA = 'audience';
export const migrationsDir = fileURLToPath(new URL('../../migrations', import.meta.url));

export interface SubscriberRow {
  id: string;
  site_id: string;
  status: SubscriberStatus;
  external_id: string | null;
  external_id_verified: boolean;
  /** A console member's device (POST /me/devices): that member's id. */
  member_id: string | null;
  tags: string[];
  custom_data: Record<string, unknown>;
  browser: string | null;
  os: string | null;
  country: string | null;
  language: string | null;
  timezone: string | null;
  created_at: Date;
  updated_at: Date;
  unsubscribed_at: Date | null;
  /** Read only to derive the push service's origin; never leaves the service otherwise. */
  endpoint: string;
  /** created_at in microseconds since the epoch (exact, unlike a JS Date): the list cursor. */
  created_us: string;
}

const subscriberColumns = `id, site_id, status, external_id, external_id_verified, member_id, tags, custom_data, browser, os, country, language, timezone,
  created_at, updated_at, unsubscribed_at, endpoint, ${CREATED_US_SQL} AS created_us`;

/** A subscriber that stopped being active, as events name it. */
interface Departed {
  id: string;
  site_id: string;
  external_id: string | null;
}

type EventKind = NonNullable<AudienceEvent['kind']>;

async function recordEvents(tx: Queryable, workspaceId: string, events: Array<{ siteId: string; kind: EventKind }>): Promise<void> {
  const occurredAt = new Date().toISOString();
  await enqueue(
    tx,
    SCHEMA,
    events.map(({ siteId, kind }) => {
      const eventId = crypto.randomUUID();
      const payload = AudienceEvent.encode({ eventId, occurredAt, workspaceId, siteId, kind }).finish();
      return { topic: topics.audienceEvents.name, key: workspaceId, payload, eventId };
    }),
  );
}

const subscribed = (row: Departed): { siteId: string; kind: EventKind } => ({
  siteId: row.site_id,
  kind: { $case: 'subscribed', value: { subscriberId: row.id, externalId: row.external_id ?? '' } },
});

const unsubscribed = (row: Departed, reason: string): { siteId: string; kind: EventKind } => ({
  siteId: row.site_id,
  kind: { $case: 'unsubscribed', value: { subscriberId: row.id, externalId: row.external_id ?? '', reason } },
});

/** A concurrent writer changed the row a transaction was about to change. */
class RaceLost extends Error {}

/** Runs `fn` in a transaction, again when a concurrent writer took (or removed) the same endpoint first. */
async function inTransactionRetryingRaces<T>(pool: Pool, fn: (tx: Queryable) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await withTransaction(pool, fn);
    } catch (err) {
      const uniqueViolation = (err as { code?: string }).code === '23505';
      if (!(uniqueViolation || err instanceof RaceLost) || attempt >= 3) throw err;
    }
  }
}

/** `tags` followed by those of `$n` it does not hold yet, at most the tag limit. */
const mergedTags = (param: string): string =>
  `(tags || ARRAY(SELECT tag FROM unnest(${param}::text[]) AS tag WHERE tag <> ALL (tags)))[1:${SUBSCRIBER_LIMITS.tags}]`;

// ---- counts --------------------------------------------------------------------------------

/** Active subscribers of the site, the verified ones among them, and the verified ones of `externalId` (approver devices); members' devices apart. */
export async function countActive(db: Queryable, workspaceId: string, externalId: string): Promise<{ site: number; siteVerified: number; externalId: number }> {
  const { rows } = await db.query<{ site: string; verified: string; external: string }>(
    `SELECT count(*) AS site, count(*) FILTER (WHERE external_id_verified) AS verified,
            count(*) FILTER (WHERE external_id_verified AND external_id = $2) AS external
       FROM subscribers WHERE workspace_id = $1 AND status = 'active' AND member_id IS NULL`,
    [workspaceId, externalId],
  );
  return { site: Number(rows[0]?.site ?? 0), siteVerified: Number(rows[0]?.verified ?? 0), externalId: Number(rows[0]?.external ?? 0) };
}

/** The workspace's subscribers by status; members' devices are not counted (they are no audience). */
export async function countSubscribers(db: Queryable, workspaceId: string): Promise<{ total: string; active: string; unsubscribed: string }> {
  const { rows } = await db.query<{ total: string; active: string; unsubscribed: string }>(
    `SELECT count(*) AS total,
            count(*) FILTER (WHERE status = 'active') AS active,
            count(*) FILTER (WHERE status = 'unsubscribed') AS unsubscribed
       FROM subscribers WHERE workspace_id = $1 AND member_id IS NULL`,
    [workspaceId],
  );
  return rows[0] ?? { total: '0', active: '0', unsubscribed: '0' };
}

// ---- the REST subscriber endpoints ---------------------------------------------------------

export interface ListFilter {
  workspaceId: string;
  limit: number;
  /** Keyset position: rows strictly older than (createdUs, id) in (created_at DESC, id DESC). */
  after?: { createdUs: string; id: string };
  status?: string;
  tags?: string[];
  externalId?: string;
  /** Only this member's devices; absent: only subscribers that are no member's device. */
  memberId?: string;
}

/** Up to `limit` subscribers, newest first. */
export async function listSubscribers(db: Queryable, filter: ListFilter): Promise<SubscriberRow[]> {
  const params: unknown[] = [filter.workspaceId];
  const where = ['workspace_id = $1'];
  const bind = (value: unknown): string => `$${params.push(value)}`;
  if (filter.after) {
    where.push(`(created_at, id) < (timestamptz 'epoch' + ${bind(filter.after.createdUs)}::bigint * interval '1 microsecond', ${bind(filter.after.id)})`);
  }
  if (filter.status) where.push(`status = ${bind(filter.status)}`);
  if (filter.tags?.length) where.push(`tags @> ${bind(filter.tags)}::text[]`);
  if (filter.externalId) where.push(`external_id = ${bind(filter.externalId)}`);
  where.push(filter.memberId ? `member_id = ${bind(filter.memberId)}` : 'member_id IS NULL');
  const { rows } = await db.query<SubscriberRow>(
    `SELECT ${subscriberColumns} FROM subscribers WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT ${bind(filter.limit)}`,
    params,
  );
  return rows;
}

export async function findSubscriber(db: Queryable, workspaceId: string, id: string): Promise<SubscriberRow | undefined> {
  // A member's device is the member's own (the console's /me/devices): the subscriber API never reaches it.
  const { rows } = await db.query<SubscriberRow>(`SELECT ${subscriberColumns} FROM subscribers WHERE workspace_id = $1 AND id = $2 AND member_id IS NULL`, [
    workspaceId,
    id,
  ]);
  return rows[0];
}

export interface SubscriberPatch {
  tags?: string[];
  /** null clears it. */
  externalId?: string | null;
  customData?: Record<string, unknown>;
}

export async function updateSubscriber(db: Queryable, workspaceId: string, id: string, patch: SubscriberPatch): Promise<SubscriberRow | undefined> {
  const { rows } = await db.query<SubscriberRow>(
    `UPDATE subscribers SET
       tags        = CASE WHEN $3 THEN $4::text[] ELSE tags END,
       external_id = CASE WHEN $5 THEN $6 ELSE external_id END,
       -- Only a proof verifies an external id: changing it here leaves it unverified.
       external_id_verified = external_id_verified AND (NOT $5 OR $6 IS NOT DISTINCT FROM external_id),
       custom_data = CASE WHEN $7 THEN $8::jsonb ELSE custom_data END,
       updated_at  = now()
     WHERE workspace_id = $1 AND id = $2 AND member_id IS NULL
     RETURNING ${subscriberColumns}`,
    [
      workspaceId,
      id,
      patch.tags !== undefined,
      patch.tags ?? [],
      patch.externalId !== undefined,
      patch.externalId ?? null,
      patch.customData !== undefined,
      JSON.stringify(patch.customData ?? {}),
    ],
  );
  return rows[0];
}

/** Removes the subscriber and its push subscription; false when there is none (with `memberId`, none of that member's devices; without, a member's device is none). */
export async function deleteSubscriber(pool: Pool, workspaceId: string, id: string, memberId: string): Promise<boolean> {
  return withTransaction(pool, async (tx) => {
    const { rows } = await tx.query<Departed>(
      `DELETE FROM subscribers WHERE workspace_id = $1 AND id = $2 AND member_id IS NOT DISTINCT FROM NULLIF($3, '') RETURNING id, site_id, external_id`,
      [workspaceId, id, memberId],
    );
    const row = rows[0];
    if (!row) return false;
    await recordEvents(tx, workspaceId, [unsubscribed(row, 'deleted')]);
    return true;
  });
}

/** A member left the workspace: their devices go, each with an Unsubscribed event (reason "deleted"). Returns how many went. */
export async function deleteMemberDevices(tx: Queryable, workspaceId: string, memberId: string): Promise<number> {
  const { rows } = await tx.query<Departed>(
    `DELETE FROM subscribers WHERE workspace_id = $1 AND member_id = $2 RETURNING id, site_id, external_id`,
    [workspaceId, memberId],
  );
  if (rows.length > 0) await recordEvents(tx, workspaceId, rows.map((row) => unsubscribed(row, 'deleted')));
  return rows.length;
}

// ---- the browser SDK's endpoints ------------------------------------------------------------

export interface PushSubscriptionInput {
  workspaceId: string;
  siteId: string;
  endpoint: string;
  p256dh: string;
  auth: string;
}

export interface SubscribeInput extends PushSubscriptionInput {
  externalId: string;
  /** externalId was proven; false stores it unverified. */
  externalIdVerified: boolean;
  /** A console member's device, named from their session; '' for every other subscribe (which keeps the owner a known endpoint has). */
  memberId: string;
  tags: string[];
  browser: string;
  os: string;
  language: string;
  timezone: string;
  country: string;
}

/**
 * Idempotent on (workspace, endpoint). A new endpoint is inserted; a known one gets the new keys,
 * the metadata given (what is not given is kept; tags are added to those it holds) and is active
 * again. Subscribed is emitted when a subscriber is created or becomes active again.
 */
export async function subscribe(pool: Pool, input: SubscribeInput): Promise<{ id: string; created: boolean }> {
  return inTransactionRetryingRaces(pool, async (tx) => {
    const values = [
      input.workspaceId,
      input.endpoint,
      input.p256dh,
      input.auth,
      input.externalId,
      input.tags,
      input.browser,
      input.os,
      input.language,
      input.timezone,
      input.country,
      input.externalIdVerified,
      input.memberId,
    ];
    const inserted = await tx.query<Departed>(
      `INSERT INTO subscribers (id, site_id, workspace_id, endpoint, p256dh, auth, external_id, tags, browser, os, language, timezone, country,
                                external_id_verified, member_id)
       VALUES ($14, $15, $1, $2, $3, $4, NULLIF($5, ''), $6, NULLIF($7, ''), NULLIF($8, ''), NULLIF($9, ''), NULLIF($10, ''), NULLIF($11, ''),
               $5 <> '' AND $12, NULLIF($13, ''))
       ON CONFLICT (workspace_id, endpoint) DO NOTHING
       RETURNING id, site_id, external_id`,
      [...values, `sub_${randomId()}`, input.siteId],
    );
    const created = inserted.rows[0];
    if (created) {
      await recordEvents(tx, input.workspaceId, [subscribed(created)]);
      return { id: created.id, created: true };
    }
    // The endpoint is known: lock it, so the status it had is the status we change.
    const { rows: existing } = await tx.query<{ status: string }>(
      `SELECT status FROM subscribers WHERE workspace_id = $1 AND endpoint = $2 FOR UPDATE`,
      [input.workspaceId, input.endpoint],
    );
    // Deleted since the INSERT looked: start again.
    if (!existing[0]) throw new RaceLost('subscriber deleted while subscribing');
    const { rows } = await tx.query<Departed>(
      `UPDATE subscribers SET
         p256dh = $3, auth = $4,
         external_id = COALESCE(NULLIF($5, ''), external_id),
         -- An external id given now is verified only with its proof; none given keeps the state.
         external_id_verified = CASE WHEN $5 = '' THEN external_id_verified ELSE $12 END,
         tags = ${mergedTags('$6')},
         browser = COALESCE(NULLIF($7, ''), browser),
         os = COALESCE(NULLIF($8, ''), os),
         language = COALESCE(NULLIF($9, ''), language),
         timezone = COALESCE(NULLIF($10, ''), timezone),
         country = COALESCE(NULLIF($11, ''), country),
         -- Only a member's session names the member; a public subscribe leaves the owner as it is.
         member_id = COALESCE(NULLIF($13, ''), member_id),
         status = 'active', unsubscribed_at = NULL, updated_at = now()
       WHERE workspace_id = $1 AND endpoint = $2
       RETURNING id, site_id, external_id`,
      values,
    );
    const row = rows[0] as Departed;
    if (existing[0].status !== 'active') await recordEvents(tx, input.workspaceId, [subscribed(row)]);
    return { id: row.id, created: false };
  });
}

interface EndpointRow extends Departed {
  endpoint: string;
  status: string;
  tags: string[];
  external_id_verified: boolean;
}

/**
 * The browser replaced its push subscription: the subscriber found by the old endpoint moves to
 * the new one (same id, tags, external id and custom data) and is active. When the new endpoint
 * is already another subscriber (the page subscribed it before the change arrived), that
 * duplicate is removed (Unsubscribed, reason "deleted") and its tags and external id are merged
 * into the surviving subscriber where it has none. Undefined when the old endpoint is unknown.
 */
export async function changeSubscription(pool: Pool, input: PushSubscriptionInput & { oldEndpoint: string }): Promise<string | undefined> {
  return inTransactionRetryingRaces(pool, async (tx) => {
    // Both rows locked in one statement, in id order, so two crossing changes cannot deadlock.
    const { rows } = await tx.query<EndpointRow>(
      `SELECT id, site_id, external_id, external_id_verified, endpoint, status, tags FROM subscribers
        WHERE workspace_id = $1 AND endpoint IN ($2, $3) ORDER BY id FOR UPDATE`,
      [input.workspaceId, input.oldEndpoint, input.endpoint],
    );
    const survivor = rows.find((row) => row.endpoint === input.oldEndpoint);
    if (!survivor) return undefined;
    const duplicate = rows.find((row) => row.endpoint === input.endpoint && row.id !== survivor.id);
    const events: Array<{ siteId: string; kind: EventKind }> = [];
    if (duplicate) {
      await tx.query(`DELETE FROM subscribers WHERE workspace_id = $1 AND id = $2`, [input.workspaceId, duplicate.id]);
      events.push(unsubscribed(duplicate, 'deleted'));
    }
    const { rows: updated } = await tx.query<Departed>(
      `UPDATE subscribers SET
         endpoint = $3, p256dh = $4, auth = $5,
         external_id_verified = CASE WHEN external_id IS NULL THEN $8 ELSE external_id_verified END,
         external_id = COALESCE(external_id, $6),
         tags = ${mergedTags('$7')},
         status = 'active', unsubscribed_at = NULL, updated_at = now()
       WHERE workspace_id = $1 AND id = $2
       RETURNING id, site_id, external_id`,
      [input.workspaceId, survivor.id, input.endpoint, input.p256dh, input.auth, duplicate?.external_id ?? null, duplicate?.tags ?? [], duplicate?.external_id_verified ?? false],
    );
    if (survivor.status !== 'active') events.push(subscribed(updated[0] as Departed));
    if (events.length > 0) await recordEvents(tx, input.workspaceId, events);
    return survivor.id;
  });
}

/**
 * The browser unsubscribed: an active subscriber becomes `unsubscribed` (Unsubscribed, reason
 * "unsubscribed"); one already inactive is left as it is. Undefined when the endpoint is unknown.
 */
export async function unsubscribe(pool: Pool, workspaceId: string, endpoint: string): Promise<string | undefined> {
  return withTransaction(pool, async (tx) => {
    const { rows } = await tx.query<Departed & { status: string }>(
      `SELECT id, site_id, external_id, status FROM subscribers WHERE workspace_id = $1 AND endpoint = $2 FOR UPDATE`,
      [workspaceId, endpoint],
    );
    const row = rows[0];
    if (!row) return undefined;
    if (row.status === 'active') {
      await tx.query(
        `UPDATE subscribers SET status = 'unsubscribed', unsubscribed_at = now(), updated_at = now() WHERE workspace_id = $1 AND id = $2`,
        [workspaceId, row.id],
      );
      await recordEvents(tx, workspaceId, [unsubscribed(row, 'unsubscribed')]);
    }
    return row.id;
  });
}

// ---- sending --------------------------------------------------------------------------------

export interface Targeting {
  subscriberIds: string[];
  externalIds: string[];
  tags: string[];
  /** The filter of the segment the targeting names, if any. */
  segment?: SegmentFilter;
  /** Only approver devices: subscribers with a verified external id, or members' devices. */
  verifiedOnly: boolean;
  /** These members' devices; empty: members' devices are left out. */
  memberIds: string[];
}

/** Active subscribers of the workspace matching the targeting: AND across kinds, OR within a list of ids. */
function targetingWhere(workspaceId: string, targeting: Targeting, params: unknown[]): string {
  const bind = (value: unknown): string => `$${params.push(value)}`;
  const where = [`workspace_id = ${bind(workspaceId)}`, `status = 'active'`];
  if (targeting.subscriberIds.length > 0) where.push(`id = ANY(${bind(targeting.subscriberIds)}::text[])`);
  if (targeting.externalIds.length > 0) where.push(`external_id = ANY(${bind(targeting.externalIds)}::text[])`);
  if (targeting.tags.length > 0) where.push(`tags @> ${bind(targeting.tags)}::text[]`);
  if (targeting.segment) where.push(...segmentConditions(targeting.segment, bind));
  // A member's device is reached only by targeting that names the member (a question to them).
  where.push(targeting.memberIds.length > 0 ? `member_id = ANY(${bind(targeting.memberIds)}::text[])` : 'member_id IS NULL');
  if (targeting.verifiedOnly) where.push('(external_id_verified OR member_id IS NOT NULL)');
  return where.join(' AND ');
}

export async function countTargets(db: Queryable, workspaceId: string, targeting: Targeting): Promise<string> {
  const params: unknown[] = [];
  const { rows } = await db.query<{ count: string }>(`SELECT count(*) AS count FROM subscribers WHERE ${targetingWhere(workspaceId, targeting, params)}`, params);
  return rows[0]?.count ?? '0';
}

export interface TargetRow {
  subscriber_id: string;
  endpoint: string;
  p256dh: string;
  auth: string;
  /** With the profile only. */
  external_id?: string | null;
  /** customData as JSON text, with the profile only. */
  custom_data?: string;
}

/** One keyset page of targets: ids greater than `after`, ascending; with their profile when asked. */
export async function targetPage(db: Queryable, workspaceId: string, targeting: Targeting, after: string, limit: number, withProfile = false): Promise<TargetRow[]> {
  const params: unknown[] = [];
  const where = targetingWhere(workspaceId, targeting, params);
  params.push(after, limit);
  const profile = withProfile ? ', external_id, custom_data::text AS custom_data' : '';
  const { rows } = await db.query<TargetRow>(
    `SELECT id AS subscriber_id, endpoint, p256dh, auth${profile} FROM subscribers
      WHERE ${where} AND id > $${params.length - 1} ORDER BY id LIMIT $${params.length}`,
    params,
  );
  return rows;
}

/**
 * Push services said these subscriptions are gone: the active ones among them become `status`
 * (expired or bounced), each with an Unsubscribed event (reason = status). Returns how many changed.
 */
export async function expireSubscribers(tx: Queryable, workspaceId: string, ids: string[], status: 'expired' | 'bounced'): Promise<number> {
  if (ids.length === 0) return 0;
  const { rows } = await tx.query<Departed>(
    `UPDATE subscribers SET status = $3, unsubscribed_at = now(), updated_at = now()
      WHERE workspace_id = $1 AND id = ANY($2::text[]) AND status = 'active'
      RETURNING id, site_id, external_id`,
    [workspaceId, ids, status],
  );
  if (rows.length > 0) await recordEvents(tx, workspaceId, rows.map((row) => unsubscribed(row, status)));
  return rows.length;
}

// ---- segments -------------------------------------------------------------------------------

export interface SegmentRow {
  id: string;
  workspace_id: string;
  name: string;
  /** The SegmentFilter message in its JSON form. */
  filter: unknown;
  created_at: Date;
  updated_at: Date;
  created_us: string;
}

const SEGMENT_COLUMNS = `id, workspace_id, name, filter, created_at, updated_at, ${CREATED_US_SQL} AS created_us`;

export async function insertSegment(db: Queryable, id: string, workspaceId: string, name: string, filter: unknown): Promise<SegmentRow> {
  const { rows } = await db.query<SegmentRow>(`INSERT INTO segments (id, workspace_id, name, filter) VALUES ($1, $2, $3, $4) RETURNING ${SEGMENT_COLUMNS}`, [
    id,
    workspaceId,
    name,
    JSON.stringify(filter),
  ]);
  return rows[0] as SegmentRow;
}

/** A workspace's segments, newest first, after `after` (the last row of the previous page). */
export async function listSegments(db: Queryable, workspaceId: string, after: PagePosition | undefined, limit: number): Promise<SegmentRow[]> {
  const { rows } = await db.query<SegmentRow>(
    `SELECT ${SEGMENT_COLUMNS} FROM segments
      WHERE workspace_id = $1 AND ($2::bigint IS NULL OR (created_at, id) < (timestamptz 'epoch' + $2::bigint * interval '1 microsecond', $3))
      ORDER BY created_at DESC, id DESC LIMIT $4`,
    [workspaceId, after?.createdUs ?? null, after?.id ?? '', limit],
  );
  return rows;
}

export async function findSegment(db: Queryable, workspaceId: string, id: string): Promise<SegmentRow | undefined> {
  const { rows } = await db.query<SegmentRow>(`SELECT ${SEGMENT_COLUMNS} FROM segments WHERE workspace_id = $1 AND id = $2`, [workspaceId, id]);
  return rows[0];
}

/** Changes the name and/or replaces the filter; undefined when the workspace has no such segment. */
export async function updateSegment(db: Queryable, workspaceId: string, id: string, changes: { name?: string; filter?: unknown }): Promise<SegmentRow | undefined> {
  const { rows } = await db.query<SegmentRow>(
    `UPDATE segments SET name = COALESCE($3, name), filter = COALESCE($4::jsonb, filter), updated_at = clock_timestamp()
      WHERE workspace_id = $1 AND id = $2 RETURNING ${SEGMENT_COLUMNS}`,
    [workspaceId, id, changes.name ?? null, changes.filter === undefined ? null : JSON.stringify(changes.filter)],
  );
  return rows[0];
}

export async function deleteSegment(db: Queryable, workspaceId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query(`DELETE FROM segments WHERE workspace_id = $1 AND id = $2`, [workspaceId, id]);
  return (rowCount ?? 0) > 0;
}

/** `value` as a LIKE pattern matching itself literally. */
const likeLiteral = (value: string): string => value.replace(/[\\%_]/g, (char) => `\\${char}`);

/**
 * A device field (browser, os) matching one of `names` case-insensitively, whole or as its first
 * words ("firefox" matches "Firefox 128"): both forms use the (workspace_id, lower(column)
 * text_pattern_ops) index.
 */
function deviceMatch(column: 'browser' | 'os', names: string[], bind: (value: unknown) => string): string {
  // Both sides folded by PostgreSQL's lower(), so they fold alike whatever the characters.
  const alternatives = names.map((name) => `lower(${column}) = lower(${bind(name)}) OR lower(${column}) LIKE lower(${bind(`${likeLiteral(name)} %`)})`);
  return `(${alternatives.join(' OR ')})`;
}

/**
 * The conditions of a segment's filter (already validated), ANDed; each dimension is one the
 * indexes of 002/003 serve. Values are bound, never spliced.
 */
function segmentConditions(filter: SegmentFilter, bind: (value: unknown) => string): string[] {
  const where: string[] = [];
  if (filter.tagsAll.length > 0) where.push(`tags @> ${bind(filter.tagsAll)}::text[]`);
  if (filter.tagsAny.length > 0) where.push(`tags && ${bind(filter.tagsAny)}::text[]`);
  if (filter.tagsNone.length > 0) where.push(`NOT (tags && ${bind(filter.tagsNone)}::text[])`);
  if (filter.hasExternalId !== undefined) where.push(filter.hasExternalId ? 'external_id IS NOT NULL' : 'external_id IS NULL');
  if (filter.statuses.length > 0) where.push(`status = ANY(${bind(filter.statuses)}::text[])`);
  if (filter.browsers.length > 0) where.push(deviceMatch('browser', filter.browsers, bind));
  if (filter.oses.length > 0) where.push(deviceMatch('os', filter.oses, bind));
  if (filter.countries.length > 0) where.push(`country = ANY(${bind(filter.countries)}::text[])`);
  if (filter.customDataJson) where.push(`custom_data @> ${bind(filter.customDataJson)}::jsonb`);
  if (filter.createdAfter) where.push(`created_at >= ${bind(filter.createdAfter)}::timestamptz`);
  if (filter.createdBefore) where.push(`created_at < ${bind(filter.createdBefore)}::timestamptz`);
  return where;
}

/** Subscribers of the workspace matching `filter`: active ones, and all (in the statuses it allows). */
export async function countSegment(db: Queryable, workspaceId: string, filter: SegmentFilter): Promise<{ active: string; total: string }> {
  const params: unknown[] = [workspaceId];
  const bind = (value: unknown): string => `$${params.push(value)}`;
  const where = ['workspace_id = $1', ...segmentConditions(filter, bind)];
  const { rows } = await db.query<{ active: string; total: string }>(
    `SELECT count(*) FILTER (WHERE status = 'active') AS active, count(*) AS total FROM subscribers WHERE ${where.join(' AND ')}`,
    params,
  );
  return rows[0] ?? { active: '0', total: '0' };
}
