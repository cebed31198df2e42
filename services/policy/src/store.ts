import { fileURLToPath } from 'node:url';

import type { Queryable } from '@herald/db';

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

/** Replaces (or with null removes) the policy and bumps its version, in one statement. */
export async function writePolicy(db: Queryable, workspaceId: string, policy: string | null): Promise<PolicyRow> {
  const { rows } = await db.query<PolicyRow>(
    `INSERT INTO policies (workspace_id, policy, version, updated_at) VALUES ($1, $2, 1, now())
     ON CONFLICT (workspace_id) DO UPDATE SET policy = EXCLUDED.policy, version = policies.version + 1, updated_at = now()
     RETURNING workspace_id, policy, version, updated_at`,
    [workspaceId, policy],
  );
  return rows[0] as PolicyRow;
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
