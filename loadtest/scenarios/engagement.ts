// Engagement events ingestion: service workers report impressions, clicks and (as browsers retry)
// the same reports again, for one campaign sent to the setup's audience, at a steady rate; one
// report in ten carries a forged token and must be refused. At the end the campaign's stats must
// count each accepted (subscriber, kind) exactly once, however often it was reported.
//
// Tokens are what the delivery fleet puts in each push payload, signed with the deployment's
// ENGAGEMENT_TOKEN_SECRET; the journey signs them itself with that secret (--stack passes its
// stack's), for the campaign and subscribers the setup made.
import { setTimeout as sleep } from 'node:timers/promises';

import { EngagementTokens } from '@herald/domain';

import { check } from '../runner/http.js';
import { Trend } from '../runner/metrics.js';
import { defineScenario, type Form, type Iteration, type RunEnv } from '../runner/scenario.js';
import { ALWAYS, maxVus, bearer, bootstrapWorkspace, budget, handleSummary, retireWorkspaces, SERVER_API, SITE_ORIGIN, subscriptionSource } from './lib/herald.js';

/** From the last report to the stats counting every accepted one. */
const counted = new Trend('engagement_counted', true);

const KINDS = ['impression', 'click', 'impression'] as const;
const FORGED_EVERY = 10;
/** How long teardown waits for the campaign service to count what was accepted. */
const COUNTED_WITHIN_MS = 30_000;
const SETTLE_MS = 1_000;

interface Data {
  apiKey: string;
  campaignId: string;
  tokens: string[];
}

const FORMS = {
  smoke: { audience: 10, rate: 10, duration: '3s' },
  // Reports are limited per client IP (ENGAGEMENT_IP_RATE_LIMIT_PER_MINUTE, 600 by default).
  full: { audience: 300, rate: 8, duration: '2m' },
} as const;

/** Reports started, and the (subscriber, kind) pairs answered 202. */
let reports = 0;
const accepted = { impression: new Set<number>(), click: new Set<number>() };

async function statsOf(env: RunEnv, data: Data): Promise<{ totalSent: number; totalDelivered: number; totalClicked: number }> {
  const response = await fetch(`${env.baseUrl}${SERVER_API}/campaigns/${data.campaignId}/stats`, { headers: bearer(data.apiKey) });
  if (response.status !== 200) throw new Error(`stats answered ${response.status}: ${await response.text()}`);
  return (await response.json()) as { totalSent: number; totalDelivered: number; totalClicked: number };
}

