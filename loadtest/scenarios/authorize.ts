// /authorize throughput: a partner workspace with a Cedar policy (PUT /policy in setup), then
// tool calls at a steady open-model rate, mixed so that every kind of verdict is exercised: a
// permit, a forbid winning over a permit, no permit at all, a condition on a parameter both ways.
// Each verdict must be exactly the one the policy gives.
import { call } from '@herald/testkit';

import { check } from '../runner/http.js';
import { Counter } from '../runner/metrics.js';
import { defineScenario, type Form, type Iteration } from '../runner/scenario.js';
import { ALWAYS, maxVus, budget, bearer, bootstrapKeys, bootstrapWorkspace, handleSummary, pick, SERVER_API, retireWorkspaces } from './lib/herald.js';

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

const verdicts = new Counter('authorize_verdicts');

interface Data {
  keys: string[];
}

const FORMS = {
  smoke: { rate: 20, duration: '4s', keys: 1 },
  // Partner keys admit 1000 requests a minute each: 40/s over four keys is 600 a minute per key.
  full: { rate: 40, duration: '2m', keys: 4 },
} as const;

let sent = 0;

export default defineScenario<Data>({
  name: 'authorize',
  description: 'POST /api/v1/server/authorize against a Cedar policy at a constant arrival rate',
  options(form: Form) {
    const { rate, duration } = FORMS[form];
    return {
      scenarios: {
        agents: { executor: 'constant-arrival-rate', rate, timeUnit: '1s', duration, preAllocatedVUs: 10, maxVUs: maxVus(form, 100), exec: authorize },
      },
      thresholds: {
        ...ALWAYS,
        http_req_failed: ['rate==0'],
        'http_req_duration{name:authorize}': [budget(form, 300), ...(form === 'full' ? ['p(99)<600'] : [])],
        'http_req_duration{name:authorize,verdict:allow}': [budget(form, 300)],
        'http_req_duration{name:authorize,verdict:deny}': [budget(form, 300)],
        authorize_verdicts: ['count>0'],
        dropped_iterations: ['count==0'],
      },
    };
  },
  async setup(env) {
    const { workspaceId, apiKey } = await bootstrapWorkspace('authorize', 'partner');
    const put = await call(env.baseUrl, `${SERVER_API}/policy`, { method: 'PUT', key: apiKey, body: { policy: POLICY } });
    if (put.status !== 200) throw new Error(`PUT /policy answered ${put.status}: ${JSON.stringify(put.body)}`);
    return { keys: [apiKey, ...(await bootstrapKeys(workspaceId, FORMS[env.form].keys - 1))] };
  },
  teardown: retireWorkspaces,
  handleSummary,
});

async function authorize({ http, data }: Iteration<Data>): Promise<void> {
  const index = sent++;
  const expected = pick(CALLS, index);
  const response = await http.post(`${SERVER_API}/authorize`, {
    name: 'authorize',
    headers: bearer(pick(data.keys, index)),
    body: expected.request,
    expected: [200],
    tags: { verdict: expected.verdict },
  });
  const body = response.json<{ verdict?: string; policy?: string | null; authorizationId?: string }>();
  if (
    check(response, {
      'authorize is 200': (r) => r.status === 200,
      'the verdict the policy gives': () => body?.verdict === expected.verdict && body.policy === expected.policy,
      'the verdict is recorded': () => /^authz_[0-9a-f]{32}$/.test(body?.authorizationId ?? ''),
    })
  ) {
    verdicts.add(1, { verdict: expected.verdict });
  }
}
