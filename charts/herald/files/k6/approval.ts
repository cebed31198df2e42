// Agent approval: an agent asks a question and blocks on it (POST /ask with wait), and a person,
// another VU of its own scenario, finds it in the workspace's pending questions (GET
// /ask?status=pending, an approver's inbox) and answers through the answer link the list gives.
// k6 VUs share no memory, so the answer carries the moment it was sent: the agent's wake-up
// latency (answer sent -> the waiting agent has it) is `now - answer`, a custom Trend with its own
// thresholds. The question is an input question for that reason; the person's answer is the time.
import { check, sleep } from 'k6';
import exec from 'k6/execution';
import http from 'k6/http';
import { Counter, Trend } from 'k6/metrics';
import type { Options } from 'k6/options';

import { BASE_URL, bearer, budget, dropBudget, jsonHeaders, maxVus, pick, PROVISION, SERVER_API, SMOKE } from './lib/config.ts';
import { body } from './lib/http.ts';
import { summaryFiles } from './lib/summary.ts';

/** Seconds an agent waits in one POST (the API allows up to 55). */
const WAIT_SECONDS = 20;
/** How often a person looks at the inbox. */
const INBOX_EVERY_SECONDS = 0.25;
// The answer endpoint is limited per client IP (100 a minute by default): answers stay under it.
const FORM = SMOKE ? { rate: 2, timeUnit: '1s', seconds: 4, keys: 1 } : { rate: 3, timeUnit: '2s', seconds: 120, keys: 2 };
const KEYS = PROVISION.approval.keys.slice(0, FORM.keys);

const wakeUp = new Trend('approval_wake_up', true);
const answered = new Counter('approval_answered');

export const options: Options = {
  scenarios: {
    agents: { executor: 'constant-arrival-rate', exec: 'agent', rate: FORM.rate, timeUnit: FORM.timeUnit, duration: `${FORM.seconds}s`, preAllocatedVUs: 10, maxVUs: maxVus(100) },
    // One person per key, for as long as the agents ask and a wait more.
    people: { executor: 'constant-vus', exec: 'person', vus: FORM.keys, duration: `${FORM.seconds + 3}s` },
  },
  thresholds: {
    checks: ['rate==1'],
    http_req_failed: ['rate==0'],
    'http_req_duration{name:ask}': [budget(1_000)],
    'http_req_duration{name:inbox}': [budget(500)],
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

interface Inbox {
  data?: AskRecord[];
}

export function setup(): void {
  if (KEYS.length < FORM.keys) throw new Error(`the provisioning file has ${KEYS.length} approval keys, this form needs ${FORM.keys}`);
}

/** The agent: asks and blocks until the person answers; the answer says when it was sent. */
export function agent(): void {
  const key = pick(KEYS, exec.scenario.iterationInTest);
  const response = http.post(
    `${SERVER_API}/ask`,
    JSON.stringify({ question: 'Which ticket is this deploy for?', type: 'input', context: 'Asked by the approval journey.', agentName: 'load-agent', timeoutSeconds: WAIT_SECONDS }),
    { headers: jsonHeaders(key), tags: { name: 'ask' }, timeout: `${WAIT_SECONDS + 10}s` },
  );
  const record = body<AskRecord>(response);
  const sentAt = Number(record?.value);
  if (
    check(response, {
      'the ask returns the answer': (r) => r.status === 200 && record?.status === 'answered' && record.answered === true && Number.isFinite(sentAt),
    })
  ) {
    wakeUp.add(Math.max(0, Date.now() - sentAt));
  }
}

/** The person: reads the pending questions and answers each through its link, with the time. */
export function person(): void {
  const key = pick(KEYS, exec.vu.idInTest);
  const inbox = http.get(`${SERVER_API}/ask?status=pending&limit=20`, { headers: bearer(key), tags: { name: 'inbox' } });
  const pending = body<Inbox>(inbox)?.data ?? [];
  check(inbox, { 'the inbox is 200': (r) => r.status === 200 });
  for (const question of pending) {
    const link = question.liveUrl ?? '';
    const token = link.slice(link.indexOf('/a/') + 3);
    const response = http.post(`${BASE_URL}/api/v1/answer/${token}`, JSON.stringify({ answer: String(Date.now()) }), {
      headers: { 'Content-Type': 'application/json' },
      tags: { name: 'answer' },
    });
    if (check(response, { 'the answer is recorded': (r) => r.status === 200 && body<AskRecord>(r)?.status === 'answered' })) answered.add(1);
  }
  sleep(INBOX_EVERY_SECONDS);
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
