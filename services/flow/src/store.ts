import { fileURLToPath } from 'node:url';

import { CREATED_US_SQL, CURRENT_NAMESPACE_SQL, type PagePosition, type Queryable } from '@herald/db';
import { RELEASED, type WorkTable } from '@herald/workloop';

import type { Step } from './steps.js';

/** Every SQL statement of the flow service. Each query is scoped by workspace id. */

export const SCHEMA = 'flow';
export const migrationsDir = fileURLToPath(new URL('../../migrations', import.meta.url));

export const FLOW_STATUSES = ['draft', 'active', 'paused', 'archived'] as const;
export type FlowStatus = (typeof FLOW_STATUSES)[number];
export const TRIGGER_TYPES = ['subscription', 'unsubscription', 'notification_click', 'notification_impression', 'notification_dismiss'] as const;
export type TriggerType = (typeof TRIGGER_TYPES)[number];

export interface FlowRow {
  id: string;
  workspace_id: string;
  site_id: string;
  name: string;
  description: string;
  trigger_type: TriggerType;
  trigger_campaign_id: string | null;
  status: FlowStatus;
  version: number;
  execution_count: string;
  steps: Step[];
  created_at: Date;
  updated_at: Date;
  created_us: string;
}

const FLOW_COLUMNS = `f.*, v.steps, (extract(epoch FROM f.created_at) * 1000000)::bigint::text AS created_us`;
const FLOW_FROM = `flows f JOIN flow_versions v ON v.flow_id = f.id AND v.version = f.version`;

export interface NewFlow {
  id: string;
  workspaceId: string;
  siteId: string;
  name: string;
  description: string;
  triggerType: TriggerType;
  triggerCampaignId: string | null;
  steps: Step[];
}

