import { fileURLToPath } from 'node:url';

import { withTransaction, type Pool, type Queryable } from '@herald/db';
import { enqueue, topics } from '@herald/bus';
import type { KeyOrigin, PlanName, Role } from '@herald/domain';
import { AccountEvent } from '@herald/proto/herald/account/v1/events';

/** Every SQL statement of the account service. Each query is scoped by workspace id. */

export const SCHEMA = 'account';
export const migrationsDir = fileURLToPath(new URL('../../migrations', import.meta.url));

/** browser: a question is pushed to its approvers; terminal: it is stored and nothing is pushed. */
export const APPROVAL_MODES = ['browser', 'terminal'] as const;
export type ApprovalMode = (typeof APPROVAL_MODES)[number];
export const isApprovalMode = (value: string): value is ApprovalMode => (APPROVAL_MODES as readonly string[]).includes(value);

export interface WorkspaceRow {
  id: string;
  name: string;
  plan: PlanName;
  approval_mode: ApprovalMode;
  owner_external_id: string;
  created_at: Date;
}

export interface SiteRow {
  id: string;
  workspace_id: string;
  name: string;
  slug: string;
  domain: string;
  site_key: string;
  vapid_public_key: string;
  created_at: Date;
}

export interface KeyRow {
  id: string;
  workspace_id: string;
  name: string;
  origin: KeyOrigin;
  scopes: string[];
  bound_external_id: string | null;
  created_at: Date;
  last_used_at: Date | null;
  expires_at: Date | null;
  revoked_at: Date | null;
}

export interface MachineRow {
  machine_id: string;
  name: string;
  platform: string;
  key_id: string;
  first_seen_at: Date;
  last_seen_at: Date;
}

type EventKind = NonNullable<AccountEvent['kind']>;

async function recordEvent(tx: Queryable, workspaceId: string, kind: EventKind): Promise<void> {
  const eventId = crypto.randomUUID();
  const payload = AccountEvent.encode({ eventId, occurredAt: new Date().toISOString(), workspaceId, kind }).finish();
  await enqueue(tx, SCHEMA, [{ topic: topics.accountEvents.name, key: workspaceId, payload, eventId }]);
}

export interface NewWorkspace {
  workspace: { id: string; name: string; plan: PlanName; ownerExternalId: string; approvalMode: 'browser' | 'terminal' };
  site: { id: string; slug: string; domain: string; siteKey: string; vapidPublicKey: string; vapidPrivateKey: string };
}

