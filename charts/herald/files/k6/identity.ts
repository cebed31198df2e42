// Identity reads at a key's limit: one free-plan key (100 requests per sliding minute) read faster
// than its limit allows, open model. Every response is a 200 or a 429 with exact rate-limit
// headers, and the key is never admitted more than its limit per window.
import { check } from 'k6';
import http from 'k6/http';
import { Counter } from 'k6/metrics';
import type { Options } from 'k6/options';

import { bearer, budget, dropBudget, maxVus, PROVISION, SERVER_API, SMOKE } from './lib/config.ts';
import { body, rateLimitChecks } from './lib/http.ts';
import { summaryFiles } from './lib/summary.ts';

const { workspaceId, apiKey, limitPerMinute } = PROVISION.identity;
// The smoke form still asks for more than the limit (150 in 5 s, at least 113 of them made) so that 429s come.
const FORM = SMOKE ? { rate: 30, seconds: 5 } : { rate: 50, seconds: 120 };
/** Admissions a sliding one-minute window allows over the run (each started window admits at most the limit). */
const ADMISSIONS_ALLOWED = limitPerMinute * (Math.floor(FORM.seconds / 60) + 1);

const admitted = new Counter('identity_admitted');
const limited = new Counter('identity_rate_limited');

export const options: Options = {
  scenarios: {
    reads: { executor: 'constant-arrival-rate', rate: FORM.rate, timeUnit: '1s', duration: `${FORM.seconds}s`, preAllocatedVUs: 20, maxVUs: maxVus(50) },
  },
  thresholds: {
    checks: ['rate==1'],
    // 429s are expected here (the response callback): only other statuses and errors fail.
    http_req_failed: ['rate==0'],
    'http_req_duration{name:identity}': [budget(500)],
    'http_req_duration{name:identity,status:429}': [budget(300)],
    dropped_iterations: [dropBudget(FORM.rate * FORM.seconds)],
    identity_admitted: [`count<=${ADMISSIONS_ALLOWED}`, 'count>0'],
    identity_rate_limited: ['count>0'],
  },
};

export function setup(): { workspaceId: string } {
  // The key's workspace, as the API names it: what every 200 must carry.
  return { workspaceId };
}

export default function read(data: { workspaceId: string }): void {
  const response = http.get(`${SERVER_API}/identity`, { headers: bearer(apiKey), tags: { name: 'identity' }, responseCallback: http.expectedStatuses(200, 429) });
  if (response.status === 200) admitted.add(1);
  if (response.status === 429) limited.add(1);
  check(response, {
    'status is 200 or 429': (r) => r.status === 200 || r.status === 429,
    'a 200 names the key’s workspace': (r) => r.status !== 200 || body<{ workspace?: { id?: string } }>(r)?.workspace?.id === data.workspaceId,
    ...rateLimitChecks(limitPerMinute),
  });
}

export function teardown(): void {
  // The key stays limited for up to a minute: one more read must still be answered, 200 or 429, never a 5xx.
  const response = http.get(`${SERVER_API}/identity`, { headers: bearer(apiKey), tags: { name: 'identity_after' }, responseCallback: http.expectedStatuses(200, 429) });
  check(response, { 'after the run the key is still answered': (r) => r.status === 200 || r.status === 429 });
}

export const handleSummary = summaryFiles('identity');
