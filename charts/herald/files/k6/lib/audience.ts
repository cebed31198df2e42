// Subscribers for the journeys: push subscriptions whose endpoints reach the provisioned push peer
// (or nowhere, 127.0.0.1:9), unique per run and index, and a setup-time audience.
import http from 'k6/http';

import { bearer, BASE_URL, PROVISION, SITE_ORIGIN } from './config.ts';

export interface Subscription {
  readonly endpoint: string;
  readonly keys: { readonly p256dh: string; readonly auth: string };
}

/** A number unique to this run (setup() takes it once and hands it to every VU). */
export const runStamp = (): number => Date.now() % 1_000_000_000;

/** Subscription `index` of the run `stamp`: a distinct endpoint, keys from the pool. */
export function subscription(stamp: number, index: number): Subscription {
  const { origin, keys } = PROVISION.push;
  const n = stamp + index;
  const pair = keys[n % keys.length];
  if (!pair) throw new Error('the provisioning file has no push keys');
  return { endpoint: origin === null ? `https://127.0.0.1:9/push/${n}` : `${origin}/push/${n}`, keys: pair };
}

/** POST /api/v1/subscribe as a browser of the load site; the response (the caller checks it). */
export function subscribe(siteKey: string, stamp: number, index: number, tags: Record<string, string> = {}): ReturnType<typeof http.post> {
  const { endpoint, keys } = subscription(stamp, index);
  return http.post(`${BASE_URL}/api/v1/subscribe`, JSON.stringify({ endpoint, keys, externalId: `load-user-${stamp}-${index}`, tags: ['load'] }), {
    headers: { ...bearer(siteKey), Origin: SITE_ORIGIN, 'Content-Type': 'application/json' },
    tags: { name: 'subscribe', ...tags },
  });
}

/** `count` subscribers in setup(); their ids. Throws (failing the run) when one is refused. */
export function subscribeAudience(siteKey: string, stamp: number, count: number): string[] {
  const ids: string[] = [];
  for (let index = 0; index < count; index += 1) {
    const response = subscribe(siteKey, stamp, index, { phase: 'setup' });
    const id = response.status === 201 && typeof response.body === 'string' ? (JSON.parse(response.body) as { subscriberId?: string }).subscriberId : undefined;
    if (!id) throw new Error(`setup: subscribe answered ${response.status}: ${String(response.body).slice(0, 200)}`);
    ids.push(id);
  }
  return ids;
}
