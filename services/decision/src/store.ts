import { fileURLToPath } from 'node:url';

import { CREATED_US_SQL, type PagePosition, type Queryable } from '@herald/db';
import { questionEventHash, type Approver } from '@herald/domain';
import { RELEASED, type WorkTable } from '@herald/workloop';

/** Every SQL statement of the decision service. Each query is scoped by workspace id or by a question id from a verified token. */

export const SCHEMA = 'decision';
export const migrationsDir = fileURLToPath(new URL('../../migrations', import.meta.url));

export type Kind = 'ask' | 'decision';

export interface ReachabilityJson {
  reachable: boolean;
  browserSubscriptions: number;
  nativeAppDevices: number;
}

export interface QuestionRow {
  id: string;
  workspace_id: string;
  kind: Kind;
  /** The API key that opened it, and its name then (null before migration 011). */
  key_id: string;
  key_name: string | null;
  type: string;
  question: string;
  options: string[];
  context: string | null;
  placeholder: string | null;
  agent_name: string | null;
  mode: string;
  audience: string | null;
  external_id: string | null;
  tool_name: string | null;
  tool_target: string | null;
  parameters: Record<string, unknown> | null;
  reachability: ReachabilityJson | null;
  callback_url: string | null;
  /** The site of the key that opened it (web push goes to its approver devices); null before migration 004. */
  site_id: string | null;
  /** Asks: the approver devices to push to. */
  target: AskTarget | null;
  idempotency_key: string | null;
  request_hash: string | null;
  status: 'pending' | 'answered' | 'cancelled';
  answer: string | null;
  /** Who may answer; empty: the holder of an answer link (and the caller's own key). */
  approvers: Approver[];
  escalation: EscalationStepJson[];
  /** Set with the answer (null for answers recorded before migration 006). */
  answered_by: AnsweredByJson | null;
  created_at: Date;
  expires_at: Date;
  answered_at: Date | null;
  cancelled_at: Date | null;
  /** Computed on read with the database's clock: pending past expires_at. */
  expired: boolean;
  expires_in_seconds: number;
}

const COLUMNS = `*, (status = 'pending' AND expires_at <= clock_timestamp()) AS expired,
  GREATEST(0, CEIL(EXTRACT(EPOCH FROM expires_at - clock_timestamp())))::int AS expires_in_seconds`;

export interface EscalationStepJson {
  afterSeconds: number;
  channels: string[];
  approvers: Approver[];
}

/** Who answered (or tried to): an approver kind or `link`, a stable id, a name to show, the channel, and when. */
export interface AnsweredByJson {
  kind: string;
  id: string;
  displayName: string;
  channel: string;
  at: string;
}

export interface AskTarget {
  subscriberIds: string[];
  externalIds: string[];
  tags: string[];
}

export interface NewQuestion {
  id: string;
  workspaceId: string;
  siteId: string | null;
  kind: Kind;
  keyId: string;
  keyName: string | null;
  type: string;
  question: string;
  options: string[];
  context: string | null;
  placeholder: string | null;
  agentName: string | null;
  mode: string;
  audience: string | null;
  externalId: string | null;
  toolName: string | null;
  toolTarget: string | null;
  parameters: Record<string, unknown> | null;
  reachability: ReachabilityJson | null;
  target: AskTarget | null;
  callbackUrl: string | null;
  idempotencyKey: string | null;
  requestHash: string | null;
  lifetimeSeconds: number;
  approvers: Approver[];
  escalation: EscalationStepJson[];
}

