// Thresholds as k6 writes them: 'http_req_duration{name:identity}': ['p(95)<300'], 'checks':
// ['rate==1'], 'dropped_iterations': ['count==0']. One difference on purpose: a threshold on a
// rate, trend or gauge that got no samples fails, so a scenario whose requests stopped happening
// cannot pass by measuring nothing (a counter without samples counts 0, which is well defined).
import { metricNamed, Trend, type Metric, type Tags } from './metrics.js';

export type Thresholds = Readonly<Record<string, readonly string[]>>;

const OPERATORS = {
  '<': (a: number, b: number) => a < b,
  '<=': (a: number, b: number) => a <= b,
  '>': (a: number, b: number) => a > b,
  '>=': (a: number, b: number) => a >= b,
  '==': (a: number, b: number) => a === b,
  '!=': (a: number, b: number) => a !== b,
} as const;
type Operator = keyof typeof OPERATORS;

const AGGREGATES_BY_TYPE = {
  counter: ['count', 'rate'],
  rate: ['rate'],
  trend: ['avg', 'min', 'med', 'max', 'count', 'p(N)'],
  gauge: ['value', 'min', 'max'],
} as const;

export interface Threshold {
  /** The key as written, e.g. http_req_duration{name:identity}. */
  readonly key: string;
  readonly expression: string;
  readonly metric: Metric;
  readonly selector: Tags;
  readonly aggregate: string;
  readonly operator: Operator;
  readonly bound: number;
}

export interface ThresholdResult {
  readonly key: string;
  readonly expression: string;
  readonly ok: boolean;
  /** The measured aggregate; undefined when the (sub-)metric had no samples. */
  readonly actual: number | undefined;
}

/** metric or metric{tag:value,...} -> the metric's name and the tags that select the sub-metric. */
export function parseMetricKey(key: string): { name: string; selector: Tags } {
  const match = /^([a-z][a-z0-9_]*)(?:\{([^{}]*)\})?$/.exec(key);
  if (!match) throw new Error(`threshold key "${key}" is not metric or metric{tag:value,...}`);
  const selector: Record<string, string> = {};
  for (const pair of match[2] === undefined ? [] : match[2].split(',')) {
    const colon = pair.indexOf(':');
    const tag = pair.slice(0, colon).trim();
    const value = pair.slice(colon + 1).trim();
    if (colon < 1 || value === '') throw new Error(`threshold key "${key}": "${pair}" is not tag:value`);
    selector[tag] = value;
  }
  return { name: match[1] as string, selector };
}

/** Parses every threshold up front, so a typo fails the run before any load is sent. */
export function parseThresholds(thresholds: Thresholds): Threshold[] {
  return Object.entries(thresholds).flatMap(([key, expressions]) => {
    const { name, selector } = parseMetricKey(key);
    const metric = metricNamed(name);
    if (!metric) throw new Error(`threshold on "${key}": no metric named ${name}`);
    return expressions.map((expression) => {
      const match = /^\s*(avg|min|med|max|count|rate|value|p\(\d+(?:\.\d+)?\))\s*(<=|>=|==|!=|<|>)\s*(-?\d+(?:\.\d+)?)\s*$/.exec(expression);
      if (!match) throw new Error(`threshold "${expression}" on ${key} is not <aggregate> <operator> <number>, e.g. p(95)<300`);
      const aggregate = match[1] as string;
      const allowed: readonly string[] = AGGREGATES_BY_TYPE[metric.type];
      if (!allowed.includes(aggregate.startsWith('p(') ? 'p(N)' : aggregate)) {
        throw new Error(`threshold "${expression}" on ${key}: a ${metric.type} has ${allowed.join(', ')}`);
      }
      return { key, expression, metric, selector, aggregate, operator: match[2] as Operator, bound: Number(match[3]) };
    });
  });
}

export function evaluateThreshold(threshold: Threshold, seconds: number): ThresholdResult {
  const values = threshold.metric.select(threshold.selector);
  if (values.length === 0 && threshold.metric.type !== 'counter') return { key: threshold.key, expression: threshold.expression, ok: false, actual: undefined };
  const percentile = /^p\((.+)\)$/.exec(threshold.aggregate);
  const actual =
    percentile && threshold.metric instanceof Trend
      ? threshold.metric.percentile(values, Number(percentile[1]))
      : (threshold.metric.aggregate(values, seconds)[threshold.aggregate] as number);
  return { key: threshold.key, expression: threshold.expression, ok: OPERATORS[threshold.operator](actual, threshold.bound), actual };
}
