// A subscribe storm: browsers on several sites registering push subscriptions through the browser
// SDK's endpoint with each site's public key and Origin, at a rising rate (open model). Every
// request is a 201 creating a new subscriber; each site key stays under its plan's limit.
import type { TestPushSubscription } from '@herald/testkit';

import { check } from '../runner/http.js';
import { Counter } from '../runner/metrics.js';
import { defineScenario, type Form, type Iteration } from '../runner/scenario.js';
import { ALWAYS, maxVus, budget, bootstrapWorkspace, handleSummary, pick, SITE_ORIGIN, subscriptionSource, retireWorkspaces } from './lib/herald.js';

const created = new Counter('subscribers_created');

interface Data {
  siteKeys: string[];
  subscription(index: number): TestPushSubscription;
}

const FORMS = {
  // Enterprise site keys admit 1000 subscribes a minute each.
  smoke: { sites: 1, startRate: 5, stages: [{ duration: '2s', target: 20 }, { duration: '2s', target: 20 }] },
  full: { sites: 4, startRate: 10, stages: [{ duration: '30s', target: 60 }, { duration: '1m', target: 60 }, { duration: '15s', target: 0 }] },
} as const;

let issued = 0;

export default defineScenario<Data>({
  name: 'subscribe',
  description: 'POST /api/v1/subscribe with site keys from several sites, ramping open-model arrivals',
  options(form: Form) {
    const { startRate, stages } = FORMS[form];
    return {
      scenarios: {
        storm: { executor: 'ramping-arrival-rate', startRate, timeUnit: '1s', stages, preAllocatedVUs: 10, maxVUs: maxVus(form, 100), exec: subscribe },
      },
      thresholds: {
        ...ALWAYS,
        http_req_failed: ['rate==0'],
        'http_req_duration{name:subscribe}': [budget(form, 500), ...(form === 'full' ? ['p(99)<1000'] : [])],
        dropped_iterations: ['count==0'],
        subscribers_created: ['count>0'],
      },
    };
  },
  async setup(env) {
    const siteKeys: string[] = [];
    for (let site = 0; site < FORMS[env.form].sites; site += 1) siteKeys.push((await bootstrapWorkspace('subscribe', 'enterprise')).siteKey);
    return { siteKeys, subscription: await subscriptionSource(env) };
  },
  teardown: retireWorkspaces,
  handleSummary,
});

async function subscribe({ http, data }: Iteration<Data>): Promise<void> {
  const index = issued++;
  const subscription = data.subscription(index);
  const response = await http.post('/api/v1/subscribe', {
    name: 'subscribe',
    headers: { authorization: `Bearer ${pick(data.siteKeys, index)}`, origin: SITE_ORIGIN },
    body: { endpoint: subscription.endpoint, keys: subscription.keys, externalId: `load-user-${index}`, tags: ['load'] },
    expected: [201],
  });
  const body = response.json<{ success?: boolean; subscriberId?: string; created?: boolean }>();
  const ok = check(response, {
    'subscribe is 201': (r) => r.status === 201,
    'a new subscriber id': () => body?.success === true && body.created === true && /^sub_[a-z2-7]{16}$/.test(body.subscriberId ?? ''),
    'CORS allows the page': (r) => r.headers.get('access-control-allow-origin') === SITE_ORIGIN,
  });
  if (ok) created.add(1);
}
