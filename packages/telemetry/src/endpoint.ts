/** Prometheus's registered port for OpenTelemetry exporters; the chart's default too. */
export const DEFAULT_METRICS_PORT = 9464;

/**
 * Where a process serves /metrics: METRICS_HOST (default 127.0.0.1; the chart sets 0.0.0.0) and
 * METRICS_PORT (default 9464; 0 serves nothing). A malformed port fails the start, as config does.
 */
export function metricsEndpoint(env: Record<string, string | undefined>): { host: string; port: number } | undefined {
  const raw = env.METRICS_PORT ?? String(DEFAULT_METRICS_PORT);
  const port = Number(raw);
  if (!/^\d+$/.test(raw) || port > 65_535) throw new Error(`METRICS_PORT must be a port number (0: off), not "${raw}"`);
  if (port === 0) return undefined;
  return { host: env.METRICS_HOST ?? '127.0.0.1', port };
}
