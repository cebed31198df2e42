// Identity reads at a key's limit: one free-plan key (100 requests per sliding minute) read
// faster than its limit allows, open model. Every response is a 200 or a 429 with exact
// rate-limit headers, and the key is never admitted more than its limit per window.
import { parseDuration } from '../runner/duration.js';
import { check } from '../runner/http.js';
import { Counter } from '../runner/metrics.js';
import { defineScenario, type Form, type Iteration } from '../runner/scenario.js';
import { ALWAYS, maxVus, budget, bearer, bootstrapWorkspace, handleSummary, rateLimitChecks, SERVER_API, retireWorkspaces } from './lib/herald.js';

const FREE_PLAN_LIMIT = 100;
const admitted = new Counter('identity_admitted');
const limited = new Counter('identity_rate_limited');

const FORMS = {
  smoke: { rate: 40, duration: '4s' },
  full: { rate: 50, duration: '2m' },
} as const;

/** Admissions a sliding one-minute window allows over `seconds` (each started window admits at most the limit). */
const admissionsAllowed = (durationMs: number): number => FREE_PLAN_LIMIT * (Math.floor(durationMs / 60_000) + 1);

interface Data {
  workspaceId: string;
  apiKey: string;
}

export default defineScenario<Data>({
  name: 'identity',
  description: 'GET /api/v1/server/identity at twice a free key’s limit: 200s, then 429s, exact rate-limit headers',
  options(form: Form) {
    const { rate, duration } = FORMS[form];
    return {
      scenarios: {
        reads: { executor: 'constant-arrival-rate', rate, timeUnit: '1s', duration, preAllocatedVUs: 10, maxVUs: maxVus(form, 50), exec: read },
      },
      thresholds: {
        ...ALWAYS,
        // 429s are expected here: only other statuses and errors count as failed.
        http_req_failed: ['rate==0'],
        'http_req_duration{name:identity}': [budget(form, 500)],
        'http_req_duration{name:identity,status:429}': [budget(form, 300)],
        dropped_iterations: ['count==0'],
        identity_admitted: [`count<=${admissionsAllowed(parseDuration(duration))}`, 'count>0'],
        identity_rate_limited: ['count>0'],
      },
    };
  },
  async setup() {
    const { workspaceId, apiKey } = await bootstrapWorkspace('identity', 'free');
    return { workspaceId, apiKey };
  },
  teardown: retireWorkspaces,
  handleSummary,
});

async function read({ http, data }: Iteration<Data>): Promise<void> {
  const response = await http.get(`${SERVER_API}/identity`, { name: 'identity', headers: bearer(data.apiKey), expected: [200, 429] });
  if (response.status === 200) admitted.add(1);
  if (response.status === 429) limited.add(1);
  check(response, {
    'status is 200 or 429': (r) => r.status === 200 || r.status === 429,
    'a 200 names the key’s workspace': (r) => r.status !== 200 || r.json<{ workspace?: { id?: string } }>()?.workspace?.id === data.workspaceId,
    ...rateLimitChecks(FREE_PLAN_LIMIT),
  });
}
