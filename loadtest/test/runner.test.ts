import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parseDuration } from '../runner/duration.js';
import { setTimeout as sleep } from 'node:timers/promises';

import { arrivalsBy, ScenarioRun } from '../runner/executors.js';
import { builtin, Counter, Gauge, Rate, Trend } from '../runner/metrics.js';
import { evaluateThreshold, parseThresholds } from '../runner/thresholds.js';

// The runner's pieces without a server: durations, the open-model arrival schedule, metrics,
// thresholds (and every way to write one wrong).

test('durations as k6 writes them, and what is not one', () => {
  assert.deepEqual(['500ms', '10s', '2m', '1h', '1m30s', '1.5s'].map(parseDuration), [500, 10_000, 120_000, 3_600_000, 90_000, 1_500]);
  for (const bad of ['', '10', 's', '10 s', '10sec', '-1s', '1m 30s']) {
    assert.throws(() => parseDuration(bad), { message: `"${bad}" is not a duration such as 500ms, 10s, 2m or 1m30s` });
  }
});

test('arrivals: a constant rate starts one at 0 and one every 1/rate; a ramp integrates the rate', () => {
  const constant = { startRate: 10, timeUnitMs: 1_000, stages: [{ durationMs: 2_000, target: 10 }] };
  assert.deepEqual([0, 99, 100, 1_000, 1_999].map((ms) => arrivalsBy(constant, ms)), [1, 1, 2, 11, 20]);
  // 2 per 500 ms is 4 a second.
  assert.equal(arrivalsBy({ startRate: 2, timeUnitMs: 500, stages: [{ durationMs: 1_000, target: 2 }] }, 999), 4);
  // 0 -> 10/s over 2 s: 10 started by the end of the ramp, then 10/s: 20 more over 2 s.
  const ramp = { startRate: 0, timeUnitMs: 1_000, stages: [{ durationMs: 2_000, target: 10 }, { durationMs: 2_000, target: 10 }] };
  assert.deepEqual([0, 1_000, 2_000, 3_000, 3_999].map((ms) => arrivalsBy(ramp, ms)), [1, 3, 11, 21, 30]);
  // Ramping down to 0 ends the arrivals.
  const down = { startRate: 10, timeUnitMs: 1_000, stages: [{ durationMs: 2_000, target: 0 }] };
  assert.equal(arrivalsBy(down, 1_999), 10);
});

test('aggregates of counters, rates, trends and gauges, and sub-metrics by tag', () => {
  const counter = new Counter('t_counter');
  counter.add(2, { name: 'a' });
  counter.add(3, { name: 'b' });
  assert.deepEqual(counter.aggregate(counter.select(), 5), { count: 5, rate: 1 });
  assert.deepEqual(counter.aggregate(counter.select({ name: 'b' }), 5), { count: 3, rate: 0.6 });

  const rate = new Rate('t_rate');
  for (const value of [true, false, true, 1, 0]) rate.add(value);
  assert.deepEqual(rate.aggregate(rate.select()), { rate: 0.6, passes: 3, fails: 2 });

  const trend = new Trend('t_trend', true);
  for (let value = 1; value <= 100; value += 1) trend.add(value, { even: String(value % 2 === 0) });
  assert.deepEqual(trend.aggregate(trend.select()), { count: 100, avg: 50.5, min: 1, med: 50, max: 100, 'p(90)': 90, 'p(95)': 95, 'p(99)': 99 });
  assert.equal(trend.aggregate(trend.select({ even: 'true' })).min, 2);

  const gauge = new Gauge('t_gauge');
  for (const value of [3, 9, 1, 4]) gauge.add(value);
  assert.deepEqual(gauge.aggregate(gauge.select()), { value: 4, min: 1, max: 9 });

  assert.throws(() => new Counter('Bad-Name'), { message: 'metric name "Bad-Name" must be lower-case letters, digits and _' });
  assert.throws(() => new Rate('t_counter'), { message: 'metric "t_counter" already exists as a counter' });
  assert.throws(() => counter.add(Number.NaN), { message: 'metric "t_counter": sample NaN is not a finite number' });
});

test('thresholds: parsed up front, evaluated on (sub-)metrics; no samples fails except for counters', () => {
  const latency = new Trend('t_latency', true);
  for (const [value, name] of [[10, 'a'], [20, 'a'], [300, 'b']] as const) latency.add(value, { name });
  new Counter('t_errors');
  const thresholds = parseThresholds({
    't_latency{name:a}': ['p(95)<100', 'max<=20', 'avg==15'],
    't_latency{name:b}': ['p(95)<100'],
    't_latency{name:c}': ['max<1'],
    't_errors': ['count==0'],
    't_latency': ['p(99.9)>=300', 'count!=3'],
  });
  assert.deepEqual(
    thresholds.map((threshold) => evaluateThreshold(threshold, 1)),
    [
      { key: 't_latency{name:a}', expression: 'p(95)<100', ok: true, actual: 20 },
      { key: 't_latency{name:a}', expression: 'max<=20', ok: true, actual: 20 },
      { key: 't_latency{name:a}', expression: 'avg==15', ok: true, actual: 15 },
      { key: 't_latency{name:b}', expression: 'p(95)<100', ok: false, actual: 300 },
      { key: 't_latency{name:c}', expression: 'max<1', ok: false, actual: undefined },
      { key: 't_errors', expression: 'count==0', ok: true, actual: 0 },
      { key: 't_latency', expression: 'p(99.9)>=300', ok: true, actual: 300 },
      { key: 't_latency', expression: 'count!=3', ok: false, actual: 3 },
    ],
  );
});

