// Campaign create -> send -> stats: marketers start campaigns at a steady rate to an audience the
// setup subscribed; each campaign is created as a draft, sent (sending, targeting the whole
// audience), then its stats are read until every push is counted as sent. The time from send to
// fully sent is a custom Trend.
import { setTimeout as sleep } from 'node:timers/promises';

import type { TestPushSubscription } from '@herald/testkit';

import { check } from '../runner/http.js';
import { Trend } from '../runner/metrics.js';
import { defineScenario, type Form, type Iteration } from '../runner/scenario.js';
import { ALWAYS, maxVus, bearer, bootstrapWorkspace, budget, handleSummary, SERVER_API, SITE_ORIGIN, subscriptionSource, retireWorkspaces } from './lib/herald.js';

const fanOut = new Trend('campaign_fully_sent', true);

/** How often and how long an iteration reads the stats while the fan-out runs. */
const STATS_EVERY_MS = 250;
const STATS_FOR_MS = 20_000;

interface Data {
  apiKey: string;
  audience: number;
}

const FORMS = {
  smoke: { audience: 10, rate: 1, duration: '4s' },
  full: { audience: 200, rate: 2, duration: '2m' },
} as const;

interface CampaignRecord {
  id?: string;
  status?: string;
  totalTargeted?: number;
}

export default defineScenario<Data>({
  name: 'campaign',
  description: 'POST /campaigns, POST /campaigns/{id}/send, GET /campaigns/{id}/stats until fully sent',
  options(form: Form) {
    const { rate, duration } = FORMS[form];
    return {
      scenarios: {
        marketers: { executor: 'constant-arrival-rate', rate, timeUnit: '1s', duration, preAllocatedVUs: 5, maxVUs: maxVus(form, 50), exec: campaign },
      },
      thresholds: {
        ...ALWAYS,
        http_req_failed: ['rate==0'],
        'http_req_duration{name:campaign_create}': [budget(form, 500)],
        'http_req_duration{name:campaign_send}': [budget(form, 1000)],
        'http_req_duration{name:campaign_stats}': [budget(form, 300)],
        campaign_fully_sent: [budget(form, 5000)],
        dropped_iterations: ['count==0'],
      },
    };
  },
  async setup(env) {
    const { apiKey, siteKey } = await bootstrapWorkspace('campaign', 'enterprise');
    const audience = FORMS[env.form].audience;
    const subscription: (index: number) => TestPushSubscription = await subscriptionSource(env);
    for (let index = 0; index < audience; index += 1) {
      const { endpoint, keys } = subscription(index);
      const response = await fetch(`${env.baseUrl}/api/v1/subscribe`, {
        method: 'POST',
        headers: { ...bearer(siteKey), origin: SITE_ORIGIN, 'content-type': 'application/json' },
        body: JSON.stringify({ endpoint, keys, externalId: `load-user-${index}` }),
      });
      if (response.status !== 201) throw new Error(`setup: subscribe answered ${response.status}: ${await response.text()}`);
    }
    return { apiKey, audience };
  },
  teardown: retireWorkspaces,
  handleSummary,
});

async function campaign({ http, data, vu, signal }: Iteration<Data>): Promise<void> {
  const headers = bearer(data.apiKey);
  const created = await http.post(`${SERVER_API}/campaigns`, {
    name: 'campaign_create',
    headers,
    body: { name: `Load ${vu.id}-${vu.iterations}`, title: 'Load campaign', body: 'From the campaign journey', actionUrl: `${SITE_ORIGIN}/offer` },
    expected: [201],
  });
  const draft = created.json<CampaignRecord>();
  if (!check(created, { 'create is 201 draft': (r) => r.status === 201 && draft?.status === 'draft' && /^cmp_[a-z2-7]{24}$/.test(draft.id ?? '') })) return;
  const id = draft?.id ?? '';

  const sent = await http.post(`${SERVER_API}/campaigns/${id}/send`, { name: 'campaign_send', headers, expected: [200] });
  const sending = sent.json<CampaignRecord>();
  const startedAt = performance.now();
  if (
    !check(sent, {
      'send is 200 sending': (r) => r.status === 200 && sending?.status === 'sending',
      'the whole audience is targeted': () => sending?.totalTargeted === data.audience,
    })
  ) {
    return;
  }

  // Stats until every targeted push is counted as sent (bounded; the fan-out is asynchronous).
  let totalSent = -1;
  while (performance.now() - startedAt < STATS_FOR_MS && !signal.aborted) {
    const stats = await http.get(`${SERVER_API}/campaigns/${id}/stats`, { name: 'campaign_stats', headers, expected: [200] });
    totalSent = stats.json<{ totalSent?: number }>()?.totalSent ?? -1;
    if (!check(stats, { 'stats is 200': (r) => r.status === 200 && totalSent >= 0 && totalSent <= data.audience })) return;
    if (totalSent === data.audience) break;
    await sleep(STATS_EVERY_MS, undefined, { signal }).catch(() => undefined);
  }
  if (check(totalSent, { 'every targeted push is sent': (count) => count === data.audience })) fanOut.add(performance.now() - startedAt);
}
