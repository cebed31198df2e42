import { assertSchemaName, CURRENT_NAMESPACE_SQL, type Queryable } from '@herald/db';

/**
 * Leased claims of due rows. A table worked by the loop has, besides its own columns:
 *
 *   claim        uuid          the current claim's token (NULL: unclaimed)
 *   leased_until timestamptz   until when that claim holds (NULL: unclaimed)
 *   namespace    text          HERALD_NAMESPACE of the writer (only that namespace's workers take it)
 *
 * A claim is one statement: it picks due, unleased rows with FOR UPDATE SKIP LOCKED (so replicas
 * never take the same row and never wait on each other) and leases them; the row lock ends with
 * that statement, so no lock is ever held while the work does I/O. A worker that dies leaves its
 * rows to be claimed again once the lease runs out (the visibility timeout). The work records its
 * outcome with `WHERE claim = <token>`, so a late worker whose lease ran out changes nothing.
 */
export interface WorkTable {
  /** The table, schema-qualified ("delivery.retries"). */
  table: string;
  /** The columns naming a row. */
  key: readonly string[];
  /** The column holding when a row is due. */
  due: string;
  /** What else makes a row waiting for work (e.g. "status = 'pending'"); "true" when nothing. */
  waiting: string;
  /** The columns a claim returns. */
  returning: string;
  /** More assignments a claim makes (e.g. "attempts = attempts + 1"). */
  onClaim?: string;
}

/** The SET of a finished row's last statement: it is no longer claimed. */
export const RELEASED = 'claim = NULL, leased_until = NULL';

/**
 * What a claim also returns of each row for the loop's metrics, removed by the loop before `work`:
 * seconds since it was due, whether an earlier claim of it had lapsed (its lease ran out before its
 * worker recorded an outcome: the worker died or was too slow), and the row's key as the claim
 * picked it (`herald_key_<n>`).
 */
export const LATENESS_COLUMN = 'herald_lateness_s';
export const LAPSED_COLUMN = 'herald_lapsed';
export const pickedKeyColumn = (index: number): string => `herald_key_${index}`;

const NAME = /^[a-z_][a-z0-9_]*$/;

function checkTable({ table, key, due }: WorkTable): void {
  const [schema, name] = table.split('.');
  if (schema === undefined || name === undefined) throw new Error(`${table}: a work table is schema-qualified`);
  assertSchemaName(schema);
  for (const column of [name, due, ...key]) if (!NAME.test(column)) throw new Error(`${table}: "${column}" is not a plain column name`);
}

/** The claim statement of `work`; parameters: $1 token, $2 lease (ms), $3 how many at most. */
export function claimStatement(work: WorkTable): string {
  checkTable(work);
  // The picked rows' keys under names of their own, so no column of the table is ambiguous.
  const picked = work.key.map((column, index) => `${column} AS ${pickedKeyColumn(index)}`).join(', ');
  const match = work.key.map((column, index) => `${work.table}.${column} = picked.${pickedKeyColumn(index)}`).join(' AND ');
  return `WITH picked AS (SELECT ${picked}, leased_until IS NOT NULL AS ${LAPSED_COLUMN} FROM ${work.table}
                       WHERE ${work.waiting} AND namespace = ${CURRENT_NAMESPACE_SQL} AND ${work.due} <= clock_timestamp()
                         AND (leased_until IS NULL OR leased_until <= clock_timestamp())
                       ORDER BY ${work.due} LIMIT $3 FOR UPDATE SKIP LOCKED)
  UPDATE ${work.table} SET claim = $1, leased_until = clock_timestamp() + $2 * interval '1 millisecond'${work.onClaim ? `, ${work.onClaim}` : ''}
    FROM picked WHERE ${match}
  RETURNING ${work.returning}, extract(epoch FROM clock_timestamp() - ${work.due}) AS ${LATENESS_COLUMN}, picked.${LAPSED_COLUMN}`;
}

/** How many rows of `work` are due and claimable now (none claims them yet): a loop's backlog. */
export function dueCountStatement(work: WorkTable): string {
  checkTable(work);
  return `SELECT count(*)::int AS due FROM ${work.table}
   WHERE ${work.waiting} AND namespace = ${CURRENT_NAMESPACE_SQL} AND ${work.due} <= clock_timestamp()
     AND (leased_until IS NULL OR leased_until <= clock_timestamp())`;
}

/**
 * Milliseconds until the earliest waiting row can be claimed (its due time, or its lease's end),
 * or undefined when none waits. One index probe: rows behind a leased one are found by the next
 * poll or wake-up at the latest.
 */
export async function nextClaimableInMs(db: Queryable, work: WorkTable): Promise<number | undefined> {
  checkTable(work);
  const { rows } = await db.query<{ due_in: number }>(
    `SELECT extract(epoch FROM greatest(${work.due}, coalesce(leased_until, ${work.due})) - clock_timestamp()) * 1000 AS due_in
       FROM ${work.table} WHERE ${work.waiting} AND namespace = ${CURRENT_NAMESPACE_SQL} ORDER BY ${work.due} LIMIT 1`,
  );
  const first = rows[0];
  return first === undefined ? undefined : Math.max(0, Number(first.due_in));
}
