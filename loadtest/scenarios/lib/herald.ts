// What the journeys share: workspaces and keys bootstrapped through the admin CLI (the same
// command `npm run admin` runs; it needs the DATABASE_URL of the Herald under load), bearer
// headers, the rate-limit header checks, push subscriptions that can only reach this machine,
// thresholds every scenario holds, and handleSummary (a JSON file and a text file per run).
import { readFile } from 'node:fs/promises';
import { get as httpsGet } from 'node:https';

import { subscriptionFromPool, type KeyPoolEntry } from '@herald/push-peer';
import { admin, pushSubscription, SERVER_API, type TestPushSubscription, type TestWorkspace } from '@herald/testkit';

import type { HttpResponse } from '../../runner/http.js';
import type { Form, RunEnv } from '../../runner/scenario.js';
import { textSummary, type Summary } from '../../runner/summary.js';
import type { Thresholds } from '../../runner/thresholds.js';

export { SERVER_API };

/** The domain every load workspace registers; subscribe requests come from this origin. */
export const SITE_DOMAIN = 'load.example.test';
export const SITE_ORIGIN = `https://${SITE_DOMAIN}`;

/** The workspaces this run created, retired by `retireWorkspaces` at the end. */
const created: string[] = [];

/** A workspace through `admin workspace create` (its dashboard key, site and site key). */
export async function bootstrapWorkspace(journey: string, plan: string): Promise<TestWorkspace> {
  const workspace = await admin<TestWorkspace>('workspace', 'create', '--name', `Load ${journey} ${process.pid}-${created.length + 1}`, '--plan', plan, '--domain', SITE_DOMAIN);
  created.push(workspace.workspaceId);
  return workspace;
}

/**
 * Every journey's teardown: its workspaces move to plan `none` (`admin workspace set-plan`), so
 * keys a run leaves behind in a real Herald (helm test) can no longer use the API or send.
 */
export async function retireWorkspaces(): Promise<void> {
  for (const workspaceId of created.splice(0)) await admin('workspace', 'set-plan', '--workspace', workspaceId, '--plan', 'none');
}

/** `count` more keys of the workspace through `admin key create` (each key has its own rate-limit bucket). */
export async function bootstrapKeys(workspaceId: string, count: number, origin = 'dashboard'): Promise<string[]> {
  const keys: string[] = [];
  for (let index = 0; index < count; index += 1) {
    const { apiKey } = await admin<{ apiKey: string }>('key', 'create', '--workspace', workspaceId, '--origin', origin, '--name', `load-${index}`);
    keys.push(apiKey);
  }
  return keys;
}

export const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });

/** Round-robin over keys by iteration, so each key stays under its plan's limit. */
export function pick<T>(items: readonly T[], index: number): T {
  const item = items[index % items.length];
  if (item === undefined) throw new Error('pick from an empty list');
  return item;
}

export function jsonBody<T>(response: HttpResponse): T {
  const body = response.json<T>();
  if (body === undefined) throw new Error(`${response.status} with a body that is not JSON: ${response.body.slice(0, 200)}`);
  return body;
}

const integerHeader = (response: HttpResponse, name: string): number => {
  const value = response.headers.get(name);
  return value !== null && /^\d+$/.test(value) ? Number(value) : Number.NaN;
};

/**
 * The checks of the spec's rate-limit headers on an admitted (200) or refused (429) response:
 * X-RateLimit-Limit exactly the plan's limit, Remaining an integer below it (0 on a 429),
 * Reset a Unix time within the window, and on a 429 Retry-After in whole seconds within the window
 * and the rate_limited error body naming the same limit and wait.
 */
export function rateLimitChecks(limit: number, windowSeconds = 60): Record<string, (response: HttpResponse) => boolean> {
  const now = () => Date.now() / 1_000;
  return {
    'X-RateLimit-Limit is the plan limit': (response) => response.headers.get('x-ratelimit-limit') === String(limit),
    'X-RateLimit-Remaining is below the limit': (response) => {
      const remaining = integerHeader(response, 'x-ratelimit-remaining');
      return remaining >= 0 && remaining < limit && (response.status !== 429 || remaining === 0);
    },
    'X-RateLimit-Reset is within the window': (response) => {
      const reset = integerHeader(response, 'x-ratelimit-reset');
      return reset >= now() - 1 && reset <= now() + windowSeconds + 1;
    },
    'a 429 has Retry-After within the window': (response) => {
      if (response.status !== 429) return response.headers.get('retry-after') === null;
      const retryAfter = integerHeader(response, 'retry-after');
      return retryAfter >= 1 && retryAfter <= windowSeconds;
    },
    'a 429 has the rate_limited body': (response) => {
      if (response.status !== 429) return true;
      const body = response.json<{ code?: string; status?: number; limit?: number; retryAfter?: number }>();
      return body?.code === 'rate_limited' && body.status === 429 && body.limit === limit && body.retryAfter === integerHeader(response, 'retry-after');
    },
  };
}