export async function createWorkspace(pool: Pool, { workspace, site }: NewWorkspace): Promise<void> {
  await withTransaction(pool, async (tx) => {
    await tx.query(
      `INSERT INTO workspaces (id, name, plan, approval_mode, owner_external_id) VALUES ($1, $2, $3, $4, $5)`,
      [workspace.id, workspace.name, workspace.plan, workspace.approvalMode, workspace.ownerExternalId],
    );
    await tx.query(
      `INSERT INTO sites (id, workspace_id, name, slug, domain, site_key, vapid_public_key, vapid_private_key)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [site.id, workspace.id, workspace.name, site.slug, site.domain, site.siteKey, site.vapidPublicKey, site.vapidPrivateKey],
    );
    await recordEvent(tx, workspace.id, {
      $case: 'workspaceCreated',
      value: { name: workspace.name, plan: workspace.plan, siteId: site.id },
    });
  });
}

/** Returns the previous plan, or undefined when the workspace does not exist. */
export async function setPlan(pool: Pool, workspaceId: string, plan: PlanName): Promise<PlanName | undefined> {
  return withTransaction(pool, async (tx) => {
    const { rows } = await tx.query<{ plan: PlanName }>(`SELECT plan FROM workspaces WHERE id = $1 FOR UPDATE`, [workspaceId]);
    const previous = rows[0]?.plan;
    if (previous === undefined) return undefined;
    await tx.query(`UPDATE workspaces SET plan = $2, updated_at = now() WHERE id = $1`, [workspaceId, plan]);
    await recordEvent(tx, workspaceId, { $case: 'planChanged', value: { previousPlan: previous, plan } });
    return previous;
  });
}

export interface NewKey {
  id: string;
  workspaceId: string;
  name: string;
  origin: KeyOrigin;
  scopes: readonly string[];
  boundExternalId: string | null;
  secretHash: Buffer;
  expiresAt: Date | null;
}

/** Returns false when the workspace does not exist. */
export async function createKey(pool: Pool, key: NewKey): Promise<boolean> {
  return withTransaction(pool, async (tx) => {
    const { rowCount } = await tx.query(
      `INSERT INTO api_keys (id, workspace_id, name, origin, scopes, bound_external_id, secret_hash, expires_at)
       SELECT $1, id, $3, $4, $5, $6, $7, $8 FROM workspaces WHERE id = $2`,
      [key.id, key.workspaceId, key.name, key.origin, key.scopes, key.boundExternalId, key.secretHash, key.expiresAt],
    );
    if (rowCount === 0) return false;
    await recordEvent(tx, key.workspaceId, { $case: 'keyCreated', value: { keyId: key.id, origin: key.origin } });
    return true;
  });
}

/** Revokes a key; returns its workspace, or undefined when no such key (or it was revoked already). */
export async function revokeKey(pool: Pool, keyId: string, workspaceId?: string): Promise<string | undefined> {
  return withTransaction(pool, async (tx) => {
    const { rows } = await tx.query<{ workspace_id: string }>(
      `UPDATE api_keys SET revoked_at = now()
        WHERE id = $1 AND revoked_at IS NULL AND ($2::text IS NULL OR workspace_id = $2)
        RETURNING workspace_id`,
      [keyId, workspaceId ?? null],
    );
    const owner = rows[0]?.workspace_id;
    if (owner !== undefined) await recordEvent(tx, owner, { $case: 'keyRevoked', value: { keyId } });
    return owner;
  });
}

export interface KeyForAuthentication extends KeyRow {
  secret_hash: Buffer;
  plan: PlanName;
  approval_mode: 'browser' | 'terminal';
  owner_external_id: string;
  site_id: string;
}

export async function findKeyForAuthentication(db: Queryable, keyId: string): Promise<KeyForAuthentication | undefined> {
  const { rows } = await db.query<KeyForAuthentication>(
    `SELECT k.*, w.plan, w.approval_mode, w.owner_external_id, s.id AS site_id
       FROM api_keys k
       JOIN workspaces w ON w.id = k.workspace_id
       JOIN sites s ON s.workspace_id = k.workspace_id
      WHERE k.id = $1`,
    [keyId],
  );
  return rows[0];
}

/** Records use at most once a minute per key, so authentication stays a read. */
export async function touchKey(db: Queryable, keyId: string): Promise<void> {
  await db.query(
    `UPDATE api_keys SET last_used_at = now()
      WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`,
    [keyId],
  );
}

export interface IdentityRows {
  key: KeyRow;
  workspace: WorkspaceRow;
  site: SiteRow;
}

/** The calling key with its workspace and site, in one round trip. */
export async function findIdentity(db: Queryable, workspaceId: string, keyId: string): Promise<IdentityRows | undefined> {
  const { rows } = await db.query<{ key: KeyRow; workspace: WorkspaceRow; site: SiteRow }>(
    `SELECT to_jsonb(k) - 'secret_hash' AS key, to_jsonb(w) AS workspace, to_jsonb(s) - 'vapid_private_key' AS site
       FROM api_keys k
       JOIN workspaces w ON w.id = k.workspace_id
       JOIN sites s ON s.workspace_id = k.workspace_id
      WHERE k.workspace_id = $1 AND k.id = $2`,
    [workspaceId, keyId],
  );
  const row = rows[0];
  if (!row) return undefined;
  // jsonb carries timestamps as text; the rows elsewhere carry Dates.
  const dates = <T extends object>(record: T, fields: Array<keyof T>): T => {
    for (const field of fields) {
      const value = record[field];
      if (typeof value === 'string') (record[field] as unknown) = new Date(value);
    }
    return record;
  };
  return {
    key: dates(row.key, ['created_at', 'last_used_at', 'expires_at', 'revoked_at']),
    workspace: dates(row.workspace, ['created_at']),
    site: dates(row.site, ['created_at']),
  };
}

const workspaceColumns = 'id, name, plan, approval_mode, owner_external_id, created_at';

export async function findWorkspace(db: Queryable, workspaceId: string): Promise<WorkspaceRow | undefined> {
  const { rows } = await db.query<WorkspaceRow>(`SELECT ${workspaceColumns} FROM workspaces WHERE id = $1`, [workspaceId]);
  return rows[0];
}

export async function setApprovalMode(db: Queryable, workspaceId: string, approvalMode: WorkspaceRow['approval_mode']): Promise<WorkspaceRow | undefined> {
  const { rows } = await db.query<WorkspaceRow>(`UPDATE workspaces SET approval_mode = $2 WHERE id = $1 RETURNING ${workspaceColumns}`, [workspaceId, approvalMode]);
  return rows[0];
}

export async function findSite(db: Queryable, workspaceId: string): Promise<SiteRow | undefined> {
  const { rows } = await db.query<SiteRow>(
    `SELECT id, workspace_id, name, slug, domain, site_key, vapid_public_key, created_at FROM sites WHERE workspace_id = $1`,
    [workspaceId],
  );
  return rows[0];
}

export interface PublicSiteRow {
  workspace_id: string;
  id: string;
  name: string;
  slug: string;
  domain: string;
  site_key: string;
  vapid_public_key: string;
  logo_url: string | null;
  primary_color: string;
  button_text: string;
  plan: PlanName;
}

const publicSiteColumns = `s.workspace_id, s.id, s.name, s.slug, s.domain, s.site_key, s.vapid_public_key,
  s.logo_url, s.primary_color, s.button_text, w.plan`;

export async function findSiteByKey(db: Queryable, siteKey: string): Promise<PublicSiteRow | undefined> {
  const { rows } = await db.query<PublicSiteRow>(
    `SELECT ${publicSiteColumns} FROM sites s JOIN workspaces w ON w.id = s.workspace_id WHERE s.site_key = $1`,
    [siteKey],
  );
  return rows[0];
}

export async function findSiteBySlug(db: Queryable, slug: string): Promise<PublicSiteRow | undefined> {
  const { rows } = await db.query<PublicSiteRow>(
    `SELECT ${publicSiteColumns} FROM sites s JOIN workspaces w ON w.id = s.workspace_id WHERE s.slug = $1`,
    [slug],
  );
  return rows[0];
}

export async function findVapidKeys(db: Queryable, siteId: string): Promise<{ public: string; private: string } | undefined> {
  const { rows } = await db.query<{ public: string; private: string }>(
    `SELECT vapid_public_key AS public, vapid_private_key AS private FROM sites WHERE id = $1`,
    [siteId],
  );
  return rows[0];
}

export async function findSendingFacts(
  db: Queryable,
  workspaceId: string,
): Promise<{ site_id: string; signing_keys_configured: boolean; plan: PlanName } | undefined> {
  const { rows } = await db.query<{ site_id: string; signing_keys_configured: boolean; plan: PlanName }>(
    `SELECT s.id AS site_id, (s.vapid_public_key <> '' AND s.vapid_private_key <> '') AS signing_keys_configured, w.plan
       FROM sites s JOIN workspaces w ON w.id = s.workspace_id WHERE s.workspace_id = $1`,
    [workspaceId],
  );
  return rows[0];
}

export async function countDevices(
  db: Queryable,
  workspaceId: string,
  externalId: string,
): Promise<{ site: number; externalId: number }> {
  const { rows } = await db.query<{ site: string; external: string }>(
    `SELECT count(*) AS site, count(*) FILTER (WHERE external_id = $2) AS external
       FROM devices WHERE workspace_id = $1 AND revoked_at IS NULL`,
    [workspaceId, externalId],
  );
  return { site: Number(rows[0]?.site ?? 0), externalId: Number(rows[0]?.external ?? 0) };
}

export async function upsertMachine(
  db: Queryable,
  machine: { workspaceId: string; keyId: string; machineId: string; name: string; platform: string },
): Promise<MachineRow> {
  const { rows } = await db.query<MachineRow>(
    `INSERT INTO machines (workspace_id, machine_id, name, platform, key_id) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (workspace_id, machine_id) DO UPDATE
        SET name = COALESCE(NULLIF(EXCLUDED.name, ''), machines.name),
            platform = COALESCE(NULLIF(EXCLUDED.platform, ''), machines.platform),
            key_id = EXCLUDED.key_id,
            last_seen_at = now()
     RETURNING machine_id, name, platform, key_id, first_seen_at, last_seen_at`,
    [machine.workspaceId, machine.machineId, machine.name, machine.platform, machine.keyId],
  );
  return rows[0] as MachineRow;
}

/** Most recently seen first; a workspace keeps at most the 500 newest in the answer. */
export async function listMachines(db: Queryable, workspaceId: string): Promise<MachineRow[]> {
  const { rows } = await db.query<MachineRow>(
    `SELECT machine_id, name, platform, key_id, first_seen_at, last_seen_at
       FROM machines WHERE workspace_id = $1 ORDER BY last_seen_at DESC, machine_id LIMIT 500`,
    [workspaceId],
  );
  return rows;
}

const keyColumns = `id, workspace_id, name, origin, scopes, bound_external_id, created_at, last_used_at, expires_at, revoked_at`;

/** A workspace's bound keys, newest first (revoked ones too), optionally of one end-user. */
export async function listBoundKeys(db: Queryable, workspaceId: string, externalId: string | null, limit: number): Promise<KeyRow[]> {
  const { rows } = await db.query<KeyRow>(
    `SELECT ${keyColumns} FROM api_keys
      WHERE workspace_id = $1 AND origin = 'bound' AND ($2::text IS NULL OR bound_external_id = $2)
      ORDER BY created_at DESC, id DESC LIMIT $3`,
    [workspaceId, externalId, limit],
  );
  return rows;
}

export async function findBoundKey(db: Queryable, workspaceId: string, keyId: string): Promise<KeyRow | undefined> {
  const { rows } = await db.query<KeyRow>(`SELECT ${keyColumns} FROM api_keys WHERE workspace_id = $1 AND id = $2 AND origin = 'bound'`, [
    workspaceId,
    keyId,
  ]);
  return rows[0];
}

/** Stores a link's token hash; returns when it expires (database clock), or undefined without a site. */
export async function createEnrollment(
  db: Queryable,
  enrollment: { tokenHash: Buffer; workspaceId: string; externalId: string; keyId: string; ttlSeconds: number; pairing: boolean },
): Promise<Date | undefined> {
  const { rows } = await db.query<{ expires_at: Date }>(
    `INSERT INTO enrollments (token_hash, workspace_id, site_id, external_id, key_id, expires_at, pairing)
     SELECT $1, workspace_id, id, $3, $4, now() + make_interval(secs => $5), $6 FROM sites WHERE workspace_id = $2
     RETURNING expires_at`,
    [enrollment.tokenHash, enrollment.workspaceId, enrollment.externalId, enrollment.keyId, enrollment.ttlSeconds, enrollment.pairing],
  );
  return rows[0]?.expires_at;
}

export type EnrollmentState = 'active' | 'used' | 'expired';

export interface EnrollmentRow {
  state: EnrollmentState;
  external_id: string;
  expires_at: Date;
  /** Made by POST /pair (every plan) rather than POST /enroll (Partner). */
  pairing: boolean;
  site: PublicSiteRow;
}

const enrollmentState = `CASE WHEN e.used_at IS NOT NULL THEN 'used' WHEN e.expires_at <= now() THEN 'expired' ELSE 'active' END`;

export async function findEnrollment(db: Queryable, tokenHash: Buffer): Promise<EnrollmentRow | undefined> {
  const { rows } = await db.query<Omit<EnrollmentRow, 'site'> & PublicSiteRow>(
    `SELECT ${enrollmentState} AS state, e.external_id, e.expires_at, e.pairing, ${publicSiteColumns}
       FROM enrollments e JOIN sites s ON s.id = e.site_id JOIN workspaces w ON w.id = s.workspace_id
      WHERE e.token_hash = $1`,
    [tokenHash],
  );
  const row = rows[0];
  if (!row) return undefined;
  const { state, external_id, expires_at, pairing, ...site } = row;
  return { state, external_id, expires_at, pairing, site };
}

/**
 * Marks an active link used. One row lock decides between concurrent callers: the first wins,
 * the others re-read the row as used. Otherwise says why not (undefined: no such link).
 */
export async function consumeEnrollment(
  pool: Pool,
  tokenHash: Buffer,
): Promise<{ state: 'claimed'; workspace_id: string; site_id: string; external_id: string } | { state: 'used' | 'expired' } | undefined> {
  const { rows } = await pool.query<{ workspace_id: string; site_id: string; external_id: string }>(
    `UPDATE enrollments SET used_at = now() WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
     RETURNING workspace_id, site_id, external_id`,
    [tokenHash],
  );
  const claimed = rows[0];
  if (claimed) return { state: 'claimed', ...claimed };
  const { rows: current } = await pool.query<{ state: EnrollmentState }>(`SELECT ${enrollmentState} AS state FROM enrollments e WHERE token_hash = $1`, [
    tokenHash,
  ]);
  const state = current[0]?.state;
  if (state === undefined) return undefined;
  return { state: state === 'used' ? 'used' : 'expired' };
}

export interface SecretRow {
  secret: string;
  created_at: Date;
  expires_at: Date | null;
}

/** Rotatable per-workspace secrets, each in its table of one shape: webhook signing, identity verification. */
export type SecretTable = 'webhook_secrets' | 'identity_secrets';

const usableSecretsSql = (table: SecretTable) => `SELECT secret, created_at, expires_at FROM ${table}
   WHERE workspace_id = $1 AND (expires_at IS NULL OR expires_at > now()) ORDER BY id DESC`;

/** The workspace's usable secrets of a table, newest first, without making one. */
export async function usableSecrets(db: Queryable, table: SecretTable, workspaceId: string): Promise<SecretRow[]> {
  return (await db.query<SecretRow>(usableSecretsSql(table), [workspaceId])).rows;
}

/**
 * The workspace's usable secrets, newest first; the first call stores `firstSecret` as the
 * current one (the unique index on the current secret settles concurrent first calls). Empty when
 * the workspace does not exist.
 */
export async function secrets(pool: Pool, table: SecretTable, workspaceId: string, firstSecret: string): Promise<SecretRow[]> {
  const rows = await usableSecrets(pool, table, workspaceId);
  if (rows.length > 0) return rows;
  await pool.query(
    `INSERT INTO ${table} (workspace_id, secret) SELECT id, $2 FROM workspaces WHERE id = $1
     ON CONFLICT (workspace_id) WHERE expires_at IS NULL DO NOTHING`,
    [workspaceId, firstSecret],
  );
  return usableSecrets(pool, table, workspaceId);
}

/**
 * Makes `secret` current; the current one becomes the previous, usable for `graceSeconds`. An
 * older previous one ends now (at most two are usable). Empty when the workspace does not exist.
 */
export async function rotateSecret(pool: Pool, table: SecretTable, workspaceId: string, secret: string, graceSeconds: number): Promise<SecretRow[]> {
  return withTransaction(pool, async (tx) => {
    // Serialises rotations of one workspace.
    const { rowCount } = await tx.query(`SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE`, [workspaceId]);
    if (rowCount === 0) return [];
    await tx.query(`DELETE FROM ${table} WHERE workspace_id = $1 AND expires_at IS NOT NULL`, [workspaceId]);
    await tx.query(`UPDATE ${table} SET expires_at = now() + $2 * interval '1 second' WHERE workspace_id = $1 AND expires_at IS NULL`, [workspaceId, graceSeconds]);
    await tx.query(`INSERT INTO ${table} (workspace_id, secret) VALUES ($1, $2)`, [workspaceId, secret]);
    return usableSecrets(tx, table, workspaceId);
  });
}

// ---- Members, sign-in links and sessions ----

export interface MemberRow {
  id: string;
  workspace_id: string;
  email: string;
  display_name: string;
  role: Role;
  status: 'invited' | 'active' | 'removed';
  created_at: Date;
  last_sign_in_at: Date | null;
}

const memberColumns = 'm.id, m.workspace_id, m.email, m.display_name, m.role, m.status, m.created_at, m.last_sign_in_at';

/** undefined when the address is already a member of the workspace (removed members included). */
export async function insertMember(
  db: Queryable,
  member: { id: string; workspaceId: string; email: string; displayName: string; role: Role },
): Promise<MemberRow | undefined> {
  const { rows } = await db.query<MemberRow>(
    `INSERT INTO members AS m (id, workspace_id, email, display_name, role) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (workspace_id, email) DO NOTHING
     RETURNING ${memberColumns}`,
    [member.id, member.workspaceId, member.email, member.displayName, member.role],
  );
  return rows[0];
}

export async function listMembers(db: Queryable, workspaceId: string, limit: number): Promise<MemberRow[]> {
  const { rows } = await db.query<MemberRow>(`SELECT ${memberColumns} FROM members m WHERE m.workspace_id = $1 ORDER BY m.created_at, m.id LIMIT $2`, [
    workspaceId,
    limit,
  ]);
  return rows;
}

export async function findMember(db: Queryable, workspaceId: string, memberId: string): Promise<MemberRow | undefined> {
  const { rows } = await db.query<MemberRow>(`SELECT ${memberColumns} FROM members m WHERE m.workspace_id = $1 AND m.id = $2`, [workspaceId, memberId]);
  return rows[0];
}

/** The memberships an address can sign in to (invited or active), across workspaces. */
export async function findMembershipsByEmail(db: Queryable, email: string): Promise<MemberRow[]> {
  const { rows } = await db.query<MemberRow>(`SELECT ${memberColumns} FROM members m WHERE m.email = $1 AND m.status <> 'removed' ORDER BY m.created_at`, [email]);
  return rows;
}

/**
 * Marks the member removed, ends their sessions and records MemberRemoved (whose reader, the
 * audience service, deletes their devices), in one transaction.
 */
export async function removeMember(pool: Pool, workspaceId: string, memberId: string): Promise<MemberRow | undefined> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<MemberRow>(
      `UPDATE members m SET status = 'removed' WHERE m.workspace_id = $1 AND m.id = $2 RETURNING ${memberColumns}`,
      [workspaceId, memberId],
    );
    if (rows[0]) {
      await client.query(`UPDATE member_sessions SET revoked_at = now() WHERE member_id = $1 AND revoked_at IS NULL`, [memberId]);
      await recordEvent(client, workspaceId, { $case: 'memberRemoved', value: { memberId } });
    }
    return rows[0];
  });
}

export async function createSignInLink(db: Queryable, link: { tokenHash: Buffer; memberId: string; ttlSeconds: number }): Promise<Date> {
  const { rows } = await db.query<{ expires_at: Date }>(
    `INSERT INTO sign_in_links (token_hash, member_id, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3)) RETURNING expires_at`,
    [link.tokenHash, link.memberId, link.ttlSeconds],
  );
  return rows[0]!.expires_at;
}

export type SignInOutcome = { state: 'signed_in'; member: MemberRow; expiresAt: Date } | { state: 'used' | 'expired' | 'refused' };

/**
 * Uses a sign-in link up and opens a session, in one transaction: the link's row update decides
 * between concurrent callers. The member becomes active (an invite accepted). undefined: no such
 * link. `refused`: the member was removed since.
 */
export async function consumeSignInLink(
  pool: Pool,
  tokenHash: Buffer,
  session: NewSession,
): Promise<SignInOutcome | undefined> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ member_id: string }>(
      `UPDATE sign_in_links SET used_at = now() WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now() RETURNING member_id`,
      [tokenHash],
    );
    const claimed = rows[0];
    if (!claimed) {
      const { rows: current } = await client.query<{ used: boolean }>(`SELECT used_at IS NOT NULL AS used FROM sign_in_links WHERE token_hash = $1`, [tokenHash]);
      if (current[0] === undefined) return undefined;
      return { state: current[0].used ? 'used' : 'expired' };
    }
    return openSession(client, claimed.member_id, session);
  });
}

/** What opening a session needs: its id and CSRF token (fresh), and its lifetimes. */
export interface NewSession {
  idHash: Buffer;
  csrfToken: string;
  idleSeconds: number;
  maxSeconds: number;
}

/**
 * Signs a member in, whatever proved who they are (an email link, single sign-on): the member
 * becomes active (an invite accepted) and a new session opens. `refused`: the member was removed.
 */
export async function openSession(db: Queryable, memberId: string, session: NewSession): Promise<{ state: 'signed_in'; member: MemberRow; expiresAt: Date } | { state: 'refused' }> {
  const { rows: members } = await db.query<MemberRow>(
    `UPDATE members m SET status = 'active', last_sign_in_at = now() WHERE m.id = $1 AND m.status <> 'removed' RETURNING ${memberColumns}`,
    [memberId],
  );
  const member = members[0];
  if (!member) return { state: 'refused' };
  const { rows: sessions } = await db.query<{ expires_at: Date }>(
    `INSERT INTO member_sessions (id_hash, member_id, csrf_token, idle_expires_at, expires_at)
     VALUES ($1, $2, $3, now() + make_interval(secs => $4), now() + make_interval(secs => $5)) RETURNING expires_at`,
    [session.idHash, member.id, session.csrfToken, session.idleSeconds, session.maxSeconds],
  );
  return { state: 'signed_in', member, expiresAt: sessions[0]!.expires_at };
}

export interface SessionRow {
  member: MemberRow;
  csrf_token: string;
  workspace_name: string;
  plan: PlanName;
  approval_mode: 'browser' | 'terminal';
  owner_external_id: string;
  site_id: string;
}

/**
 * A live session (not revoked, not idle, not past its absolute expiry, its member not removed),
 * its idle expiry pushed forward (at most once a minute, so most requests stay reads).
 */
export async function findLiveSession(db: Queryable, idHash: Buffer, idleSeconds: number): Promise<SessionRow | undefined> {
  const { rows } = await db.query<MemberRow & Omit<SessionRow, 'member'>>(
    `WITH live AS (
       SELECT ses.id_hash, ses.csrf_token, ses.last_seen_at, ${memberColumns},
              w.name AS workspace_name, w.plan, w.approval_mode, w.owner_external_id, s.id AS site_id
         FROM member_sessions ses
         JOIN members m ON m.id = ses.member_id
         JOIN workspaces w ON w.id = m.workspace_id
         JOIN sites s ON s.workspace_id = m.workspace_id
        WHERE ses.id_hash = $1 AND ses.revoked_at IS NULL AND ses.idle_expires_at > now() AND ses.expires_at > now()
          AND m.status <> 'removed'
     ), touched AS (
       UPDATE member_sessions SET last_seen_at = now(), idle_expires_at = LEAST(expires_at, now() + make_interval(secs => $2))
        WHERE id_hash = (SELECT id_hash FROM live WHERE last_seen_at < now() - interval '1 minute')
     )
     SELECT * FROM live`,
    [idHash, idleSeconds],
  );
  const row = rows[0];
  if (!row) return undefined;
  const { csrf_token, workspace_name, plan, approval_mode, owner_external_id, site_id, ...member } = row;
  return {
    member: { id: member.id, workspace_id: member.workspace_id, email: member.email, display_name: member.display_name, role: member.role, status: member.status, created_at: member.created_at, last_sign_in_at: member.last_sign_in_at },
    csrf_token,
    workspace_name,
    plan,
    approval_mode,
    owner_external_id,
    site_id,
  };
}

/** Ends one session of the member (idHash) or all of them; how many were still live. */
export async function revokeSessions(db: Queryable, workspaceId: string, memberId: string, idHash: Buffer | undefined): Promise<number> {
  const { rows } = await db.query<{ live: number }>(
    `WITH ended AS (
       UPDATE member_sessions ses SET revoked_at = now()
         FROM members m
        WHERE m.id = ses.member_id AND m.workspace_id = $1 AND ses.member_id = $2 AND ses.revoked_at IS NULL
          AND ($3::bytea IS NULL OR ses.id_hash = $3)
       RETURNING ses.expires_at > now() AND ses.idle_expires_at > now() AS live
     )
     SELECT count(*) FILTER (WHERE live)::int AS live FROM ended`,
    [workspaceId, memberId, idHash ?? null],
  );
  return rows[0]?.live ?? 0;
}

// ---- Single sign-on (OpenID Connect) ----

export interface SsoConfigRow {
  workspace_id: string;
  issuer: string;
  client_id: string;
  client_secret: string;
  allowed_domains: string[];
  auto_provision_role: Role | null;
  created_at: Date;
  updated_at: Date;
}

const ssoConfigColumns = 'workspace_id, issuer, client_id, client_secret, allowed_domains, auto_provision_role, created_at, updated_at';

export async function findSsoConfig(db: Queryable, workspaceId: string): Promise<SsoConfigRow | undefined> {
  const { rows } = await db.query<SsoConfigRow>(`SELECT ${ssoConfigColumns} FROM sso_configs WHERE workspace_id = $1`, [workspaceId]);
  return rows[0];
}

/** Creates or replaces the workspace's configuration; an empty `clientSecret` keeps the stored one. */
export async function upsertSsoConfig(
  db: Queryable,
  config: { workspaceId: string; issuer: string; clientId: string; clientSecret: string; allowedDomains: string[]; autoProvisionRole: Role | null },
): Promise<{ row: SsoConfigRow; created: boolean }> {
  const { rows } = await db.query<SsoConfigRow & { created: boolean }>(
    `INSERT INTO sso_configs AS c (workspace_id, issuer, client_id, client_secret, allowed_domains, auto_provision_role)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (workspace_id) DO UPDATE SET issuer = EXCLUDED.issuer, client_id = EXCLUDED.client_id,
       client_secret = COALESCE(NULLIF(EXCLUDED.client_secret, ''), c.client_secret), allowed_domains = EXCLUDED.allowed_domains,
       auto_provision_role = EXCLUDED.auto_provision_role, updated_at = now()
     RETURNING ${ssoConfigColumns}, (xmax = 0) AS created`,
    [config.workspaceId, config.issuer, config.clientId, config.clientSecret, config.allowedDomains, config.autoProvisionRole],
  );
  const { created, ...row } = rows[0]!;
  return { row, created };
}

export async function deleteSsoConfig(db: Queryable, workspaceId: string): Promise<boolean> {
  const { rowCount } = await db.query(`DELETE FROM sso_configs WHERE workspace_id = $1`, [workspaceId]);
  return (rowCount ?? 0) > 0;
}

/** A new sign-in attempt; attempts that ended over a day ago go (a bounded batch each time). */
export async function insertSsoAttempt(
  db: Queryable,
  attempt: { stateHash: Buffer; workspaceId: string; nonce: string; codeVerifier: string; ttlSeconds: number },
): Promise<Date> {
  const { rows } = await db.query<{ expires_at: Date }>(
    `WITH old AS (
       DELETE FROM sso_attempts WHERE state_hash IN (SELECT state_hash FROM sso_attempts WHERE expires_at < now() - interval '1 day' LIMIT 100)
     )
     INSERT INTO sso_attempts (state_hash, workspace_id, nonce, code_verifier, expires_at)
     VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5)) RETURNING expires_at`,
    [attempt.stateHash, attempt.workspaceId, attempt.nonce, attempt.codeVerifier, attempt.ttlSeconds],
  );
  return rows[0]!.expires_at;
}

/** Uses an attempt up (one caller wins); undefined when unknown, used or expired. */
export async function claimSsoAttempt(db: Queryable, stateHash: Buffer): Promise<{ workspace_id: string; nonce: string; code_verifier: string } | undefined> {
  const { rows } = await db.query<{ workspace_id: string; nonce: string; code_verifier: string }>(
    `UPDATE sso_attempts SET used_at = now() WHERE state_hash = $1 AND used_at IS NULL AND expires_at > now() RETURNING workspace_id, nonce, code_verifier`,
    [stateHash],
  );
  return rows[0];
}

/** The workspace's member with this (normalised) address, removed ones included. */
export async function findMemberByEmail(db: Queryable, workspaceId: string, email: string): Promise<MemberRow | undefined> {
  const { rows } = await db.query<MemberRow>(`SELECT ${memberColumns} FROM members m WHERE m.workspace_id = $1 AND m.email = $2`, [workspaceId, email]);
  return rows[0];
}

// ---- Passkeys (WebAuthn credentials) and their challenges ----

export interface PasskeyRow {
  id: string;
  member_id: string;
  credential_id: string;
  public_key: Buffer;
  counter: string;
  transports: string[];
  device_type: 'singleDevice' | 'multiDevice';
  backed_up: boolean;
  name: string;
  created_at: Date;
  last_used_at: Date | null;
}

const passkeyColumns = 'p.id, p.member_id, p.credential_id, p.public_key, p.counter, p.transports, p.device_type, p.backed_up, p.name, p.created_at, p.last_used_at';

export type ChallengePurpose = 'registration' | 'sign_in';

/** Stores a challenge (and drops those that expired over an hour ago). */
export async function createPasskeyChallenge(
  db: Queryable,
  challenge: { hash: Buffer; purpose: ChallengePurpose; sessionHash: Buffer | undefined; ttlSeconds: number },
): Promise<void> {
  await db.query(
    `WITH purged AS (DELETE FROM passkey_challenges WHERE expires_at < now() - interval '1 hour')
     INSERT INTO passkey_challenges (challenge_hash, purpose, session_hash, expires_at) VALUES ($1, $2, $3, now() + make_interval(secs => $4))`,
    [challenge.hash, challenge.purpose, challenge.sessionHash ?? null, challenge.ttlSeconds],
  );
}

/**
 * Uses a challenge up: true when it existed for this purpose (and this session, for a
 * registration), unused and unexpired. Used up whatever the verification that follows says.
 */
export async function consumePasskeyChallenge(db: Queryable, hash: Buffer, purpose: ChallengePurpose, sessionHash: Buffer | undefined): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE passkey_challenges SET used_at = now()
      WHERE challenge_hash = $1 AND purpose = $2 AND session_hash IS NOT DISTINCT FROM $3 AND used_at IS NULL AND expires_at > now()`,
    [hash, purpose, sessionHash ?? null],
  );
  return rowCount === 1;
}

