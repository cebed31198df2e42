// POST /send to a growing audience: browsers keep subscribing (constant arrivals) while sends
// ramp up (ramping arrivals), so each send reaches more subscribers than the one before. A send
// answers 200 queued with a campaign id, and its `sent` lies between the subscribers that existed
// when it was made and those subscribing meanwhile.
import type { TestPushSubscription } from '@herald/testkit';

import { check } from '../runner/http.js';
import { Trend } from '../runner/metrics.js';
import { defineScenario, type Form, type Iteration } from '../runner/scenario.js';
import { ALWAYS, maxVus, budget, bearer, bootstrapWorkspace, handleSummary, SERVER_API, SITE_ORIGIN, subscriptionSource, retireWorkspaces } from './lib/herald.js';

/** Subscribers each send was queued for. */
const audience = new Trend('send_audience');

interface Data {
  apiKey: string;
  siteKey: string;
  subscription(index: number): TestPushSubscription;
}

const FORMS = {
  smoke: {
    subscribeRate: 10,
    subscribeFor: '5s',
    sends: { startRate: 1, stages: [{ duration: '4s', target: 4 }] },
    sendsStart: '1s',
  },
  full: {
    subscribeRate: 15,
    subscribeFor: '2m',
    sends: { startRate: 1, stages: [{ duration: '1m', target: 8 }, { duration: '1m', target: 8 }] },
    sendsStart: '5s',
  },
} as const;

/** Subscribes started, and answered 201, so far. */
let subscribesStarted = 0;
let subscribesDone = 0;

export default defineScenario<Data>({
  name: 'send',
  description: 'POST /api/v1/server/send (ramping arrivals) while the audience grows through /api/v1/subscribe',
  options(form: Form) {
    const shape = FORMS[form];
    return {
      scenarios: {
        audience: { executor: 'constant-arrival-rate', rate: shape.subscribeRate, timeUnit: '1s', duration: shape.subscribeFor, preAllocatedVUs: 5, maxVUs: maxVus(form, 50), exec: subscribe },
        sends: { executor: 'ramping-arrival-rate', ...shape.sends, timeUnit: '1s', preAllocatedVUs: 5, maxVUs: maxVus(form, 50), startTime: shape.sendsStart, exec: send },
      },
      thresholds: {
        ...ALWAYS,
        http_req_failed: ['rate==0'],
        'http_req_duration{name:send}': [budget(form, 1000)],
        'http_req_duration{name:subscribe}': [budget(form, 500)],
        dropped_iterations: ['count==0'],
        send_audience: ['max>0'],
      },
    };
  },
  async setup(env) {
    const { apiKey, siteKey } = await bootstrapWorkspace('send', 'enterprise');
    return { apiKey, siteKey, subscription: await subscriptionSource(env) };
  },
  teardown: retireWorkspaces,
  handleSummary,
});

async function subscribe({ http, data }: Iteration<Data>): Promise<void> {
  const index = subscribesStarted++;
  const { endpoint, keys } = data.subscription(index);
  const response = await http.post('/api/v1/subscribe', {
    name: 'subscribe',
    headers: { ...bearer(data.siteKey), origin: SITE_ORIGIN },
    body: { endpoint, keys, externalId: `load-user-${index}` },
    expected: [201],
  });
  if (check(response, { 'subscribe is 201': (r) => r.status === 201 })) subscribesDone += 1;
}

async function send({ http, data, vu }: Iteration<Data>): Promise<void> {
  const [existed, startedBy] = [subscribesDone, subscribesStarted];
  const response = await http.post(`${SERVER_API}/send`, {
    name: 'send',
    headers: bearer(data.apiKey),
    body: { title: `Load ${vu.id}-${vu.iterations}`, body: 'A notification from the send journey', url: `${SITE_ORIGIN}/offer` },
    expected: [200],
  });
  const body = response.json<{ success?: boolean; status?: string; campaignId?: string; sent?: number; duplicate?: boolean }>();
  const sent = body?.sent ?? -1;
  if (sent >= 0) audience.add(sent);
  check(response, {
    'send is 200': (r) => r.status === 200,
    'queued with a campaign id': () => body?.success === true && body.status === 'queued' && /^ntf_[0-9a-f]{32}$/.test(body.campaignId ?? '') && body.duplicate === false,
    'sent counts the audience at that moment': () => sent >= existed && sent <= Math.max(startedBy, subscribesStarted),
  });
}
