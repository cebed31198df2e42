// handleSummary for every journey: <journey>-<form>-<time>.json (the data k6 hands over) and .txt
// (thresholds, checks, metrics) in HERALD_SUMMARY_DIR, the text on stdout too. The text names what
// ran the script: k6, or the runtime that says so in the data (Herald's k6-compatible runtime).
import { FORM, SUMMARY_DIR } from './config.ts';

interface MetricData {
  readonly type: string;
  readonly contains: string;
  readonly values: Readonly<Record<string, number>>;
  readonly thresholds?: Readonly<Record<string, { readonly ok: boolean }>>;
}

interface SummaryData {
  readonly metrics: Readonly<Record<string, MetricData>>;
  readonly root_group: { readonly checks: ReadonlyArray<{ readonly name: string; readonly passes: number; readonly fails: number }> };
  readonly state: { readonly testRunDurationMs: number };
  /** Set by Herald's k6-compatible runtime; k6 itself has no such field. */
  readonly runtime?: string;
}

function duration(ms: number): string {
  if (ms < 1) return `${(ms * 1_000).toFixed(0)}µs`;
  if (ms < 1_000) return `${ms.toFixed(2)}ms`;
  return `${(ms / 1_000).toFixed(2)}s`;
}

function value(metric: MetricData, aggregate: string, number: number): string {
  if (metric.contains === 'time' && aggregate !== 'count') return duration(number);
  if (metric.type === 'rate' && aggregate === 'rate') return `${(number * 100).toFixed(2)}%`;
  if (aggregate === 'rate') return `${number.toFixed(2)}/s`;
  return Number.isInteger(number) ? String(number) : number.toFixed(2);
}

export function textSummary(journey: string, data: SummaryData): string {
  const crossed = Object.values(data.metrics).some((metric) => Object.values(metric.thresholds ?? {}).some((result) => !result.ok));
  const lines = [`${journey} (${FORM}) run by ${data.runtime ?? 'k6'}, ${(data.state.testRunDurationMs / 1_000).toFixed(1)} s`, '', `thresholds: ${crossed ? 'CROSSED' : 'all held'}`];
  for (const [name, metric] of Object.entries(data.metrics)) {
    for (const [expression, result] of Object.entries(metric.thresholds ?? {})) {
      const aggregate = /^\s*([a-z]+(?:\([\d.]+\))?)/.exec(expression)?.[1] ?? '';
      const measured = metric.values[aggregate];
      lines.push(`  ${result.ok ? '✓' : '✗'} ${name} ${expression}  (${measured === undefined ? 'no samples' : value(metric, aggregate, measured)})`);
    }
  }
  lines.push('', 'checks:');
  for (const check of data.root_group.checks) lines.push(`  ${check.fails === 0 ? '✓' : '✗'} ${check.name}  (${check.passes} passed, ${check.fails} failed)`);
  lines.push('', 'metrics:');
  for (const [name, metric] of Object.entries(data.metrics)) {
    const shown = Object.entries(metric.values).filter(([aggregate]) => !(metric.type === 'rate' && aggregate !== 'rate'));
    lines.push(`  ${`${name} `.padEnd(52, '.')}: ${shown.map(([aggregate, number]) => `${aggregate}=${value(metric, aggregate, number)}`).join(' ')}`);
  }
  return `${lines.join('\n')}\n`;
}

/** The script's handleSummary: the JSON and text files, and the text on stdout. */
export function summaryFiles(journey: string): (data: SummaryData) => Record<string, string> {
  return (data) => {
    const base = `${SUMMARY_DIR}/${journey}-${FORM}-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    const text = textSummary(journey, data);
    return { [`${base}.json`]: `${JSON.stringify(data, null, 2)}\n`, [`${base}.txt`]: text, stdout: text };
  };
}
