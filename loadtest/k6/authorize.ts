// /authorize throughput: a partner workspace with a Cedar policy (PUT /policy in setup), then tool
// calls at a steady open-model rate, mixed so that every kind of verdict is exercised: a permit, a
// forbid winning over a permit, no permit at all, a condition on a parameter both ways. Each
// verdict must be exactly the one the policy gives.
import { check } from 'k6';
import exec from 'k6/execution';
import http from 'k6/http';
import { Counter } from 'k6/metrics';
import type { Options } from 'k6/options';

import { budget, dropBudget, jsonHeaders, maxVus, pick, PROVISION, SERVER_API, SMOKE } from './lib/config.ts';
import { body } from './lib/http.ts';
import { summaryFiles } from './lib/summary.ts';

const POLICY = `
@id("read-anything")
permit(principal, action == Herald::Action::"call", resource)
when { resource.name == "read_file" };

@id("no-secrets")
forbid(principal, action, resource)
when { resource.name == "read_file" && resource.target like "*.env" };

@id("small-payments")
permit(principal, action, resource)
when { resource.name == "pay" && resource.hasTag("amount") && resource.getTag("amount").long <= 100 };
`;

/** The calls agents make, each with the verdict the policy must give. */
const CALLS = [
  { request: { toolName: 'read_file', toolTarget: 'README.md' }, verdict: 'allow', policy: 'read-anything' },
  { request: { toolName: 'read_file', toolTarget: 'prod.env' }, verdict: 'deny', policy: 'no-secrets' },
  { request: { toolName: 'rm_rf', toolTarget: '/' }, verdict: 'deny', policy: null },
  { request: { toolName: 'pay', parameters: { amount: 40, currency: 'EUR' } }, verdict: 'allow', policy: 'small-payments' },
  { request: { toolName: 'pay', parameters: { amount: 400, currency: 'EUR' } }, verdict: 'deny', policy: null },
] as const;

// Partner keys admit 1000 requests a minute each: 40/s over four keys is 600 a minute per key.
const FORM = SMOKE ? { rate: 10, seconds: 4, keys: 1 } : { rate: 40, seconds: 120, keys: 4 };
const KEYS = PROVISION.authorize.keys.slice(0, FORM.keys);

const verdicts = new Counter('authorize_verdicts');

export const options: Options = {
  scenarios: {
    agents: { executor: 'constant-arrival-rate', rate: FORM.rate, timeUnit: '1s', duration: `${FORM.seconds}s`, preAllocatedVUs: 10, maxVUs: maxVus(100) },
  },
  thresholds: {
    checks: ['rate==1'],
    http_req_failed: ['rate==0'],
    'http_req_duration{name:authorize}': [budget(300), ...(SMOKE ? [] : ['p(99)<600'])],
    'http_req_duration{name:authorize,verdict:allow}': [budget(300)],
    'http_req_duration{name:authorize,verdict:deny}': [budget(300)],
    authorize_verdicts: ['count>0'],
    dropped_iterations: [dropBudget(FORM.rate * FORM.seconds)],
  },
};

export function setup(): void {
  if (KEYS.length < FORM.keys) throw new Error(`the provisioning file has ${KEYS.length} authorize keys, this form needs ${FORM.keys}`);
  const put = http.put(`${SERVER_API}/policy`, JSON.stringify({ policy: POLICY }), { headers: jsonHeaders(pick(KEYS, 0)), tags: { name: 'policy_put', phase: 'setup' } });
  if (put.status !== 200) throw new Error(`setup: PUT /policy answered ${put.status}: ${String(put.body).slice(0, 200)}`);
}

export default function authorize(): void {
  const index = exec.scenario.iterationInTest;
  const expected = pick(CALLS, index);
  const response = http.post(`${SERVER_API}/authorize`, JSON.stringify(expected.request), { headers: jsonHeaders(pick(KEYS, index)), tags: { name: 'authorize', verdict: expected.verdict } });
  const result = body<{ verdict?: string; policy?: string | null; authorizationId?: string }>(response);
  const ok = check(response, {
    'authorize is 200': (r) => r.status === 200,
    'the verdict the policy gives': () => result?.verdict === expected.verdict && result.policy === expected.policy,
    'the verdict is recorded': () => /^authz_[0-9a-f]{32}$/.test(result?.authorizationId ?? ''),
  });
  if (ok) verdicts.add(1, { verdict: expected.verdict });
}

export function teardown(): void {
  // The policy the run held is still the one in force.
  const response = http.get(`${SERVER_API}/policy`, { headers: jsonHeaders(pick(KEYS, 0)), tags: { name: 'policy_get', phase: 'teardown' } });
  check(response, { 'the policy is still in force': (r) => r.status === 200 && body<{ policy?: string }>(r)?.policy === POLICY });
}

export const handleSummary = summaryFiles('authorize');
