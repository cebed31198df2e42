// POST /send to a growing audience: browsers keep subscribing (constant arrivals) while sends ramp
// up (ramping arrivals), so each send reaches more subscribers than the one before. A send answers
// 200 queued with a campaign id, and on each VU a send never reaches fewer subscribers than its
// previous one (subscribers are only added).
import { check } from 'k6';
import exec from 'k6/execution';
import http from 'k6/http';
import { Trend } from 'k6/metrics';
import type { Options } from 'k6/options';

import { runStamp, subscribe } from './lib/audience.ts';
import { budget, dropBudget, jsonHeaders, maxVus, PROVISION, SERVER_API, SITE_ORIGIN, SMOKE } from './lib/config.ts';
import { body } from './lib/http.ts';
import { summaryFiles } from './lib/summary.ts';

const { apiKey, siteKey } = PROVISION.send;
const FORM = SMOKE
  ? { subscribeRate: 10, subscribeFor: '5s', sends: { startRate: 1, stages: [{ duration: '4s', target: 4 }] }, sendsStart: '1s' }
  : { subscribeRate: 15, subscribeFor: '2m', sends: { startRate: 1, stages: [{ duration: '1m', target: 8 }, { duration: '1m', target: 8 }] }, sendsStart: '5s' };

/** Subscribers each send was queued for. */
const audience = new Trend('send_audience');

export const options: Options = {
  scenarios: {
    audience: { executor: 'constant-arrival-rate', rate: FORM.subscribeRate, timeUnit: '1s', duration: FORM.subscribeFor, preAllocatedVUs: 5, maxVUs: maxVus(50), exec: 'grow' },
    sends: { executor: 'ramping-arrival-rate', ...FORM.sends, timeUnit: '1s', preAllocatedVUs: 5, maxVUs: maxVus(50), startTime: FORM.sendsStart, exec: 'send' },
  },
  thresholds: {
    checks: ['rate==1'],
    http_req_failed: ['rate==0'],
    'http_req_duration{name:send}': [budget(1000)],
    'http_req_duration{name:subscribe}': [budget(500)],
    // The smoke form starts 50 subscribes and 10 sends.
    dropped_iterations: [dropBudget(SMOKE ? 60 : 0)],
    send_audience: ['max>0'],
  },
};

interface Data {
  stamp: number;
}

export function setup(): Data {
  return { stamp: runStamp() };
}

export function grow(data: Data): void {
  const response = subscribe(siteKey, data.stamp, exec.scenario.iterationInTest);
  check(response, { 'subscribe is 201': (r) => r.status === 201 });
}

/** This VU's last send's audience (per VU, as k6 keeps module state). */
let previous = 0;

export function send(): void {
  const response = http.post(
    `${SERVER_API}/send`,
    JSON.stringify({ title: `Load ${exec.vu.idInTest}-${exec.vu.iterationInScenario}`, body: 'A notification from the send journey', url: `${SITE_ORIGIN}/offer` }),
    { headers: jsonHeaders(apiKey), tags: { name: 'send' } },
  );
  const result = body<{ success?: boolean; status?: string; campaignId?: string; sent?: number; duplicate?: boolean }>(response);
  const sent = result?.sent ?? -1;
  if (sent >= 0) audience.add(sent);
  check(response, {
    'send is 200': (r) => r.status === 200,
    'queued with a campaign id': () => result?.success === true && result.status === 'queued' && /^ntf_[0-9a-f]{32}$/.test(result.campaignId ?? '') && result.duplicate === false,
    'the audience never shrinks': () => sent >= previous,
  });
  previous = Math.max(previous, sent);
}

export function teardown(): void {
  // The audience is still there after the run: one last send reaches at least one subscriber.
  const response = http.post(`${SERVER_API}/send`, JSON.stringify({ title: 'Load last', body: 'The send journey is over', url: `${SITE_ORIGIN}/offer` }), {
    headers: jsonHeaders(apiKey),
    tags: { name: 'send_last' },
  });
  check(response, { 'the last send reaches the audience': (r) => r.status === 200 && (body<{ sent?: number }>(r)?.sent ?? 0) > 0 });
}

export const handleSummary = summaryFiles('send');
