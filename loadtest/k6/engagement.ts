// Engagement events ingestion: service workers report impressions, clicks and (as browsers retry)
// the same reports again, for one campaign sent to the setup's audience, at a steady rate; one
// report in ten carries a forged token and must be refused. At the end (teardown) the campaign's
// stats must count each accepted (subscriber, kind) exactly once, however often it was reported.
//
// Tokens are what the delivery fleet puts in each push payload: base64url("<workspace> <site>
// <notification> <subscriber> <issued s>") "." the first 22 characters of base64url(HMAC-SHA256(
// ENGAGEMENT_TOKEN_SECRET, "herald.engagement." + body)) (packages/domain/src/engagement.ts). The
// script signs them with k6/crypto, with the deployment's secret (-e ENGAGEMENT_TOKEN_SECRET=...).
import { check, sleep } from 'k6';
import crypto from 'k6/crypto';
import encoding from 'k6/encoding';
import exec from 'k6/execution';
import http from 'k6/http';
import { Trend } from 'k6/metrics';
import type { Options } from 'k6/options';

import { runStamp, subscribeAudience } from './lib/audience.ts';
import { bearer, BASE_URL, budget, maxVus, PROVISION, SERVER_API, SITE_ORIGIN, SMOKE } from './lib/config.ts';
import { body } from './lib/http.ts';
import { summaryFiles } from './lib/summary.ts';

const { workspaceId, siteId, apiKey, siteKey } = PROVISION.engagement;
const SECRET = __ENV.ENGAGEMENT_TOKEN_SECRET ?? '';
// Reports are limited per client IP (ENGAGEMENT_IP_RATE_LIMIT_PER_MINUTE, 600 by default).
const FORM = SMOKE ? { audience: 10, rate: 10, seconds: 3 } : { audience: 300, rate: 8, seconds: 120 };
const KINDS = ['impression', 'click', 'impression'] as const;
const FORGED_EVERY = 10;
const MAC_CHARS = 22;
/** How long teardown waits for the campaign service to count what was accepted. */
const COUNTED_WITHIN_MS = 30_000;

/** From the end of the run to the stats counting every accepted report. */
const counted = new Trend('engagement_counted', true);

export const options: Options = {
  scenarios: {
    workers: { executor: 'constant-arrival-rate', rate: FORM.rate, timeUnit: '1s', duration: `${FORM.seconds}s`, preAllocatedVUs: 5, maxVUs: maxVus(50) },
  },
  thresholds: {
    checks: ['rate==1'],
    // Forged tokens expect their 400 (the response callback).
    http_req_failed: ['rate==0'],
    'http_req_duration{name:events}': [budget(300)],
    'http_req_duration{name:events,kind:forged}': [budget(300)],
    engagement_counted: [budget(5_000)],
    // Every form: teardown counts on every report having been made.
    dropped_iterations: ['count==0'],
  },
};

/** The engagement token the delivery fleet would put in the push to `subscriberId`. */
export function engagementToken(notificationId: string, subscriberId: string, issuedAtMs: number): string {
  const tokenBody = encoding.b64encode(`${workspaceId} ${siteId} ${notificationId} ${subscriberId} ${Math.floor(issuedAtMs / 1_000)}`, 'rawurl');
  return `${tokenBody}.${crypto.hmac('sha256', SECRET, `herald.engagement.${tokenBody}`, 'base64rawurl').slice(0, MAC_CHARS)}`;
}

interface Data {
  campaignId: string;
  tokens: string[];
}

/** Report `index`: which subscriber, which kind, forged or not (the same for every VU and for teardown). */
function report(index: number, subscribers: number): { subscriber: number; kind: (typeof KINDS)[number]; forged: boolean } {
  return { subscriber: Math.floor(index / KINDS.length) % subscribers, kind: KINDS[index % KINDS.length] ?? 'impression', forged: index % FORGED_EVERY === FORGED_EVERY - 1 };
}