/** The member's passkeys, oldest first. */
export async function listPasskeys(db: Queryable, workspaceId: string, memberId: string): Promise<PasskeyRow[]> {
  const { rows } = await db.query<PasskeyRow>(
    `SELECT ${passkeyColumns} FROM passkeys p JOIN members m ON m.id = p.member_id
      WHERE m.workspace_id = $1 AND p.member_id = $2 ORDER BY p.created_at, p.id`,
    [workspaceId, memberId],
  );
  return rows;
}

/** undefined when the credential is registered already (to anyone). */
export async function insertPasskey(
  db: Queryable,
  passkey: { id: string; memberId: string; credentialId: string; publicKey: Buffer; counter: number; transports: string[]; deviceType: string; backedUp: boolean; name: string },
): Promise<PasskeyRow | undefined> {
  const { rows } = await db.query<PasskeyRow>(
    `INSERT INTO passkeys AS p (id, member_id, credential_id, public_key, counter, transports, device_type, backed_up, name)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (credential_id) DO NOTHING RETURNING ${passkeyColumns}`,
    [passkey.id, passkey.memberId, passkey.credentialId, passkey.publicKey, passkey.counter, passkey.transports, passkey.deviceType, passkey.backedUp, passkey.name],
  );
  return rows[0];
}