export async function insertFlow(tx: Queryable, flow: NewFlow): Promise<void> {
  await tx.query(
    `INSERT INTO flows (id, workspace_id, site_id, name, description, trigger_type, trigger_campaign_id) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [flow.id, flow.workspaceId, flow.siteId, flow.name, flow.description, flow.triggerType, flow.triggerCampaignId],
  );
  await tx.query(`INSERT INTO flow_versions (flow_id, version, steps) VALUES ($1, 1, $2)`, [flow.id, JSON.stringify(flow.steps)]);
}

/** The flow with its current steps; `lock` holds it until the transaction ends (an edit). */
export async function findFlow(db: Queryable, workspaceId: string, id: string, lock = false): Promise<FlowRow | undefined> {
  const { rows } = await db.query<FlowRow>(
    `SELECT ${FLOW_COLUMNS} FROM ${FLOW_FROM} WHERE f.workspace_id = $1 AND f.id = $2${lock ? ' FOR UPDATE OF f' : ''}`,
    [workspaceId, id],
  );
  return rows[0];
}

export async function listFlows(db: Queryable, workspaceId: string, status: FlowStatus | undefined, after: PagePosition | undefined, limit: number): Promise<FlowRow[]> {
  const { rows } = await db.query<FlowRow>(
    `SELECT ${FLOW_COLUMNS} FROM ${FLOW_FROM}
      WHERE f.workspace_id = $1 AND ($2::text IS NULL OR f.status = $2)
        AND ($3::bigint IS NULL OR (f.created_at, f.id) < (timestamptz 'epoch' + $3::bigint * interval '1 microsecond', $4))
      ORDER BY f.created_at DESC, f.id DESC LIMIT $5`,
    [workspaceId, status ?? null, after?.createdUs ?? null, after?.id ?? '', limit],
  );
  return rows;
}

export interface FlowChanges {
  name?: string;
  description?: string;
  triggerType?: TriggerType;
  triggerCampaignId?: string | null;
  status?: FlowStatus;
}

/** Applies the fields given (the caller holds the row's lock and checked the result). */
export async function updateFlow(tx: Queryable, id: string, changes: FlowChanges): Promise<void> {
  await tx.query(
    `UPDATE flows SET
       name = coalesce($2, name),
       description = coalesce($3, description),
       trigger_type = coalesce($4, trigger_type),
       trigger_campaign_id = CASE WHEN $5 THEN $6 ELSE trigger_campaign_id END,
       status = coalesce($7, status),
       updated_at = clock_timestamp()
     WHERE id = $1`,
    [id, changes.name ?? null, changes.description ?? null, changes.triggerType ?? null, changes.triggerCampaignId !== undefined, changes.triggerCampaignId ?? null, changes.status ?? null],
  );
}

/** A new version of the steps; runs in flight keep following theirs. */
export async function replaceSteps(tx: Queryable, id: string, steps: Step[]): Promise<void> {
  await tx.query(
    `WITH bumped AS (UPDATE flows SET version = version + 1, updated_at = clock_timestamp() WHERE id = $1 RETURNING version)
     INSERT INTO flow_versions (flow_id, version, steps) SELECT $1, version, $2 FROM bumped`,
    [id, JSON.stringify(steps)],
  );
}

/** Removes the flow, its versions and its runs (a run being worked then records nothing). */
export async function deleteFlow(db: Queryable, workspaceId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query(`DELETE FROM flows WHERE workspace_id = $1 AND id = $2`, [workspaceId, id]);
  return rowCount === 1;
}

export const RUNS_CHANNEL = `${SCHEMA}_runs`;

/** What starts runs: one event about one subscriber. */
export interface Trigger {
  workspaceId: string;
  triggerType: TriggerType;
  subscriberId: string;
  eventId: string;
  /** For notification triggers: the campaign (notification) the event is about. */
  campaignId?: string;
}

/**
 * Starts a run of every active flow of the workspace with this trigger, and counts each: one
 * statement, so a run and its count commit together. A flow's row is share-locked, so a run never
 * starts after a pause committed. Skipped: a run this event already started (redelivery), and a
 * subscriber already in a run of that flow (no re-entry). Returns how many started.
 */
export async function startRuns(db: Queryable, trigger: Trigger): Promise<number> {
  const { rows } = await db.query<{ started: string }>(
    `WITH triggered AS (
       SELECT id, version, site_id FROM flows
        WHERE workspace_id = $1 AND status = 'active' AND trigger_type = $2 AND (trigger_campaign_id IS NULL OR trigger_campaign_id = $5)
        FOR SHARE
     ), started AS (
       INSERT INTO flow_runs (id, flow_id, version, workspace_id, site_id, subscriber_id, trigger_type, trigger_event_id)
       SELECT 'run_' || replace(gen_random_uuid()::text, '-', ''), id, version, $1, site_id, $3, $2, $4 FROM triggered
       ON CONFLICT DO NOTHING
       RETURNING flow_id
     ), counted AS (
       UPDATE flows SET execution_count = execution_count + 1 FROM started WHERE flows.id = started.flow_id RETURNING 1
     )
     SELECT count(*) AS started FROM counted`,
    [trigger.workspaceId, trigger.triggerType, trigger.subscriberId, trigger.eventId, trigger.campaignId ?? ''],
  );
  const started = Number(rows[0]?.started ?? 0);
  if (started > 0) await db.query(`NOTIFY ${RUNS_CHANNEL}`);
  return started;
}

/** Ends the subscriber's runs in flight in every flow of the workspace (a run being worked then records nothing). */
export async function cancelRuns(db: Queryable, workspaceId: string, subscriberId: string, reason: string): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE flow_runs SET state = 'cancelled', end_reason = $3, due_at = NULL, ${RELEASED}, finished_at = clock_timestamp(), updated_at = clock_timestamp()
      WHERE workspace_id = $1 AND subscriber_id = $2 AND state IN ('running', 'waiting')`,
    [workspaceId, subscriberId, reason],
  );
  return rowCount ?? 0;
}

export type RunState = 'running' | 'waiting' | 'completed' | 'exited' | 'cancelled' | 'failed';

export interface RunRow {
  id: string;
  flow_id: string;
  version: number;
  workspace_id: string;
  site_id: string;
  subscriber_id: string;
  trigger_type: TriggerType;
  trigger_event_id: string;
  state: RunState;
  step_index: number;
  end_reason: string | null;
  notification_ids: string[];
  due_at: Date | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
  created_us: string;
}

/** Runs in flight: due now (running) or parked on a delay (waiting). */
export const RUN_TIMERS: WorkTable = {
  table: `${SCHEMA}.flow_runs`,
  key: ['id'],
  due: 'due_at',
  waiting: `due_at IS NOT NULL`,
  returning: 'id, flow_id, version, workspace_id, site_id, subscriber_id, step_index, due_at',
};

