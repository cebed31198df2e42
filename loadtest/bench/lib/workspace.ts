// The benchmark workspace's keys and rows: dashboard keys in bulk through the admin CLI's own
// commands, how many keys keep a closed-loop run under the plan's rate limit, and deleting what a
// run left in the services' tables.
import { openAdmin, type Admin } from '@herald/account/admin';
import { requiredEnv, type connectDatabase } from '@herald/testkit';

import { atCleanup, log } from './bench.js';

/** The enterprise plan's limit (requests per key per sliding minute), and how close to it a key may get in a run. */
export const PLAN_LIMIT = 1_000;
export const KEY_BUDGET = 850;

/**
 * One CLI process per key costs ~0.3 s of CPU (module loading, migrations check), too slow for
 * hundreds of keys on 2 cores, so keys come from the CLI's own commands run as a library
 * (openAdmin from @herald/account/admin) with one pool: same arguments, same code path, same output.
 */
let bulkAdmin: Promise<Admin> | undefined;
const adminLibrary = (): Promise<Admin> => {
  if (!bulkAdmin) {
    const opened = openAdmin(requiredEnv('DATABASE_URL'), 4);
    atCleanup(() => opened.then((library) => library.close()));
    bulkAdmin = opened;
  }
  return bulkAdmin;
};

/** Issues `count` dashboard keys in `workspaceId`. */
export async function createKeys(workspaceId: string, count: number): Promise<string[]> {
  const started = performance.now();
  const library = await adminLibrary();
  const create = async (index: number): Promise<string> => {
    const args = ['key', 'create', '--workspace', workspaceId, '--origin', 'dashboard', '--name', `bench-${index}`];
    const { apiKey } = await library.run(args);
    if (typeof apiKey !== 'string') throw new Error(`key create returned no apiKey`);
    return apiKey;
  };
  const keys: string[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      next += 1;
      keys.push(await create(next));
    }
  };
  await Promise.all(Array.from({ length: Math.min(4, count) }, worker));
  log(`created ${count} keys in ${((performance.now() - started) / 1_000).toFixed(1)} s`);
  return keys;
}

export interface KeyProjection {
  /** Request rate seen in the warm-up. */
  rps: number;
  /** The most requests one key has already made (they stay in its sliding minute). */
  usedPerKey: number;
  keyCount: number;
  /** Length of the coming run, re-warm included. */
  runMs: number;
  connections: number;
}

/** Keys needed so that no key passes KEY_BUDGET in the coming run, given the warm-up. */
export function keysNeeded({ rps, usedPerKey, keyCount, runMs, connections }: KeyProjection): number {
  // Assume the measured run may go 50% faster than the warm-up (JIT, caches).
  const projected = rps * 1.5 * (runMs / 1_000) + connections;
  const room = KEY_BUDGET - usedPerKey;
  if (room <= 0) throw new Error(`the warm-up already used ${usedPerKey} requests on one key; raise BENCH_KEYS`);
  return Math.max(keyCount, Math.ceil(projected / room));
}

export type Db = Awaited<ReturnType<typeof connectDatabase>>;

/** Deletes what the benchmark workspace left in the services' tables; returns rows deleted per table. */
export async function deleteWorkspaceRows(db: Db, workspaceId: string, tables: readonly string[]): Promise<Record<string, number>> {
  const deleted: Record<string, number> = {};
  for (const table of tables) {
    const result = await db.query(`DELETE FROM ${table} WHERE workspace_id = $1`, [workspaceId]);
    deleted[table] = result.rowCount ?? 0;
  }
  for (const table of tables) await db.query(`VACUUM ${table}`);
  return deleted;
}