/** Inserts, or with an idempotency key already used returns nothing (the caller reads the first). */
export async function insertQuestion(db: Queryable, q: NewQuestion): Promise<QuestionRow | undefined> {
  const { rows } = await db.query<QuestionRow>(
    `INSERT INTO questions (id, workspace_id, kind, key_id, type, question, options, context, placeholder, agent_name, mode, audience,
       external_id, tool_name, tool_target, parameters, reachability, target, callback_url, idempotency_key, request_hash, expires_at, site_id,
       approvers, escalation, key_name)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, now() + make_interval(secs => $22), $23, $24, $25, $26)
     ON CONFLICT (workspace_id, kind, key_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
     RETURNING ${COLUMNS}`,
    [
      q.id,
      q.workspaceId,
      q.kind,
      q.keyId,
      q.type,
      q.question,
      JSON.stringify(q.options),
      q.context,
      q.placeholder,
      q.agentName,
      q.mode,
      q.audience,
      q.externalId,
      q.toolName,
      q.toolTarget,
      q.parameters === null ? null : JSON.stringify(q.parameters),
      q.reachability === null ? null : JSON.stringify(q.reachability),
      q.target === null ? null : JSON.stringify(q.target),
      q.callbackUrl,
      q.idempotencyKey,
      q.requestHash,
      q.lifetimeSeconds,
      q.siteId,
      JSON.stringify(q.approvers),
      JSON.stringify(q.escalation),
      q.keyName,
    ],
  );
  return rows[0];
}

/** The question `keyId` (the calling API key: idempotency keys are each key's own) opened with this idempotency key. */
export async function findByIdempotencyKey(db: Queryable, workspaceId: string, kind: Kind, keyId: string, key: string): Promise<QuestionRow | undefined> {
  const { rows } = await db.query<QuestionRow>(`SELECT ${COLUMNS} FROM questions WHERE workspace_id = $1 AND kind = $2 AND key_id = $3 AND idempotency_key = $4`, [
    workspaceId,
    kind,
    keyId,
    key,
  ]);
  return rows[0];
}

/** Serialises creations of asks per workspace (inside a transaction), so the pending limit holds under concurrency. */
export async function lockWorkspaceAsks(db: Queryable, workspaceId: string): Promise<void> {
  await db.query(`SELECT pg_advisory_xact_lock(hashtext('herald.decision.asks:' || $1))`, [workspaceId]);
}