export type ClaimedRun = Pick<RunRow, 'id' | 'flow_id' | 'version' | 'workspace_id' | 'site_id' | 'subscriber_id' | 'step_index' | 'due_at'>;

/** The steps of one version (never changed once written). */
export async function findVersionSteps(db: Queryable, flowId: string, version: number): Promise<Step[] | undefined> {
  const { rows } = await db.query<{ steps: Step[] }>(`SELECT steps FROM flow_versions WHERE flow_id = $1 AND version = $2`, [flowId, version]);
  return rows[0]?.steps;
}

/** Where a worked run goes next. */
export interface RunOutcome {
  id: string;
  state: RunState;
  stepIndex: number;
  /** When it is worked again (waiting); null once it ended. */
  dueAt: Date | null;
  endReason: string | null;
  /** Notifications queued by this working, added to the run's. */
  notificationIds: string[];
}

/**
 * Records a claimed batch's outcomes in one statement, only where the claim still holds (a run
 * cancelled, or whose flow was deleted, meanwhile changes nothing). Returns how many were recorded.
 */
export async function recordOutcomes(db: Queryable, token: string, outcomes: RunOutcome[]): Promise<number> {
  if (outcomes.length === 0) return 0;
  const { rowCount } = await db.query(
    `UPDATE flow_runs r SET state = o.state, step_index = o.step_index, due_at = o.due_at, end_reason = o.end_reason,
            notification_ids = r.notification_ids || o.notification_ids,
            finished_at = CASE WHEN o.due_at IS NULL THEN clock_timestamp() END, updated_at = clock_timestamp(), ${RELEASED}
       FROM jsonb_to_recordset($2::jsonb) AS o(id text, state text, step_index integer, due_at timestamptz, end_reason text, notification_ids text[])
      WHERE r.id = o.id AND r.claim = $1`,
    [
      token,
      JSON.stringify(
        outcomes.map((outcome) => ({
          id: outcome.id,
          state: outcome.state,
          step_index: outcome.stepIndex,
          due_at: outcome.dueAt?.toISOString() ?? null,
          end_reason: outcome.endReason,
          notification_ids: outcome.notificationIds,
        })),
      ),
    ],
  );
  return rowCount ?? 0;
}

/** Extends the lease of these runs while this claim still holds them (a batch still being worked). */
export async function extendClaim(db: Queryable, token: string, ids: string[], leaseMs: number): Promise<void> {
  await db.query(`UPDATE flow_runs SET leased_until = clock_timestamp() + $3 * interval '1 millisecond' WHERE id = ANY($2) AND claim = $1`, [token, ids, leaseMs]);
}

/**
 * Deletes up to `limit` runs that finished more than `retentionDays` ago, oldest first (runs in
 * flight are never touched: only a final state sets finished_at). A flow's executionCount is its
 * own column, so it stays exact. Returns how many went.
 */
export async function pruneRuns(db: Queryable, retentionDays: number, limit: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM flow_runs WHERE id IN (
       SELECT id FROM flow_runs
        WHERE namespace = ${CURRENT_NAMESPACE_SQL} AND finished_at IS NOT NULL AND finished_at < clock_timestamp() - $1 * interval '1 day'
        ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    [retentionDays, limit],
  );
  return rowCount ?? 0;
}

const RUN_COLUMNS = `*, ${CREATED_US_SQL} AS created_us`;

/** A flow's runs, newest first, after `after`. */
export async function listRuns(db: Queryable, workspaceId: string, flowId: string, after: PagePosition | undefined, limit: number): Promise<RunRow[]> {
  const { rows } = await db.query<RunRow>(
    `SELECT ${RUN_COLUMNS} FROM flow_runs
      WHERE flow_id = $2 AND workspace_id = $1
        AND ($3::bigint IS NULL OR (created_at, id) < (timestamptz 'epoch' + $3::bigint * interval '1 microsecond', $4))
      ORDER BY created_at DESC, id DESC LIMIT $5`,
    [workspaceId, flowId, after?.createdUs ?? null, after?.id ?? '', limit],
  );
  return rows;
}
