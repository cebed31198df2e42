import { fileURLToPath } from 'node:url';

import type { Queryable } from '@herald/db';

/** Every SQL statement of the audience service. Each query is scoped by workspace id. */

export const SCHEMA = 'audience';
export const migrationsDir = fileURLToPath(new URL('../../migrations', import.meta.url));

export async function countActive(db: Queryable, workspaceId: string, externalId: string): Promise<{ site: number; externalId: number }> {
  const { rows } = await db.query<{ site: string; external: string }>(
    `SELECT count(*) AS site, count(*) FILTER (WHERE external_id = $2) AS external
       FROM subscribers WHERE workspace_id = $1 AND status = 'active'`,
    [workspaceId, externalId],
  );
  return { site: Number(rows[0]?.site ?? 0), externalId: Number(rows[0]?.external ?? 0) };
}
