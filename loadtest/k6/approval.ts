// Agent approval: an agent asks (POST /ask without waiting), then holds the long poll
// (GET /ask/{id}?wait=20) with http.asyncRequest; inside the same iteration the human answers
// through the answer endpoint the question's link names, after a short think time. k6 VUs share
// no memory, so the answer is given by the iteration that holds the question, not handed to
// another VU. The wake-up latency, from the answer being sent to the waiting agent getting it, is
// a custom Trend with its own thresholds.
import { check, group, sleep } from 'k6';
import exec from 'k6/execution';
import http from 'k6/http';
import { Counter, Trend } from 'k6/metrics';
import type { Options } from 'k6/options';

import { BASE_URL, bearer, budget, dropBudget, jsonHeaders, maxVus, pick, PROVISION, SERVER_API, SMOKE } from './lib/config.ts';
import { body } from './lib/http.ts';
import { summaryFiles } from './lib/summary.ts';

/** Seconds an agent waits in one GET (the API allows up to 55). */
const WAIT_SECONDS = 20;
/** The human's think time before answering: the agent's wait is held by then. */
const THINK_SECONDS = 0.3;
// The answer endpoint is limited per client IP (100 a minute by default): answers stay under it.
const FORM = SMOKE ? { rate: 2, timeUnit: '1s', seconds: 4, keys: 1 } : { rate: 3, timeUnit: '2s', seconds: 120, keys: 2 };
const KEYS = PROVISION.approval.keys.slice(0, FORM.keys);

const wakeUp = new Trend('approval_wake_up', true);
const answered = new Counter('approval_answered');

export const options: Options = {
  scenarios: {
    agents: { executor: 'constant-arrival-rate', rate: FORM.rate, timeUnit: FORM.timeUnit, duration: `${FORM.seconds}s`, preAllocatedVUs: 10, maxVUs: maxVus(100) },
  },
  thresholds: {
    checks: ['rate==1'],
    http_req_failed: ['rate==0'],
    'http_req_duration{name:ask}': [budget(500)],
    'http_req_duration{name:answer}': [budget(500)],
    approval_wake_up: [budget(250), ...(SMOKE ? [] : ['max<2000'])],
    approval_answered: ['count>0'],
    dropped_iterations: [dropBudget(FORM.rate * FORM.seconds)],
  },
};

interface AskRecord {
  correlationId?: string;
  status?: string;
  answered?: boolean;
  value?: string;
  liveUrl?: string;
}

export function setup(): void {
  if (KEYS.length < FORM.keys) throw new Error(`the provisioning file has ${KEYS.length} approval keys, this form needs ${FORM.keys}`);
}

export default async function approval(): Promise<void> {
  const key = pick(KEYS, exec.scenario.iterationInTest);
  const created = http.post(`${SERVER_API}/ask`, JSON.stringify({ question: 'Deploy the load build?', context: 'Asked by the approval journey.', agentName: 'load-agent', wait: false }), {
    headers: jsonHeaders(key),
    tags: { name: 'ask' },
  });
  const record = body<AskRecord>(created);
  const ok = check(created, {
    'ask is 200 pending': (r) => r.status === 200 && record?.status === 'pending',
    'ask has an answer link': () => /^ask_[0-9a-f]{32}$/.test(record?.correlationId ?? '') && (record?.liveUrl ?? '').includes('/a/'),
  });
  if (!ok || !record?.correlationId || !record.liveUrl) return;
  const token = record.liveUrl.slice(record.liveUrl.indexOf('/a/') + 3);

  // The agent holds the wait while the human answers.
  const waitStarted = Date.now();
  const waiting = http.asyncRequest('GET', `${SERVER_API}/ask/${record.correlationId}?wait=${WAIT_SECONDS}`, null, {
    headers: bearer(key),
    tags: { name: 'ask_wait' },
    timeout: `${WAIT_SECONDS + 10}s`,
  });
  const answerSent = group('human', () => {
    sleep(THINK_SECONDS);
    const sentAt = Date.now();
    const response = http.post(`${BASE_URL}/api/v1/answer/${token}`, JSON.stringify({ answer: 'yes' }), { headers: { 'Content-Type': 'application/json' }, tags: { name: 'answer' } });
    const result = body<AskRecord>(response);
    if (check(response, { 'answer is 200 and recorded': (r) => r.status === 200 && result?.correlationId === record.correlationId && result?.status === 'answered' && result?.value === 'yes' })) {
      answered.add(1);
    }
    return sentAt;
  });
  const waited = await waiting;
  const result = body<AskRecord>(waited);
  if (check(waited, { 'the wait returns the answer': (r) => r.status === 200 && result?.status === 'answered' && result.answered === true && result.value === 'yes' })) {
    wakeUp.add(Math.max(0, waitStarted + waited.timings.duration - answerSent));
  }
}

export function teardown(): void {
  // A question nobody answers stays pending: the API must not approve it on its own.
  const key = pick(KEYS, 0);
  const created = http.post(`${SERVER_API}/ask`, JSON.stringify({ question: 'Unanswered?', agentName: 'load-agent', wait: false }), { headers: jsonHeaders(key), tags: { name: 'ask', phase: 'teardown' } });
  const id = body<AskRecord>(created)?.correlationId ?? '';
  const read = http.get(`${SERVER_API}/ask/${id}`, { headers: bearer(key), tags: { name: 'ask_read', phase: 'teardown' } });
  check(read, { 'an unanswered question stays pending': (r) => r.status === 200 && body<AskRecord>(r)?.status === 'pending' && body<AskRecord>(r)?.answered === false });
  const withdrawn = http.del(`${SERVER_API}/ask/${id}`, null, { headers: bearer(key), tags: { name: 'ask_withdraw', phase: 'teardown' } });
  check(withdrawn, { 'the question is withdrawn': (r) => r.status === 200 });
}

export const handleSummary = summaryFiles('approval');
