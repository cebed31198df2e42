// The end-of-test summary: what handleSummary gets (and the JSON file holds), and the human text
// k6 prints: thresholds first, then checks, then every metric with its aggregates.
import { formatDuration } from './duration.js';
import { allMetrics, builtin, metricNamed, type Aggregates, type Metric } from './metrics.js';
import { RUNTIME_LABEL } from '../runtime/protocol.js';
import { parseMetricKey, type ThresholdResult } from './thresholds.js';

export interface MetricSummary {
  readonly type: Metric['type'];
  readonly contains: 'time' | 'default';
  readonly values: Aggregates;
}

export interface Summary {
  readonly scenario: string;
  readonly form: string;
  readonly baseUrl: string;
  readonly startedAt: string;
  readonly durationSeconds: number;
  /** The executor configs (without their functions). */
  readonly scenarios: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /**
   * Metrics by name; sub-metrics as name{tag:value}: every threshold's, http_req_duration per
   * endpoint, and http_reqs per endpoint and status for responses outside the expected ones.
   */
  readonly metrics: Readonly<Record<string, MetricSummary>>;
  readonly checks: ReadonlyArray<{ readonly name: string; readonly passes: number; readonly fails: number }>;
  readonly thresholds: readonly ThresholdResult[];
  /** Every threshold held. */
  readonly ok: boolean;
}

function summarise(metric: Metric, values: readonly number[], seconds: number): MetricSummary {
  return { type: metric.type, contains: metric.isTime ? 'time' : 'default', values: metric.aggregate(values, seconds) };
}

export function collectMetrics(seconds: number, thresholdKeys: readonly string[]): Record<string, MetricSummary> {
  const metrics: Record<string, MetricSummary> = {};
  for (const metric of allMetrics()) {
    if (metric.samples.length === 0) continue;
    metrics[metric.name] = summarise(metric, metric.select(), seconds);
  }
  const endpoints = new Set(builtin.httpReqDuration.samples.map((sample) => sample.tags.name).filter((name): name is string => name !== undefined));
  // Unexpected responses by endpoint and status: what a crossed http_req_failed needs explained.
  const unexpected = builtin.httpReqs.samples.filter((sample) => sample.tags.expected_response === 'false').map((sample) => `http_reqs{name:${sample.tags.name},status:${sample.tags.status}}`);
  const subKeys = new Set([...[...endpoints].map((name) => `http_req_duration{name:${name}}`), ...unexpected, ...thresholdKeys.filter((key) => key.includes('{'))]);
  for (const key of [...subKeys].sort()) {
    const { name, selector } = parseMetricKey(key);
    const metric = metricNamed(name);
    if (metric) metrics[key] = summarise(metric, metric.select(selector), seconds);
  }
  return metrics;
}

export function collectChecks(): Summary['checks'] {
  const byName = new Map<string, { passes: number; fails: number }>();
  for (const sample of builtin.checks.samples) {
    const name = sample.tags.check ?? '';
    const entry = byName.get(name) ?? { passes: 0, fails: 0 };
    if (sample.value === 1) entry.passes += 1;
    else entry.fails += 1;
    byName.set(name, entry);
  }
  return [...byName].map(([name, counts]) => ({ name, ...counts }));
}

function formatValue(summary: MetricSummary, aggregate: string, value: number): string {
  if (summary.contains === 'time' && aggregate !== 'count') return formatDuration(value);
  if (summary.type === 'rate' && aggregate === 'rate') return `${(value * 100).toFixed(2)}%`;
  if (aggregate === 'rate') return `${value.toFixed(2)}/s`;
  return Number.isInteger(value) ? String(value) : value.toFixed(2);
}

function metricLine(name: string, summary: MetricSummary): string {
  const label = `${name} `.padEnd(52, '.');
  const values = Object.entries(summary.values)
    .filter(([aggregate]) => !(summary.type === 'rate' && aggregate !== 'rate'))
    .map(([aggregate, value]) => `${aggregate}=${formatValue(summary, aggregate, value)}`);
  if (summary.type === 'rate') values.push(`✓ ${summary.values.passes} ✗ ${summary.values.fails}`);
  return `  ${label}: ${values.join(' ')}`;
}

function measured(summary: Summary, result: ThresholdResult): string {
  if (result.actual === undefined) return 'no samples';
  const aggregate = /^\s*([a-z]+(?:\([\d.]+\))?)/.exec(result.expression)?.[1] ?? '';
  const metric = summary.metrics[result.key];
  return metric ? formatValue(metric, aggregate, result.actual) : String(result.actual);
}

export function textSummary(summary: Summary): string {
  const lines = [
    `${RUNTIME_LABEL}: "${summary.scenario}" (${summary.form}) against ${summary.baseUrl}`,
    `started ${summary.startedAt}, ran ${summary.durationSeconds.toFixed(1)} s; executors: ${Object.entries(summary.scenarios)
      .map(([name, config]) => `${name} (${String(config.executor)})`)
      .join(', ')}`,
    '',
    `thresholds: ${summary.ok ? 'all held' : 'CROSSED'}`,
    ...summary.thresholds.map((result) => `  ${result.ok ? '✓' : '✗'} ${result.key} ${result.expression}  (${measured(summary, result)})`),
    '',
    'checks:',
    ...summary.checks.map((entry) => `  ${entry.fails === 0 ? '✓' : '✗'} ${entry.name}  (${entry.passes} passed, ${entry.fails} failed)`),
    '',
    'metrics:',
    ...Object.entries(summary.metrics).map(([name, metric]) => metricLine(name, metric)),
  ];
  return `${lines.join('\n')}\n`;
}