test('a threshold written wrong fails before any load, saying what is wrong', () => {
  const cases: Array<[Record<string, string[]>, string]> = [
    [{ no_such_metric: ['count>0'] }, 'threshold on "no_such_metric": no metric named no_such_metric'],
    [{ 'http_req_duration{name}': ['p(95)<1'] }, 'threshold key "http_req_duration{name}": "name" is not tag:value'],
    [{ 'http_req_duration{name:}': ['p(95)<1'] }, 'threshold key "http_req_duration{name:}": "name:" is not tag:value'],
    [{ 'Http-Reqs': ['count>0'] }, 'threshold key "Http-Reqs" is not metric or metric{tag:value,...}'],
    [{ http_req_duration: ['p95<300'] }, 'threshold "p95<300" on http_req_duration is not <aggregate> <operator> <number>, e.g. p(95)<300'],
    [{ http_req_duration: ['p(95) < fast'] }, 'threshold "p(95) < fast" on http_req_duration is not <aggregate> <operator> <number>, e.g. p(95)<300'],
    [{ http_req_duration: ['rate<1'] }, 'threshold "rate<1" on http_req_duration: a trend has avg, min, med, max, count, p(N)'],
    [{ http_req_failed: ['count<1'] }, 'threshold "count<1" on http_req_failed: a rate has rate'],
    [{ http_reqs: ['p(95)<1'] }, 'threshold "p(95)<1" on http_reqs: a counter has count, rate'],
    [{ vus: ['avg<1'] }, 'threshold "avg<1" on vus: a gauge has value, min, max'],
  ];
  for (const [thresholds, message] of cases) assert.throws(() => parseThresholds(thresholds), { message });
});

const RUN_ENV = { baseUrl: 'http://127.0.0.1:9', form: 'smoke', summaryDir: '/nonexistent', env: {} } as const;
const countIn = (metric: { select(selector: Record<string, string>): number[] }, scenario: string) => metric.select({ scenario }).reduce((sum, value) => sum + value, 0);

test('constant-arrival-rate is an open model: iterations start on schedule whatever they take; beyond maxVUs they are dropped', async () => {
  // 20 a second for 500 ms is 10 arrivals; each takes 180 ms and only 2 VUs exist, so about half are dropped.
  const run = new ScenarioRun(
    'open',
    { executor: 'constant-arrival-rate', rate: 20, timeUnit: '1s', duration: '500ms', preAllocatedVUs: 1, maxVUs: 2, exec: () => sleep(180) },
    undefined,
    RUN_ENV,
  );
  await run.run();
  const completed = countIn(builtin.iterations, 'open');
  const dropped = countIn(builtin.droppedIterations, 'open');
  assert.equal(completed + dropped, 10);
  assert.ok(completed >= 2 && dropped >= 3, `${completed} completed, ${dropped} dropped`);
  // Never more than 2 at once.
  assert.ok(Math.max(...builtin.vus.select({ scenario: 'open' })) <= 2);
});

test('constant-vus: a VU still blocked when the duration and the graceful stop are over is aborted, and that is no error', async () => {
  const started = performance.now();
  let iterations = 0;
  const run = new ScenarioRun(
    'blocked',
    {
      executor: 'constant-vus',
      vus: 2,
      duration: '200ms',
      gracefulStop: '100ms',
      exec: async ({ signal }) => {
        iterations += 1;
        // Waits for something that never comes, as a human waiting for a question does.
        await new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
      },
    },
    undefined,
    RUN_ENV,
  );
  await run.run();
  const took = performance.now() - started;
  assert.ok(took >= 300 && took < 5_000, `took ${took} ms`);
  assert.equal(iterations, 2);
  assert.equal(countIn(builtin.iterationErrors, 'blocked'), 0);
  assert.equal(countIn(builtin.iterations, 'blocked'), 0);
});

test('an iteration that throws is counted in iteration_errors and the next one still runs', async () => {
  let calls = 0;
  const run = new ScenarioRun(
    'throws',
    {
      executor: 'constant-arrival-rate',
      rate: 4,
      timeUnit: '100ms',
      duration: '200ms',
      preAllocatedVUs: 8,
      exec: async () => {
        calls += 1;
        if (calls % 2 === 0) throw new Error('every second iteration fails');
      },
    },
    undefined,
    RUN_ENV,
  );
  await run.run();
  assert.equal(calls, 8);
  assert.equal(countIn(builtin.iterationErrors, 'throws'), 4);
  assert.equal(countIn(builtin.iterations, 'throws'), 4);
});
