import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';

import { DEAD_LETTER_HEADERS, enqueue, topics } from '@herald/bus';
import type { Queryable } from '@herald/db';
import { RELEASED, type WorkTable } from '@herald/workloop';
import { DeliveryJob, DeliveryResult } from '@herald/proto/herald/delivery/v1/delivery';

/** Every SQL statement of the delivery service. */

export const SCHEMA = 'delivery';
export const migrationsDir = fileURLToPath(new URL('../../migrations', import.meta.url));

export type FinalStatus = 'delivered' | 'failed' | 'expired';

/**
 * Claims the recipients of a job for `leaseMs` under `claim` (the same leased claims as the work
 * loop's): new ones, and ones claimed before whose lease ran out (their worker died mid-batch).
 * Final and retrying recipients were handled already and are not returned, so a job delivered
 * twice never pushes twice; recipients another worker holds now are counted in `heldElsewhere`.
 */
export async function claim(
  db: Queryable,
  job: { notificationId: string; workspaceId: string; subscriberIds: string[] },
  claim: string,
  leaseMs: number,
): Promise<{ claimed: Set<string>; heldElsewhere: number }> {
  const { rows } = await db.query<{ subscriber_id: string }>(
    `INSERT INTO deliveries (notification_id, subscriber_id, workspace_id, status, claim, leased_until)
     SELECT $1, unnest($3::text[]), $2, 'sending', $4, clock_timestamp() + $5 * interval '1 millisecond'
     ON CONFLICT (notification_id, subscriber_id) DO UPDATE SET updated_at = now(), claim = EXCLUDED.claim, leased_until = EXCLUDED.leased_until
      WHERE deliveries.status = 'sending' AND (deliveries.leased_until IS NULL OR deliveries.leased_until <= clock_timestamp())
     RETURNING subscriber_id`,
    [job.notificationId, job.workspaceId, job.subscriberIds, claim, leaseMs],
  );
  const claimed = new Set(rows.map((row) => row.subscriber_id));
  if (claimed.size === job.subscriberIds.length) return { claimed, heldElsewhere: 0 };
  const { rows: held } = await db.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM deliveries WHERE notification_id = $1 AND subscriber_id = ANY($2::text[]) AND status = 'sending' AND claim IS DISTINCT FROM $3::uuid`,
    [job.notificationId, job.subscriberIds, claim],
  );
  return { claimed, heldElsewhere: held[0]?.count ?? 0 };
}

export interface FinalOutcome {
  subscriberId: string;
  status: FinalStatus;
  statusCode: number;
  attempts: number;
}

export interface RetryOutcome {
  subscriberId: string;
  /** As the recipient's: its own payload, when it has one. */
  payload?: Uint8Array;
  statusCode: number;
  attempts: number;
  nextAttemptAt: Date;
  endpoint: string;
  p256dh: string;
  auth: string;
}

export interface PushContext {
  notificationId: string;
  workspaceId: string;
  siteId: string;
  payload: Uint8Array;
  ttlSeconds: number;
  urgency: string;
  topic: string;
}

/** A recipient's state after an attempt: final, or waiting for a retry (which `scheduleRetries` then stores). */
export type Outcome = { subscriberId: string; status: FinalStatus | 'retrying'; statusCode: number; attempts: number };

/** The outcomes of one sorting: its finals, then its retries as 'retrying'. */
export const outcomesOf = (finals: FinalOutcome[], retries: RetryOutcome[]): Outcome[] => [
  ...finals,
  ...retries.map((retry) => ({ subscriberId: retry.subscriberId, status: 'retrying' as const, statusCode: retry.statusCode, attempts: retry.attempts })),
];

/**
 * Records each recipient's outcome and releases its lease: one statement per distinct outcome
 * (usually one: every push of a job accepted). With `claim` (a job's worker), only the recipients
 * it still holds are recorded (a worker whose lease ran out records nothing; the update locks
 * those rows until the transaction ends, so no one takes them over meanwhile). Returns the
 * subscribers recorded.
 *
 * The rows are found by key range as well as by id: a notification being sent is new to the
 * table's statistics, so the planner takes it for a few rows and, given the ids alone, reads all
 * of its rows for every job (a cost that grows with the send); the range keeps each statement to
 * the job's own rows (a job's recipients are a run of ids, as the fan-out streams them in order).
 */
export async function recordOutcomes(tx: Queryable, notificationId: string, outcomes: Outcome[], claim: string | null): Promise<Set<string>> {
  const groups = new Map<string, { outcome: Outcome; ids: string[] }>();
  for (const outcome of outcomes) {
    const key = `${outcome.status} ${outcome.statusCode} ${outcome.attempts}`;
    const group = groups.get(key) ?? { outcome, ids: [] };
    group.ids.push(outcome.subscriberId);
    groups.set(key, group);
  }
  const recorded = new Set<string>();
  for (const { outcome, ids } of groups.values()) {
    // The range's ends in the database's own collation (the order the fan-out streamed them in).
    const { rows } = await tx.query<{ subscriber_id: string }>(
      `UPDATE deliveries SET status = $3, last_status_code = $4, attempts = $5, updated_at = now(), ${RELEASED}
        WHERE notification_id = $1 AND subscriber_id = ANY($2::text[]) AND ($6::uuid IS NULL OR claim = $6::uuid)
          AND subscriber_id >= (SELECT min(id) FROM unnest($2::text[]) AS id) AND subscriber_id <= (SELECT max(id) FROM unnest($2::text[]) AS id)
       RETURNING subscriber_id`,
      [notificationId, ids, outcome.status, outcome.statusCode, outcome.attempts, claim],
    );
    for (const row of rows) recorded.add(row.subscriber_id);
  }
  return recorded;
}

/** Stores retries of one notification (their deliveries already 'retrying', `recordOutcomes`), or, from the retry loop holding `claim`, reschedules and releases them. */
export async function scheduleRetries(tx: Queryable, push: PushContext, retries: RetryOutcome[], claim: string | null = null): Promise<void> {
  if (retries.length === 0) return;
  await tx.query(
    `INSERT INTO retries (notification_id, subscriber_id, workspace_id, site_id, endpoint, p256dh, auth, payload, ttl_seconds, urgency, topic, attempts, next_attempt_at)
     SELECT $1, o.subscriber_id, $2, $3, o.endpoint, o.p256dh, o.auth, coalesce(o.payload, $4), $5, $6, $7, o.attempts, o.next_at
       FROM unnest($8::text[], $9::text[], $10::text[], $11::text[], $12::int[], $13::timestamptz[], $15::bytea[])
            AS o(subscriber_id, endpoint, p256dh, auth, attempts, next_at, payload)
     ON CONFLICT (notification_id, subscriber_id) DO UPDATE SET attempts = EXCLUDED.attempts, next_attempt_at = EXCLUDED.next_attempt_at, ${RELEASED}
      WHERE retries.claim IS NOT DISTINCT FROM $14::uuid`,
    [
      push.notificationId,
      push.workspaceId,
      push.siteId,
      Buffer.from(push.payload),
      push.ttlSeconds,
      push.urgency,
      push.topic,
      retries.map((r) => r.subscriberId),
      retries.map((r) => r.endpoint),
      retries.map((r) => r.p256dh),
      retries.map((r) => r.auth),
      retries.map((r) => r.attempts),
      retries.map((r) => r.nextAttemptAt),
      claim,
      retries.map((r) => (r.payload ? Buffer.from(r.payload) : null)),
    ],
  );
  // Delivered at commit: the retry loops of every replica look again at once for what is due.
  await tx.query(`NOTIFY ${RETRIES_CHANNEL}`);
}

/** Reports final outcomes to the rest of Herald (counters, expiry) in the same transaction. */
export async function enqueueResult(tx: Queryable, notificationId: string, workspaceId: string, outcomes: FinalOutcome[]): Promise<void> {
  if (outcomes.length === 0) return;
  const eventId = randomUUID();
  const last = outcomes[outcomes.length - 1] as FinalOutcome;
  const payload = DeliveryResult.encode({
    eventId,
    notificationId,
    workspaceId,
    delivered: outcomes.filter((o) => o.status === 'delivered').length,
    failed: outcomes.filter((o) => o.status === 'failed').length,
    expired: outcomes.filter((o) => o.status === 'expired').length,
    expiredSubscriberIds: outcomes.filter((o) => o.status === 'expired').map((o) => o.subscriberId),
    lastStatusCode: last.statusCode,
    lastOutcome: last.status,
    reportedAt: new Date().toISOString(),
  }).finish();
  await enqueue(tx, SCHEMA, [{ topic: topics.deliveryResults.name, key: notificationId, payload, eventId }]);
}

/**
 * A push that failed for good after retrying: parked on the jobs' dead-letter topic as a job of
 * that one recipient (so it can be inspected or replayed as is), the outcome in the headers.
 */
export async function enqueueDeadLetters(tx: Queryable, push: PushContext, recipients: Recipient[], outcomes: FinalOutcome[]): Promise<void> {
  if (outcomes.length === 0) return;
  await enqueue(
    tx,
    SCHEMA,
    outcomes.map((outcome) => {
      const recipient = recipients.find((candidate) => candidate.subscriberId === outcome.subscriberId) as Recipient;
      const job = DeliveryJob.encode({
        jobId: `${push.notificationId}:${outcome.subscriberId}`,
        notificationId: push.notificationId,
        workspaceId: push.workspaceId,
        siteId: push.siteId,
        payload: Buffer.from(recipient.payload ?? push.payload),
        ttlSeconds: push.ttlSeconds,
        urgency: push.urgency,
        topic: push.topic,
        targets: [{ subscriberId: recipient.subscriberId, endpoint: recipient.endpoint, p256dh: recipient.p256dh, auth: recipient.auth, externalId: '', customDataJson: '' }],
        // Parked as sent: already filled for this recipient.
        personalized: false,
      }).finish();
      return {
        topic: topics.deliveryJobs.deadLetter,
        key: push.notificationId,
        payload: Buffer.from(job),
        headers: {
          [DEAD_LETTER_HEADERS.source]: 'delivery',
          [DEAD_LETTER_HEADERS.reason]: `push failed after ${outcome.attempts} attempts (last status ${outcome.statusCode})`,
        },
      };
    }),
  );
}

export interface RetryRow {
  notification_id: string;
  subscriber_id: string;
  workspace_id: string;
  site_id: string;
  endpoint: string;
  p256dh: string;
  auth: string;
  payload: Buffer;
  ttl_seconds: number;
  urgency: string;
  topic: string;
  attempts: number;
}

/** NOTIFY'd when retries are scheduled. */
export const RETRIES_CHANNEL = `${SCHEMA}_retries`;

/** Retries waiting for their next attempt: the retry loop's work table (@herald/workloop). */
export const DUE_RETRIES: WorkTable = {
  table: `${SCHEMA}.retries`,
  key: ['notification_id', 'subscriber_id'],
  due: 'next_attempt_at',
  waiting: 'true',
  returning: '*',
};

/**
 * Of `subscriberIds`' retries of a notification, those still claimed by `claim`, locked until the
 * transaction ends: a worker whose lease ran out (another has them now) records nothing.
 */
export async function stillClaimed(tx: Queryable, notificationId: string, subscriberIds: string[], claim: string): Promise<Set<string>> {
  const { rows } = await tx.query<{ subscriber_id: string }>(
    `SELECT subscriber_id FROM retries WHERE notification_id = $1 AND subscriber_id = ANY($2::text[]) AND claim = $3 FOR UPDATE`,
    [notificationId, subscriberIds, claim],
  );
  return new Set(rows.map((row) => row.subscriber_id));
}

export async function deleteRetries(tx: Queryable, notificationId: string, subscriberIds: string[], claim: string): Promise<void> {
  if (subscriberIds.length === 0) return;
  await tx.query(`DELETE FROM retries WHERE notification_id = $1 AND subscriber_id = ANY($2::text[]) AND claim = $3`, [notificationId, subscriberIds, claim]);
}

export interface DeliveryRow {
  subscriber_id: string;
  status: string;
  attempts: number;
  last_status_code: number | null;
  updated_at: Date;
}

export async function listDeliveries(
  db: Queryable,
  query: { workspaceId: string; notificationId: string; after: string; status: string; limit: number },
): Promise<DeliveryRow[]> {
  const { rows } = await db.query<DeliveryRow>(
    `SELECT subscriber_id, status, attempts, last_status_code, updated_at FROM deliveries
      WHERE workspace_id = $1 AND notification_id = $2 AND subscriber_id > $3 AND ($4 = '' OR status = $4)
      ORDER BY subscriber_id LIMIT $5`,
    [query.workspaceId, query.notificationId, query.after, query.status, query.limit],
  );
  return rows;
}

export interface Recipient {
  subscriberId: string;
  endpoint: string;
  p256dh: string;
  auth: string;
  /** The recipient's own payload (per-subscriber placeholders filled); else the notification's. */
  payload?: Uint8Array;
  /** Attempts made before the one being sorted. */
  attemptsBefore: number;
}