export async function countPendingAsks(db: Queryable, workspaceId: string): Promise<number> {
  const { rows } = await db.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM questions WHERE workspace_id = $1 AND kind = 'ask' AND status = 'pending' AND expires_at > clock_timestamp()`,
    [workspaceId],
  );
  return rows[0]?.count ?? 0;
}

/** How a caller may address a question: its owner's view (workspace, kind, end-user scope) or just its id (a verified token). */
export interface Scope {
  workspaceId?: string;
  kind?: Kind;
  /** Only questions addressed to this end-user (a bound key's). */
  externalId?: string;
}

function scoped(scope: Scope, first: number): { where: string; params: string[] } {
  const clauses: string[] = [];
  const params: string[] = [];
  const add = (column: string, value: string | undefined) => {
    if (value === undefined) return;
    params.push(value);
    clauses.push(`${column} = $${first + params.length - 1}`);
  };
  add('workspace_id', scope.workspaceId);
  add('kind', scope.kind);
  add('external_id', scope.externalId);
  return { where: clauses.map((clause) => ` AND ${clause}`).join(''), params };
}

/** What a list may narrow to: a stored state, or `expired` and `pending` as read (by expires_at). */
export type ListedStatus = 'pending' | 'answered' | 'cancelled' | 'expired';

const LISTED_STATUS: Record<ListedStatus, string> = {
  pending: "status = 'pending' AND expires_at > clock_timestamp()",
  expired: "status = 'pending' AND expires_at <= clock_timestamp()",
  answered: "status = 'answered'",
  cancelled: "status = 'cancelled'",
};

/** A page of a workspace's questions of one kind, newest first, after `after`. */
export async function listQuestions(
  db: Queryable,
  scope: Required<Pick<Scope, 'workspaceId' | 'kind'>> & Pick<Scope, 'externalId'>,
  status: ListedStatus | undefined,
  after: PagePosition | undefined,
  limit: number,
): Promise<Array<QuestionRow & { created_us: string }>> {
  const { where, params } = scoped(scope, 4);
  const { rows } = await db.query<QuestionRow & { created_us: string }>(
    `SELECT ${COLUMNS}, ${CREATED_US_SQL} AS created_us FROM questions
      WHERE ($1::bigint IS NULL OR (created_at, id) < (timestamptz 'epoch' + $1::bigint * interval '1 microsecond', $2))${where}
        ${status ? `AND ${LISTED_STATUS[status]}` : ''}
      ORDER BY created_at DESC, id DESC LIMIT $3`,
    [after?.createdUs ?? null, after?.id ?? '', limit, ...params],
  );
  return rows;
}

export async function findQuestion(db: Queryable, id: string, scope: Scope): Promise<QuestionRow | undefined> {
  const { where, params } = scoped(scope, 2);
  const { rows } = await db.query<QuestionRow>(`SELECT ${COLUMNS} FROM questions WHERE id = $1${where}`, [id, ...params]);
  return rows[0];
}

/**
 * Expired, unanswered questions not yet swept: the expiry sweep's work table (@herald/workloop),
 * due at expires_at. Other namespaces' are left to their own sweeps, which report them through
 * their own webhook dispatchers.
 */
export const UNSWEPT_EXPIRIES: WorkTable = {
  table: `${SCHEMA}.questions`,
  key: ['id'],
  due: 'expires_at',
  waiting: "status = 'pending' AND expiry_recorded_at IS NULL",
  returning: 'id',
};

/**
 * Marks claimed expiries swept (in the transaction that records them and enqueues their webhooks)
 * and returns them, `report` true for those whose webhook is still to be sent; a lost claim
 * returns nothing.
 */
export async function markExpiriesSwept(db: Queryable, ids: string[], claim: string): Promise<Array<QuestionRow & { report: boolean }>> {
  const { rows } = await db.query<QuestionRow & { report: boolean }>(
    `WITH swept AS (
       SELECT id, callback_url IS NOT NULL AND expiry_reported_at IS NULL AS report FROM questions
        WHERE id = ANY($1) AND claim = $2 AND status = 'pending' FOR UPDATE)
     UPDATE questions SET expiry_recorded_at = clock_timestamp(),
            expiry_reported_at = CASE WHEN swept.report THEN clock_timestamp() ELSE expiry_reported_at END, ${RELEASED}
       FROM swept WHERE questions.id = swept.id RETURNING questions.${COLUMNS}, swept.report`,
    [ids, claim],
  );
  return rows;
}

/** Records the answer if the question is still open; first answer wins (undefined: it was not open). */
export async function recordAnswer(db: Queryable, id: string, answer: string, answeredBy: Omit<AnsweredByJson, 'at'>): Promise<QuestionRow | undefined> {
  // The answer's time is the database's, and answered_by.at says the same.
  const { rows } = await db.query<QuestionRow>(
    `UPDATE questions SET status = 'answered', answer = $2, answered_at = now_,
       answered_by = $3::jsonb || jsonb_build_object('at', to_char(now_ AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
     FROM (SELECT clock_timestamp() AS now_) AS clock
     WHERE id = $1 AND status = 'pending' AND expires_at > now_ RETURNING ${COLUMNS}`,
    [id, answer, JSON.stringify(answeredBy)],
  );
  return rows[0];
}

/** Withdraws or cancels the question if it is still open (undefined: it was not open). */
export async function recordCancel(db: Queryable, id: string): Promise<QuestionRow | undefined> {
  const { rows } = await db.query<QuestionRow>(
    `UPDATE questions SET status = 'cancelled', cancelled_at = clock_timestamp()
     WHERE id = $1 AND status = 'pending' AND expires_at > clock_timestamp() RETURNING ${COLUMNS}`,
    [id],
  );
  return rows[0];
}

/** A question's delivery on one channel to one target (question_deliveries). */
export interface DeliveryKey {
  question_id: string;
  channel: string;
  target: string;
}

export interface ClaimedDelivery extends DeliveryKey {
  attempts: number;
}

/** Woken (at commit) when deliveries are recorded, so the delivery loop makes them at once. */
export const DELIVERIES_CHANNEL = 'decision_question_deliveries';

/** The delivery loop's work table: pending deliveries by due time; a claim counts an attempt. */
export const DUE_DELIVERIES: WorkTable = {
  table: `${SCHEMA}.question_deliveries`,
  key: ['question_id', 'channel', 'target'],
  due: 'due_at',
  waiting: "state = 'pending'",
  returning: 'question_id, channel, target, attempts',
  onClaim: 'attempts = attempts + 1',
};

/** Records a question's deliveries (those already recorded, by a redelivered event or an earlier step, stay as they are) and returns the new ones. */
export async function insertDeliveries(db: Queryable, questionId: string, deliveries: Array<{ channel: string; target: string }>): Promise<Array<{ channel: string; target: string }>> {
  if (deliveries.length === 0) return [];
  const { rows } = await db.query<{ channel: string; target: string }>(
    `INSERT INTO question_deliveries (question_id, channel, target)
     SELECT $1, channel, target FROM unnest($2::text[], $3::text[]) AS d (channel, target)
     ON CONFLICT DO NOTHING RETURNING channel, target`,
    [questionId, deliveries.map((delivery) => delivery.channel), deliveries.map((delivery) => delivery.target)],
  );
  if (rows.length > 0) await db.query(`NOTIFY ${DELIVERIES_CHANNEL}`);
  return rows;
}

/** How a claimed delivery ended: made (delivered, with what the channel answered), not needed (skipped), refused for good (failed), or to be tried again at `retryAt`. */
export type DeliveryOutcome =
  | { state: 'delivered'; result: string; reached: number }
  | { state: 'skipped' | 'failed'; error: string }
  | { state: 'pending'; error: string; retryAt: Date };

/**
 * Records a claimed delivery's outcome while the claim holds (a lost claim changes nothing), and a
 * delivery made or refused for good in the question's record (in the same transaction).
 */
export async function recordDelivery(tx: Queryable, key: DeliveryKey, claim: string, outcome: DeliveryOutcome): Promise<void> {
  const params = [key.question_id, key.channel, key.target, claim];
  const where = 'WHERE question_id = $1 AND channel = $2 AND target = $3 AND claim = $4';
  if (outcome.state === 'pending') {
    await tx.query(`UPDATE question_deliveries SET last_error = $5, due_at = $6, ${RELEASED} ${where}`, [...params, outcome.error, outcome.retryAt]);
    return;
  }
  const { rowCount } =
    outcome.state === 'delivered'
      ? await tx.query(
          `UPDATE question_deliveries SET state = 'delivered', result = $5, reached = $6, last_error = NULL, finished_at = clock_timestamp(), ${RELEASED} ${where}`,
          [...params, outcome.result, outcome.reached],
        )
      : await tx.query(`UPDATE question_deliveries SET state = $5, last_error = $6, finished_at = clock_timestamp(), ${RELEASED} ${where}`, [...params, outcome.state, outcome.error]);
  // A skipped delivery (the question was no longer open) was never made: nothing to record.
  if (rowCount === 0 || outcome.state === 'skipped') return;
  const detail = outcome.state === 'delivered' ? { channel: key.channel, target: key.target, result: 'delivered', reached: outcome.reached, ref: outcome.result } : { channel: key.channel, target: key.target, result: 'failed', error: outcome.error };
  await appendEvent(tx, key.question_id, 'delivered', { detail });
}

/** An entry of a question's record (question_events). */
export interface QuestionEventRow {
  question_id: string;
  seq: number;
  kind: string;
  at: Date;
  actor: Record<string, unknown> | null;
  detail: Record<string, unknown>;
  prev_hash: string;
  hash: string;
}

/**
 * Appends an entry to a question's record, chained to the one before it (see migration 006). Call
 * it in the transaction that makes the change it records; appends to one question are serialised
 * (the head is read under the record's lock, migration 013) so the chain has no forks.
 */
export async function appendEvent(
  tx: Queryable,
  questionId: string,
  kind: string,
  { actor = null, detail = {} }: { actor?: Record<string, unknown> | null; detail?: Record<string, unknown> } = {},
): Promise<QuestionEventRow> {
  const { rows: last } = await tx.query<{ seq: number; hash: string }>(`SELECT seq, hash FROM question_events_head($1)`, [questionId]);
  const seq = (last[0]?.seq ?? 0) + 1;
  const prevHash = last[0]?.hash ?? '';
  const at = new Date();
  const hash = questionEventHash(prevHash, { questionId, seq, kind, at: at.toISOString(), actor, detail });
  const { rows } = await tx.query<QuestionEventRow>(
    `INSERT INTO question_events (question_id, seq, kind, at, actor, detail, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
    [questionId, seq, kind, at, actor === null ? null : JSON.stringify(actor), JSON.stringify(detail), prevHash, hash],
  );
  const row = rows[0];
  if (!row) throw new Error('question event insert returned no row');
  return row;
}

/** An email answer link: the question, the recipient address (lower-cased) and the answer it names ('' for an input link). */
export interface EmailLinkKey {
  questionId: string;
  address: string;
  choice: string;
}

/** Whether an email link already answered (single use). */
export async function emailLinkUsed(db: Queryable, { questionId, address, choice }: EmailLinkKey): Promise<boolean> {
  const { rows } = await db.query(`SELECT 1 FROM email_links WHERE question_id = $1 AND address = $2 AND choice = $3`, [questionId, address, choice]);
  return rows.length > 0;
}

/** Uses an email link up, in its answer's transaction; false when it was used meanwhile. */
export async function useEmailLink(db: Queryable, { questionId, address, choice }: EmailLinkKey): Promise<boolean> {
  const { rows } = await db.query(`INSERT INTO email_links (question_id, address, choice) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING 1`, [questionId, address, choice]);
  return rows.length > 0;
}

/** A workspace's Slack connection; the token and signing secret are sealed (sealed-secrets.ts). */
export interface SlackConnectionRow {
  workspace_id: string;
  team_id: string;
  team_name: string;
  bot_user_id: string;
  default_channel: string;
  bot_token: string;
  signing_secret: string;
  connected_at: Date;
}

/** Connects or replaces the workspace's Slack app; undefined when another workspace has connected that Slack team. */
export async function upsertSlackConnection(db: Queryable, c: Omit<SlackConnectionRow, 'connected_at'>): Promise<SlackConnectionRow | undefined> {
  try {
    const { rows } = await db.query<SlackConnectionRow>(
      `INSERT INTO slack_connections (workspace_id, team_id, team_name, bot_user_id, default_channel, bot_token, signing_secret)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (workspace_id) DO UPDATE SET team_id = $2, team_name = $3, bot_user_id = $4, default_channel = $5, bot_token = $6, signing_secret = $7, connected_at = now()
       RETURNING *`,
      [c.workspace_id, c.team_id, c.team_name, c.bot_user_id, c.default_channel, c.bot_token, c.signing_secret],
    );
    return rows[0];
  } catch (err) {
    if ((err as { code?: string; constraint?: string }).constraint === 'slack_connections_team_id_key') return undefined;
    throw err;
  }
}

export async function findSlackConnection(db: Queryable, workspaceId: string): Promise<SlackConnectionRow | undefined> {
  const { rows } = await db.query<SlackConnectionRow>(`SELECT * FROM slack_connections WHERE workspace_id = $1`, [workspaceId]);
  return rows[0];
}

/** The connection an interaction belongs to, by the Slack team it names (verified with that connection's signing secret next). */
export async function findSlackConnectionByTeam(db: Queryable, teamId: string): Promise<SlackConnectionRow | undefined> {
  const { rows } = await db.query<SlackConnectionRow>(`SELECT * FROM slack_connections WHERE team_id = $1`, [teamId]);
  return rows[0];
}

export async function deleteSlackConnection(db: Queryable, workspaceId: string): Promise<boolean> {
  const { rowCount } = await db.query(`DELETE FROM slack_connections WHERE workspace_id = $1`, [workspaceId]);
  return rowCount === 1;
}

/** A posted Slack message of a question, updated once the question is no longer open. */
export interface SlackMessageKey {
  question_id: string;
  channel_id: string;
  ts: string;
}

export interface ClaimedSlackMessage extends SlackMessageKey {
  workspace_id: string;
  attempts: number;
}

/** Woken (at commit) when a Slack message becomes due, so it is updated at once. */
export const SLACK_MESSAGES_CHANNEL = 'decision_slack_messages';

/** The Slack update loop's work table: messages still showing an open question, due when it may have ended. */
export const DUE_SLACK_MESSAGES: WorkTable = {
  table: `${SCHEMA}.slack_messages`,
  key: ['question_id', 'channel_id', 'ts'],
  due: 'due_at',
  waiting: "state = 'pending'",
  returning: 'question_id, channel_id, ts, workspace_id, attempts',
  onClaim: 'attempts = attempts + 1',
};

/**
 * Records a posted message. It is due at once when its question has already ended, else in a few
 * seconds (an answer committed while it was being posted is then shown; a question still open is
 * looked at again at its expiry).
 */
export async function insertSlackMessage(db: Queryable, m: SlackMessageKey & { workspace_id: string }): Promise<void> {
  await db.query(
    `INSERT INTO slack_messages (question_id, workspace_id, channel_id, ts, due_at)
     SELECT $1, $2, $3, $4, CASE WHEN status = 'pending' AND expires_at > clock_timestamp() THEN clock_timestamp() + interval '5 seconds' ELSE clock_timestamp() END
       FROM questions WHERE id = $1
     ON CONFLICT DO NOTHING`,
    [m.question_id, m.workspace_id, m.channel_id, m.ts],
  );
  await db.query(`NOTIFY ${SLACK_MESSAGES_CHANNEL}`);
}

/**
 * Makes a question's Slack messages due now and wakes the update loop (at commit, in the
 * transaction that settles the question): one statement, as it is on every answer's path.
 */
export async function slackMessagesDue(db: Queryable, questionId: string): Promise<void> {
  await db.query(
    `WITH due AS (UPDATE slack_messages SET due_at = clock_timestamp() WHERE question_id = $1 AND state = 'pending' RETURNING 1)
     SELECT pg_notify($2, '') WHERE EXISTS (SELECT 1 FROM due)`,
    [questionId, SLACK_MESSAGES_CHANNEL],
  );
}

/** Records a claimed message's update (updated), or when to look again (pending), while the claim holds. */
export async function recordSlackMessage(db: Queryable, key: SlackMessageKey, claim: string, next: { state: 'updated' } | { state: 'pending'; dueAt: Date }): Promise<void> {
  const params = [key.question_id, key.channel_id, key.ts, claim];
  const where = 'WHERE question_id = $1 AND channel_id = $2 AND ts = $3 AND claim = $4';
  if (next.state === 'updated') await db.query(`UPDATE slack_messages SET state = 'updated', ${RELEASED} ${where}`, params);
  else await db.query(`UPDATE slack_messages SET due_at = $5, ${RELEASED} ${where}`, [...params, next.dueAt]);
}

/** A question's escalation step as the escalation loop claims it (question_escalations). */
export interface ClaimedEscalation {
  question_id: string;
  step: number;
}

/** Woken (at commit) when escalation steps are recorded, so the loop sleeps until the first is due. */
export const ESCALATIONS_CHANNEL = 'decision_question_escalations';

/** The escalation loop's work table: pending steps by due time. */
export const DUE_ESCALATIONS: WorkTable = {
  table: `${SCHEMA}.question_escalations`,
  key: ['question_id', 'step'],
  due: 'due_at',
  waiting: "state = 'pending'",
  returning: 'question_id, step',
};

/**
 * Records a question's escalation steps, each due `afterSeconds` after it was opened; a step due
 * at or after its expiry is recorded skipped (it never fires). Steps already recorded (a
 * redelivered event) stay as they are.
 */
export async function insertEscalations(db: Queryable, questionId: string): Promise<void> {
  const { rowCount } = await db.query(
    `INSERT INTO question_escalations (question_id, step, due_at, state, reason, finished_at)
     SELECT q.id, s.step, s.due_at,
            CASE WHEN s.due_at >= q.expires_at THEN 'skipped' ELSE 'pending' END,
            CASE WHEN s.due_at >= q.expires_at THEN 'due after the question expires' END,
            CASE WHEN s.due_at >= q.expires_at THEN clock_timestamp() END
       FROM questions q,
            LATERAL (SELECT (e.ordinality - 1)::int AS step, q.created_at + make_interval(secs => (e.value ->> 'afterSeconds')::int) AS due_at
                       FROM jsonb_array_elements(q.escalation) WITH ORDINALITY AS e) s
      WHERE q.id = $1
     ON CONFLICT DO NOTHING`,
    [questionId],
  );
  if (rowCount) await db.query(`NOTIFY ${ESCALATIONS_CHANNEL}`);
}

/** The question of a claimed step, locked against a concurrent answer or cancellation until the step's transaction ends. */
export async function lockQuestion(db: Queryable, id: string): Promise<QuestionRow | undefined> {
  const { rows } = await db.query<QuestionRow>(`SELECT ${COLUMNS} FROM questions WHERE id = $1 FOR NO KEY UPDATE`, [id]);
  return rows[0];
}

/** Marks a claimed step fired or skipped while the claim holds; false: the claim was lost (another replica has it). */
export async function finishEscalation(db: Queryable, key: ClaimedEscalation, claim: string, state: 'fired' | 'skipped', reason: string | null): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE question_escalations SET state = $4, reason = $5, finished_at = clock_timestamp(), ${RELEASED}
      WHERE question_id = $1 AND step = $2 AND claim = $3 AND state = 'pending'`,
    [key.question_id, key.step, claim, state, reason],
  );
  return rowCount === 1;
}

/** A question's record, oldest first, after entry `afterSeq`: a page of `limit` entries, or (null) all of them. */
export async function listEvents(db: Queryable, questionId: string, afterSeq: number, limit: number | null): Promise<QuestionEventRow[]> {
  const { rows } = await db.query<QuestionEventRow>(`SELECT * FROM question_events WHERE question_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, [questionId, afterSeq, limit]);
  return rows;
}

/**
 * Adds an escalation step's approvers to a question that names approvers (those already named
 * stay once); a question without approvers (anyone holding its link answers) stays so.
 */
export async function addApprovers(db: Queryable, questionId: string, approvers: Approver[]): Promise<void> {
  if (approvers.length === 0) return;
  await db.query(
    `UPDATE questions SET approvers = approvers || coalesce((SELECT jsonb_agg(a.value) FROM jsonb_array_elements($2::jsonb) AS a WHERE NOT questions.approvers @> jsonb_build_array(a.value)), '[]')
      WHERE id = $1 AND jsonb_array_length(approvers) > 0`,
    [questionId, JSON.stringify(approvers)],
  );
}
