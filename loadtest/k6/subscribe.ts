// A subscribe storm: browsers on several sites registering push subscriptions through the browser
// SDK's endpoint with each site's public key and Origin, at a rising rate (open model). Every
// request is a 201 creating a new subscriber; each site key stays under its plan's limit.
import { check } from 'k6';
import exec from 'k6/execution';
import { Counter } from 'k6/metrics';
import type { Options } from 'k6/options';

import { runStamp, subscribe } from './lib/audience.ts';
import { budget, dropBudget, maxVus, pick, PROVISION, SITE_ORIGIN, SMOKE } from './lib/config.ts';
import { body } from './lib/http.ts';
import { summaryFiles } from './lib/summary.ts';

// Enterprise site keys admit 1000 subscribes a minute each.
const FORM = SMOKE
  ? { sites: 1, startRate: 5, stages: [{ duration: '2s', target: 10 }, { duration: '2s', target: 10 }] }
  : { sites: 4, startRate: 10, stages: [{ duration: '30s', target: 60 }, { duration: '1m', target: 60 }, { duration: '15s', target: 0 }] };
const SITE_KEYS = PROVISION.subscribe.siteKeys.slice(0, FORM.sites);

const created = new Counter('subscribers_created');

export const options: Options = {
  scenarios: {
    storm: { executor: 'ramping-arrival-rate', startRate: FORM.startRate, timeUnit: '1s', stages: FORM.stages, preAllocatedVUs: 10, maxVUs: maxVus(100) },
  },
  thresholds: {
    checks: ['rate==1'],
    http_req_failed: ['rate==0'],
    'http_req_duration{name:subscribe}': [budget(500), ...(SMOKE ? [] : ['p(99)<1000'])],
    // The smoke form's ramp starts 36 iterations.
    dropped_iterations: [dropBudget(SMOKE ? 36 : 0)],
    subscribers_created: ['count>0'],
  },
};

interface Data {
  stamp: number;
}

export function setup(): Data {
  if (SITE_KEYS.length < FORM.sites) throw new Error(`the provisioning file has ${SITE_KEYS.length} subscribe sites, this form needs ${FORM.sites}`);
  return { stamp: runStamp() };
}

export default function storm(data: Data): void {
  const index = exec.scenario.iterationInTest;
  const response = subscribe(pick(SITE_KEYS, index), data.stamp, index);
  const record = body<{ success?: boolean; subscriberId?: string; created?: boolean }>(response);
  const ok = check(response, {
    'subscribe is 201': (r) => r.status === 201,
    'a new subscriber id': () => record?.success === true && record.created === true && /^sub_[a-z2-7]{16}$/.test(record.subscriberId ?? ''),
    'CORS allows the page': (r) => r.headers['Access-Control-Allow-Origin'] === SITE_ORIGIN,
  });
  if (ok) created.add(1);
}

export function teardown(data: Data): void {
  // The same browser subscribing again is the same subscriber, not a new one.
  const again = subscribe(pick(SITE_KEYS, 0), data.stamp, 0, { phase: 'teardown' });
  const record = body<{ created?: boolean }>(again);
  check(again, { 'a repeated subscribe is the same subscriber': (r) => r.status === 200 && record?.created === false });
}

export const handleSummary = summaryFiles('subscribe');