export function setup(): Data {
  if (SECRET.length < 32) throw new Error("ENGAGEMENT_TOKEN_SECRET (at least 32 bytes) must be the deployment's: the journey signs report tokens with it");
  const subscribers = subscribeAudience(siteKey, runStamp(), FORM.audience);
  const created = http.post(`${SERVER_API}/campaigns`, JSON.stringify({ name: 'Load engagement', title: 'Load', body: 'Engagement journey' }), {
    headers: { ...bearer(apiKey), 'Content-Type': 'application/json' },
    tags: { name: 'campaign_create', phase: 'setup' },
  });
  const campaignId = body<{ id?: string }>(created)?.id;
  if (created.status !== 201 || !campaignId) throw new Error(`setup: POST /campaigns answered ${created.status}`);
  const sent = http.post(`${SERVER_API}/campaigns/${campaignId}/send`, null, { headers: bearer(apiKey), tags: { name: 'campaign_send', phase: 'setup' } });
  if (sent.status !== 200) throw new Error(`setup: POST /campaigns/${campaignId}/send answered ${sent.status}`);
  const now = Date.now();
  return { campaignId, tokens: subscribers.map((subscriberId) => engagementToken(campaignId, subscriberId, now)) };
}

export default function reportEvent(data: Data): void {
  const { subscriber, kind, forged } = report(exec.scenario.iterationInTest, data.tokens.length);
  const token = data.tokens[subscriber] ?? '';
  // A forged token: the same body under another MAC.
  const sent = forged ? `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}` : token;
  const response = http.post(`${BASE_URL}/api/v1/events`, JSON.stringify({ type: kind, token: sent }), {
    headers: { Origin: SITE_ORIGIN, 'Content-Type': 'application/json' },
    tags: { name: 'events', kind: forged ? 'forged' : kind },
    responseCallback: http.expectedStatuses(forged ? 400 : 202),
  });
  const answer = body<{ success?: boolean; code?: string; message?: string }>(response);
  if (forged) {
    check(response, { 'a forged token is a 400 that does not say why': (r) => r.status === 400 && answer?.code === 'invalid_request' && answer.message === 'The event token is not valid.' });
    return;
  }
  check(response, { 'a report is 202 accepted': (r) => r.status === 202 && answer?.success === true && r.headers['Access-Control-Allow-Origin'] === SITE_ORIGIN });
}

interface Stats {
  totalDelivered?: number;
  totalClicked?: number;
}

export function teardown(data: Data): void {
  // The run made exactly rate x duration reports (dropped_iterations holds that): the distinct
  // (subscriber, kind) pairs among the unforged ones are what the stats must count, once each.
  const expected = { impression: new Set<number>(), click: new Set<number>() };
  for (let index = 0; index < FORM.rate * FORM.seconds; index += 1) {
    const { subscriber, kind, forged } = report(index, data.tokens.length);
    if (!forged) expected[kind].add(subscriber);
  }
  const want = { totalDelivered: expected.impression.size, totalClicked: expected.click.size };
  const read = (): Stats | undefined => body<Stats>(http.get(`${SERVER_API}/campaigns/${data.campaignId}/stats`, { headers: bearer(apiKey), tags: { name: 'campaign_stats', phase: 'teardown' } }));
  const started = Date.now();
  let stats = read();
  while ((stats?.totalDelivered ?? 0) < want.totalDelivered || (stats?.totalClicked ?? 0) < want.totalClicked) {
    if (Date.now() - started > COUNTED_WITHIN_MS) break;
    sleep(0.2);
    stats = read();
  }
  const countedAfter = Date.now() - started;
  // Still the same a moment later: a repeated report counted late would show here.
  sleep(1);
  stats = read();
  const once = check(stats, { 'each accepted (subscriber, kind) counted exactly once': (s) => s?.totalDelivered === want.totalDelivered && s.totalClicked === want.totalClicked });
  if (once) counted.add(countedAfter);
  else console.error(`engagement: counted ${JSON.stringify(stats)}, expected ${JSON.stringify(want)}`);
}

export const handleSummary = summaryFiles('engagement');
