import { getMetricsFromIterator, type PromData, type PromHistogramData, type PromMetrics } from 'prom2javascript';

/**
 * Scrapes a process's /metrics over HTTP and parses the Prometheus text exposition with a real
 * parser (prom2javascript: families by TYPE, histograms grouped per label set and checked, their
 * count against the +Inf bucket); a status other than 200 throws, and so does a process started
 * without a metrics endpoint (`metricsUrl` undefined).
 */
export async function scrapeMetrics(metricsUrl: string | undefined): Promise<PromMetrics> {
  if (metricsUrl === undefined) throw new Error('the process was started without a METRICS_PORT: it serves no metrics');
  const response = await fetch(metricsUrl);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${metricsUrl} answered ${response.status}: ${text}`);
  return getMetricsFromIterator(text.split('\n')[Symbol.iterator]());
}

const matches = (labels: Record<string, string>, wanted: Record<string, string>): boolean =>
  Object.entries(wanted).every(([key, value]) => labels[key] === value);

/** The series of a counter or gauge whose labels include `labels` (others ignored); none for a family the scrape lacks. */
export function samplesOf(metrics: PromMetrics, name: string, labels: Record<string, string> = {}): PromData[] {
  const family = metrics[name];
  if (family !== undefined && (family.type === 'histogram' || family.type === 'summary')) throw new Error(`${name} is a ${family.type}`);
  return ((family?.data ?? []) as PromData[]).filter((series) => matches(series.labels, labels));
}

/** The value of the one series of a counter or gauge with these labels; 0 when there is none (never counted). */
export function metricValue(metrics: PromMetrics, name: string, labels: Record<string, string> = {}): number {
  const found = samplesOf(metrics, name, labels);
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} series`);
  return found[0]?.value ?? 0;
}

/** The series of a histogram whose labels include `labels`. */
export function histogramsOf(metrics: PromMetrics, name: string, labels: Record<string, string> = {}): PromHistogramData[] {
  const family = metrics[name];
  if (family !== undefined && family.type !== 'histogram') throw new Error(`${name} is a ${family.type}`);
  return ((family?.data ?? []) as PromHistogramData[]).filter((series) => matches(series.labels, labels));
}
