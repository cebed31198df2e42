// Metrics as k6 names and aggregates them: Counter (count, rate per second), Rate (share of
// non-zero samples), Trend (avg, min, med, max, percentiles) and Gauge (last value). Every sample
// keeps its tags, so a threshold or the summary can select a sub-metric such as
// http_req_duration{name:identity} after the run.
import { percentile } from '../bench/lib/load.js';

export type MetricType = 'counter' | 'rate' | 'trend' | 'gauge';
export type Tags = Readonly<Record<string, string>>;

interface Sample {
  readonly value: number;
  readonly tags: Tags;
}

/** The aggregates of one (sub-)metric, keyed as thresholds and the summary name them. */
export type Aggregates = Readonly<Record<string, number>>;

const registry = new Map<string, Metric>();

export abstract class Metric {
  readonly samples: Sample[] = [];

  /** `isTime`: values are milliseconds (the summary prints them as durations). */
  constructor(
    readonly name: string,
    readonly type: MetricType,
    readonly isTime = false,
  ) {
    if (!/^[a-z][a-z0-9_]{0,127}$/.test(name)) throw new Error(`metric name "${name}" must be lower-case letters, digits and _`);
    const existing = registry.get(name);
    if (existing && existing.type !== type) throw new Error(`metric "${name}" already exists as a ${existing.type}`);
    registry.set(name, this);
  }

  add(value: number, tags: Tags = {}): void {
    if (!Number.isFinite(value)) throw new Error(`metric "${this.name}": sample ${value} is not a finite number`);
    this.samples.push({ value, tags });
  }

  /** Samples whose tags include every pair of `selector`. */
  select(selector: Tags = {}): number[] {
    const pairs = Object.entries(selector);
    return this.samples.filter((sample) => pairs.every(([key, value]) => sample.tags[key] === value)).map((sample) => sample.value);
  }

  abstract aggregate(values: readonly number[], seconds: number): Aggregates;
}

export class Counter extends Metric {
  constructor(name: string) {
    super(name, 'counter');
  }
  aggregate(values: readonly number[], seconds: number): Aggregates {
    const count = values.reduce((sum, value) => sum + value, 0);
    return { count, rate: seconds > 0 ? count / seconds : 0 };
  }
}

export class Rate extends Metric {
  constructor(name: string) {
    super(name, 'rate');
  }
  override add(value: number | boolean, tags: Tags = {}): void {
    super.add(value === true || (typeof value === 'number' && value !== 0) ? 1 : 0, tags);
  }
  aggregate(values: readonly number[]): Aggregates {
    const passes = values.filter((value) => value !== 0).length;
    return { rate: values.length > 0 ? passes / values.length : 0, passes, fails: values.length - passes };
  }
}

export class Trend extends Metric {
  constructor(name: string, isTime = false) {
    super(name, 'trend', isTime);
  }
  aggregate(values: readonly number[]): Aggregates {
    const sorted = [...values].sort((a, b) => a - b);
    const sum = sorted.reduce((total, value) => total + value, 0);
    const aggregates: Record<string, number> = {
      count: sorted.length,
      avg: sorted.length > 0 ? sum / sorted.length : 0,
      min: sorted[0] ?? 0,
      med: sorted.length > 0 ? percentile(sorted, 50) : 0,
      max: sorted[sorted.length - 1] ?? 0,
    };
    for (const p of TREND_PERCENTILES) aggregates[`p(${p})`] = sorted.length > 0 ? percentile(sorted, p) : 0;
    return aggregates;
  }
  /** Any percentile a threshold asks for, beyond the ones the summary shows. */
  percentile(values: readonly number[], p: number): number {
    return values.length > 0 ? percentile([...values].sort((a, b) => a - b), p) : 0;
  }
}

export class Gauge extends Metric {
  constructor(name: string) {
    super(name, 'gauge');
  }
  aggregate(values: readonly number[]): Aggregates {
    return {
      value: values[values.length - 1] ?? 0,
      min: values.reduce((low, value) => Math.min(low, value), values[0] ?? 0),
      max: values.reduce((high, value) => Math.max(high, value), values[0] ?? 0),
    };
  }
}

export const TREND_PERCENTILES = [90, 95, 99] as const;

export function metricNamed(name: string): Metric | undefined {
  return registry.get(name);
}

export function allMetrics(): Metric[] {
  return [...registry.values()];
}

// The metrics every run has, as k6 names them.
export const builtin = {
  httpReqs: new Counter('http_reqs'),
  httpReqDuration: new Trend('http_req_duration', true),
  httpReqFailed: new Rate('http_req_failed'),
  iterations: new Counter('iterations'),
  iterationDuration: new Trend('iteration_duration', true),
  droppedIterations: new Counter('dropped_iterations'),
  /** Iterations that threw (k6 logs these; here they are counted so a threshold can hold them at zero). */
  iterationErrors: new Counter('iteration_errors'),
  checks: new Rate('checks'),
  vus: new Gauge('vus'),
} as const;