/** GET over HTTPS trusting the push peer's own CA (PUSH_PEER_CA_FILE), which fetch cannot be given. */
async function peerJson<T>(url: string, caFile: string | undefined): Promise<T> {
  const ca = caFile === undefined ? undefined : await readFile(caFile, 'utf8');
  return new Promise((resolve, reject) => {
    const request = httpsGet(url, { ca, timeout: 10_000 }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => {
        if (response.statusCode !== 200) reject(new Error(`${url} answered ${response.statusCode}: ${text.slice(0, 200)}`));
        else resolve(JSON.parse(text) as T);
      });
    });
    request.on('timeout', () => request.destroy(new Error(`${url}: no answer in 10 s`)));
    request.on('error', reject);
  });
}

/**
 * Push subscriptions for subscribers the load creates. With PUSH_PEER_URL (a local push peer with a
 * key pool, as `--stack` starts; its CA in PUSH_PEER_CA_FILE) they are the peer's pool endpoints,
 * so deliveries succeed; without it they point at 127.0.0.1:9 (nothing listens), so no push ever
 * leaves this machine.
 */
export async function subscriptionSource(env: RunEnv): Promise<(index: number) => TestPushSubscription> {
  const peer = env.env.PUSH_PEER_URL;
  if (!peer) return () => pushSubscription('https://127.0.0.1:9/push');
  const host = new URL(peer).hostname;
  if (host !== '127.0.0.1' && host !== 'localhost') throw new Error(`PUSH_PEER_URL ${peer} is not on this machine`);
  const { keys } = await peerJson<{ keys: Pick<KeyPoolEntry, 'p256dh' | 'auth'>[] }>(`${peer}/__peer/key-pool`, env.env.PUSH_PEER_CA_FILE);
  // Distinct endpoints per run: a second run against the same Herald registers new subscribers.
  const offset = Date.now() % 1_000_000_000;
  return (index) => {
    const { endpoint, keys: subscriptionKeys } = subscriptionFromPool(peer, keys, offset + index);
    return { endpoint, keys: subscriptionKeys };
  };
}

/** The smoke form's latency bound: a hang or a time-out, not a slow machine. */
const SMOKE_BUDGET_MS = 10_000;

/**
 * A latency budget for a p(95) threshold: the full form holds the real one; the smoke form, which
 * the test suite runs next to other test files on a 2-core machine (p95 of several seconds seen
 * there while the CPUs were saturated), holds one that only a hang or a time-out crosses.
 */
export function budget(form: Form, fullMs: number): string {
  return `p(95)<${form === 'smoke' ? Math.max(fullMs, SMOKE_BUDGET_MS) : fullMs}`;
}

/** The smoke form's VU ceiling: enough for its small rates even when each request takes seconds. */
const SMOKE_MAX_VUS = 500;

/**
 * maxVUs for an arrival-rate executor: the full form's, which drops iterations (and crosses
 * dropped_iterations) once the target cannot keep up; the smoke form's only when it hangs.
 */
export function maxVus(form: Form, full: number): number {
  return form === 'smoke' ? SMOKE_MAX_VUS : full;
}

/** What every journey holds in both forms: no iteration threw, every check passed. */
export const ALWAYS: Thresholds = {
  iteration_errors: ['count==0'],
  checks: ['rate==1'],
};

/** k6's handleSummary, as the scenarios export it: <journey>-<form>-<time>.json and .txt in the summary folder, the text on stdout too. */
export function handleSummary(summary: Summary): Record<string, string> {
  const stamp = summary.startedAt.replace(/[:.]/g, '-');
  const base = `${summary.scenario}-${summary.form}-${stamp}`;
  const text = textSummary(summary);
  return { [`${base}.json`]: `${JSON.stringify(summary, null, 2)}\n`, [`${base}.txt`]: text, stdout: text };
}
