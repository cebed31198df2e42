// Campaign create -> send -> stats: marketers start campaigns at a steady rate to an audience the
// setup subscribed; each campaign is created as a draft, sent (sending, targeting the whole
// audience), then its stats are read until every push is counted as sent. The time from send to
// fully sent is a custom Trend.
import { check, sleep } from 'k6';
import exec from 'k6/execution';
import http from 'k6/http';
import { Trend } from 'k6/metrics';
import type { Options } from 'k6/options';

import { runStamp, subscribeAudience } from './lib/audience.ts';
import { bearer, budget, dropBudget, jsonHeaders, maxVus, PROVISION, SERVER_API, SITE_ORIGIN, SMOKE } from './lib/config.ts';
import { body } from './lib/http.ts';
import { summaryFiles } from './lib/summary.ts';

const { apiKey, siteKey } = PROVISION.campaign;
const FORM = SMOKE ? { audience: 10, rate: 1, seconds: 4 } : { audience: 200, rate: 2, seconds: 120 };
/** How often and how long an iteration reads the stats while the fan-out runs. */
const STATS_EVERY_S = 0.25;
const STATS_FOR_MS = 20_000;

const fanOut = new Trend('campaign_fully_sent', true);

export const options: Options = {
  scenarios: {
    marketers: { executor: 'constant-arrival-rate', rate: FORM.rate, timeUnit: '1s', duration: `${FORM.seconds}s`, preAllocatedVUs: 5, maxVUs: maxVus(50) },
  },
  thresholds: {
    checks: ['rate==1'],
    http_req_failed: ['rate==0'],
    'http_req_duration{name:campaign_create}': [budget(500)],
    'http_req_duration{name:campaign_send}': [budget(1000)],
    'http_req_duration{name:campaign_stats}': [budget(300)],
    campaign_fully_sent: [budget(5000)],
    dropped_iterations: [dropBudget(FORM.rate * FORM.seconds)],
  },
};

interface CampaignRecord {
  id?: string;
  status?: string;
  totalTargeted?: number;
}

export function setup(): { audience: number } {
  subscribeAudience(siteKey, runStamp(), FORM.audience);
  return { audience: FORM.audience };
}

export default function campaign(data: { audience: number }): void {
  const created = http.post(
    `${SERVER_API}/campaigns`,
    JSON.stringify({ name: `Load ${exec.vu.idInTest}-${exec.vu.iterationInScenario}`, title: 'Load campaign', body: 'From the campaign journey', actionUrl: `${SITE_ORIGIN}/offer` }),
    { headers: jsonHeaders(apiKey), tags: { name: 'campaign_create' }, responseCallback: http.expectedStatuses(201) },
  );
  const draft = body<CampaignRecord>(created);
  if (!check(created, { 'create is 201 draft': (r) => r.status === 201 && draft?.status === 'draft' && /^cmp_[a-z2-7]{24}$/.test(draft.id ?? '') })) return;
  const id = draft?.id ?? '';

  const sent = http.post(`${SERVER_API}/campaigns/${id}/send`, null, { headers: bearer(apiKey), tags: { name: 'campaign_send' }, responseCallback: http.expectedStatuses(200) });
  const startedAt = Date.now();
  const sending = body<CampaignRecord>(sent);
  const ok = check(sent, {
    'send is 200 sending': (r) => r.status === 200 && sending?.status === 'sending',
    'the whole audience is targeted': () => sending?.totalTargeted === data.audience,
  });
  if (!ok) return;

  // Stats until every targeted push is counted as sent (bounded; the fan-out is asynchronous).
  let totalSent = -1;
  while (Date.now() - startedAt < STATS_FOR_MS) {
    const stats = http.get(`${SERVER_API}/campaigns/${id}/stats`, { headers: bearer(apiKey), tags: { name: 'campaign_stats' }, responseCallback: http.expectedStatuses(200) });
    totalSent = body<{ totalSent?: number }>(stats)?.totalSent ?? -1;
    if (!check(stats, { 'stats is 200': (r) => r.status === 200 && totalSent >= 0 && totalSent <= data.audience })) return;
    if (totalSent === data.audience) break;
    sleep(STATS_EVERY_S);
  }
  if (check(totalSent, { 'every targeted push is sent': (count) => count === data.audience })) fanOut.add(Date.now() - startedAt);
}

export function teardown(): void {
  // The newest campaigns are the run's: none was left a draft between create and send.
  const list = http.get(`${SERVER_API}/campaigns?limit=100`, { headers: bearer(apiKey), tags: { name: 'campaign_list' } });
  const page = body<{ data?: CampaignRecord[] }>(list);
  check(list, { 'no campaign of the run is left a draft': (r) => r.status === 200 && (page?.data?.length ?? 0) > 0 && (page?.data ?? []).every((record) => record.status !== 'draft') });
}

export const handleSummary = summaryFiles('campaign');