export default defineScenario<Data>({
  name: 'engagement',
  description: 'POST /api/v1/events (impressions, clicks, repeats, forged tokens); stats count each once',
  options(form: Form) {
    const { rate, duration } = FORMS[form];
    return {
      scenarios: {
        workers: { executor: 'constant-arrival-rate', rate, timeUnit: '1s', duration, preAllocatedVUs: 5, maxVUs: maxVus(form, 50), exec: reportEvent },
      },
      thresholds: {
        ...ALWAYS,
        // Forged tokens expect their 400.
        http_req_failed: ['rate==0'],
        'http_req_duration{name:events}': [budget(form, 300)],
        'http_req_duration{name:events,kind:forged}': [budget(form, 300)],
        engagement_counted: [budget(form, 5_000)],
        dropped_iterations: ['count==0'],
      },
    };
  },
  async setup(env) {
    const secret = env.env.ENGAGEMENT_TOKEN_SECRET;
    if (!secret) throw new Error("ENGAGEMENT_TOKEN_SECRET is not set: the engagement journey signs report tokens with the deployment's secret (--stack sets its own)");
    const signer = new EngagementTokens(secret);
    const { workspaceId, siteId, apiKey, siteKey } = await bootstrapWorkspace('engagement', 'enterprise');
    const subscription = await subscriptionSource(env);
    const subscribers: string[] = [];
    for (let index = 0; index < FORMS[env.form].audience; index += 1) {
      const { endpoint, keys } = subscription(index);
      const response = await fetch(`${env.baseUrl}/api/v1/subscribe`, {
        method: 'POST',
        headers: { ...bearer(siteKey), origin: SITE_ORIGIN, 'content-type': 'application/json' },
        body: JSON.stringify({ endpoint, keys, externalId: `load-user-${index}` }),
      });
      const body = (await response.json()) as { subscriberId?: string };
      if (response.status !== 201 || !body.subscriberId) throw new Error(`setup: subscribe answered ${response.status}: ${JSON.stringify(body)}`);
      subscribers.push(body.subscriberId);
    }
    const post = async (path: string, body?: unknown): Promise<{ id?: string; status?: string }> => {
      const response = await fetch(`${env.baseUrl}${SERVER_API}${path}`, {
        method: 'POST',
        headers: { ...bearer(apiKey), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (response.status >= 300) throw new Error(`setup: POST ${path} answered ${response.status}: ${await response.text()}`);
      return (await response.json()) as { id?: string; status?: string };
    };
    const campaign = await post('/campaigns', { name: 'Load engagement', title: 'Load', body: 'Engagement journey' });
    const campaignId = campaign.id ?? '';
    await post(`/campaigns/${campaignId}/send`);
    const tokens = subscribers.map((subscriberId) => signer.sign({ workspaceId, siteId, notificationId: campaignId, subscriberId }));
    return { apiKey, campaignId, tokens };
  },
  async teardown(data, env) {
    // The campaign service counts from Kafka: wait (bounded) until it has counted what was accepted.
    const expected = { totalDelivered: accepted.impression.size, totalClicked: accepted.click.size };
    const started = performance.now();
    let stats = await statsOf(env, data);
    while ((stats.totalDelivered < expected.totalDelivered || stats.totalClicked < expected.totalClicked) && performance.now() - started < COUNTED_WITHIN_MS) {
      await sleep(200);
      stats = await statsOf(env, data);
    }
    const countedAfter = performance.now() - started;
    // Still the same a moment later: a repeated report counted late would show here.
    await sleep(SETTLE_MS);
    stats = await statsOf(env, data);
    if (check(stats, { 'each accepted (subscriber, kind) counted exactly once': (s) => s.totalDelivered === expected.totalDelivered && s.totalClicked === expected.totalClicked })) {
      counted.add(countedAfter);
    } else {
      process.stderr.write(`[engagement] counted ${JSON.stringify(stats)}, accepted ${JSON.stringify(expected)}\n`);
    }
    await retireWorkspaces();
  },
  handleSummary,
});

async function reportEvent({ http, data }: Iteration<Data>): Promise<void> {
  const index = reports++;
  const forged = index % FORGED_EVERY === FORGED_EVERY - 1;
  const triple = Math.floor(index / KINDS.length);
  const subscriber = triple % data.tokens.length;
  const kind = KINDS[index % KINDS.length] ?? 'impression';
  const token = data.tokens[subscriber] ?? '';
  // A forged token: the same body under another MAC.
  const sent = forged ? `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}` : token;
  const response = await http.post('/api/v1/events', {
    name: 'events',
    tags: { kind: forged ? 'forged' : kind },
    headers: { origin: SITE_ORIGIN },
    body: { type: kind, token: sent },
    expected: [forged ? 400 : 202],
  });
  const body = response.json<{ success?: boolean; code?: string; message?: string }>();
  if (forged) {
    check(response, { 'a forged token is a 400 that does not say why': (r) => r.status === 400 && body?.code === 'invalid_request' && body.message === 'The event token is not valid.' });
    return;
  }
  if (check(response, { 'a report is 202 accepted': (r) => r.status === 202 && body?.success === true && r.headers.get('access-control-allow-origin') === SITE_ORIGIN })) {
    accepted[kind].add(subscriber);
  }
}
