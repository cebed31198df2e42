import { fileURLToPath } from 'node:url';

import { CREATED_US_SQL, type Queryable } from '@herald/db';

/** Every SQL statement of the policy service. Each query is scoped by workspace id. */

export const SCHEMA = 'policy';
export const migrationsDir = fileURLToPath(new URL('../../migrations', import.meta.url));

export interface PolicyRow {
  workspace_id: string;
  policy: string | null;
  version: string;
  updated_at: Date;
}

export async function findPolicy(db: Queryable, workspaceId: string): Promise<PolicyRow | undefined> {
  const { rows } = await db.query<PolicyRow>(`SELECT workspace_id, policy, version, updated_at FROM policies WHERE workspace_id = $1`, [workspaceId]);
  return rows[0];
}

/** The cheap per-evaluation check: the current version (undefined: never written). */
export async function policyVersion(db: Queryable, workspaceId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ version: string }>(`SELECT version FROM policies WHERE workspace_id = $1`, [workspaceId]);
  return rows[0]?.version;
}

/** Who wrote a version: a member (signed in to the console) or an API key. */
export interface Changer {
  kind: 'key' | 'member';
  id: string;
}

/**
 * Replaces (or with null removes) the policy and bumps its version, and keeps the written document
 * as that version (with who wrote it), in one statement.
 */
export async function writePolicy(db: Queryable, workspaceId: string, policy: string | null, changedBy: Changer | undefined): Promise<PolicyRow> {
  const { rows } = await db.query<PolicyRow>(
    `WITH written AS (
       INSERT INTO policies (workspace_id, policy, version, updated_at) VALUES ($1, $2, 1, now())
       ON CONFLICT (workspace_id) DO UPDATE SET policy = EXCLUDED.policy, version = policies.version + 1, updated_at = now()
       RETURNING workspace_id, policy, version, updated_at
     ), kept AS (
       INSERT INTO policy_versions (workspace_id, version, policy, changed_by_kind, changed_by_id, created_at)
       SELECT workspace_id, version, policy, $3, $4, updated_at FROM written
     )
     SELECT workspace_id, policy, version, updated_at FROM written`,
    [workspaceId, policy, changedBy?.kind ?? null, changedBy?.id ?? null],
  );
  return rows[0] as PolicyRow;
}

export interface VersionRow {
  version: string;
  /** Null for a DELETE (and in lists, which carry no text: see `present`). */
  policy: string | null;
  present: boolean;
  changed_by_kind: 'key' | 'member' | null;
  changed_by_id: string | null;
  created_at: Date;
  /** created_at in microseconds, for the page cursor. */
  created_us: string;
}

const VERSION_COLUMNS = `version, policy IS NOT NULL AS present, changed_by_kind, changed_by_id, created_at, ${CREATED_US_SQL} AS created_us`;

/** A workspace's versions, newest first, older than `before` (the last one of the previous page); without their text. */
export async function listVersions(db: Queryable, workspaceId: string, before: string | undefined, limit: number): Promise<VersionRow[]> {
  const { rows } = await db.query<VersionRow>(
    `SELECT NULL::text AS policy, ${VERSION_COLUMNS} FROM policy_versions
      WHERE workspace_id = $1 AND ($2::bigint IS NULL OR version < $2::bigint)
      ORDER BY version DESC LIMIT $3`,
    [workspaceId, before ?? null, limit],
  );
  return rows;
}

export async function findVersion(db: Queryable, workspaceId: string, version: string): Promise<VersionRow | undefined> {
  const { rows } = await db.query<VersionRow>(`SELECT policy, ${VERSION_COLUMNS} FROM policy_versions WHERE workspace_id = $1 AND version = $2`, [workspaceId, version]);
  return rows[0];
}

export interface AuthorizationRecord {
  id: string;
  workspaceId: string;
  keyId: string;
  request: Record<string, unknown>;
  verdict: 'allow' | 'deny' | 'requires_human';
  policyId: string | null;
  reason: string;
  policyVersion: string;
}

export async function recordAuthorization(db: Queryable, record: AuthorizationRecord): Promise<void> {
  await db.query(
    `INSERT INTO authorizations (id, workspace_id, key_id, request, verdict, policy_id, reason, policy_version)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [record.id, record.workspaceId, record.keyId, JSON.stringify(record.request), record.verdict, record.policyId, record.reason, record.policyVersion],
  );
}
