// What every script reads from its environment: the Herald under load (HERALD_URL), the form
// (HERALD_SMOKE=1: seconds and small rates; otherwise the full load), the provisioning file
// (HERALD_PROVISION, an absolute path, read in the init context) and where summaries go.
import type { Provision } from './provision-file.ts';

export const BASE_URL = (__ENV.HERALD_URL || 'http://127.0.0.1:8080').replace(/\/+$/, '');
export const SERVER_API = `${BASE_URL}/api/v1/server`;
export const SMOKE = __ENV.HERALD_SMOKE === '1';
export const FORM = SMOKE ? 'smoke' : 'full';
/** Where handleSummary writes (k6: relative to the working directory). */
export const SUMMARY_DIR = (__ENV.HERALD_SUMMARY_DIR || 'loadtest/results').replace(/\/+$/, '');

function readProvision(): Provision {
  const path = __ENV.HERALD_PROVISION;
  if (!path || !path.startsWith('/')) throw new Error('HERALD_PROVISION must be the absolute path of the file `npm run load -- provision` wrote');
  const provision = JSON.parse(open(path)) as Provision;
  if (provision.version !== 1) throw new Error(`${path}: provisioning file version ${String(provision.version)}, this script reads version 1`);
  return provision;
}

export const PROVISION = readProvision();
export const SITE_ORIGIN = PROVISION.siteOrigin;

/** The smoke form's latency bound: a hang or a time-out, not a slow machine shared with a test suite. */
const SMOKE_BUDGET_MS = 10_000;

/** A p(95) threshold: the full form's bound, or in the smoke form one that only a hang crosses. */
export function budget(fullMs: number): string {
  return `p(95)<${SMOKE ? Math.max(fullMs, SMOKE_BUDGET_MS) : fullMs}`;
}

/**
 * The dropped_iterations threshold: none in the full form (the target kept up with the rate); in
 * the smoke form, which shares 2 busy cores with the test suite, at most a quarter of its
 * `arrivals`, so that only a hang crosses it.
 */
export function dropBudget(arrivals: number): string {
  return SMOKE ? `count<=${Math.floor(arrivals / 4)}` : 'count==0';
}

/** The smoke form's VU ceiling: its small rates with responses of a second or more on a busy machine. */
const SMOKE_MAX_VUS = 30;

/** maxVUs of an arrival-rate executor: the full form's, or the smoke form's ceiling. */
export function maxVus(full: number): number {
  return SMOKE ? Math.min(full, SMOKE_MAX_VUS) : full;
}

/** The one of `items` for index `index`, round-robin (keys stay under their plan's limit). */
export function pick<T>(items: readonly T[], index: number): T {
  const item = items[index % items.length];
  if (item === undefined) throw new Error('pick from an empty list');
  return item;
}

export const bearer = (key: string): Record<string, string> => ({ Authorization: `Bearer ${key}` });
export const jsonHeaders = (key?: string): Record<string, string> => ({ 'Content-Type': 'application/json', ...(key === undefined ? {} : bearer(key)) });