/** A credential that can sign in: its member is not removed. */
export async function findPasskeyForSignIn(db: Queryable, credentialId: string): Promise<PasskeyRow | undefined> {
  const { rows } = await db.query<PasskeyRow>(
    `SELECT ${passkeyColumns} FROM passkeys p JOIN members m ON m.id = p.member_id WHERE p.credential_id = $1 AND m.status <> 'removed'`,
    [credentialId],
  );
  return rows[0];
}

/**
 * Records a verified use (the new counter, only if the stored one is still the one verified
 * against, so two concurrent uses of one assertion cannot both pass) and opens a session, in one
 * transaction. undefined: the counter moved meanwhile.
 */
export async function signInWithPasskey(pool: Pool, passkey: { id: string; counter: string; newCounter: number }, session: NewSession): Promise<SignInOutcome | undefined> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ member_id: string }>(
      `UPDATE passkeys SET counter = $3, last_used_at = now() WHERE id = $1 AND counter = $2 RETURNING member_id`,
      [passkey.id, passkey.counter, passkey.newCounter],
    );
    const used = rows[0];
    if (!used) return undefined;
    return openSession(client, used.member_id, session);
  });
}

/** Deletes the member's passkey; undefined when it is not theirs (or not in the workspace). */
export async function deletePasskey(db: Queryable, workspaceId: string, memberId: string, passkeyId: string): Promise<PasskeyRow | undefined> {
  const { rows } = await db.query<PasskeyRow>(
    `DELETE FROM passkeys p USING members m
      WHERE m.id = p.member_id AND m.workspace_id = $1 AND p.member_id = $2 AND p.id = $3
      RETURNING ${passkeyColumns}`,
    [workspaceId, memberId, passkeyId],
  );
  return rows[0];
}
