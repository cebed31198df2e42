// A real Prometheus server (Debian's, unpacked into .local/bin by deploy/tools.sh) scraping a set of
// targets on this machine, each with the labels the chart's PodMonitor gives a pod (namespace, pod,
// component), and its HTTP API's range queries.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';

import { eventually, freePort, repoRoot } from '@herald/testkit';

export interface Target {
  /** host:port of its /metrics. */
  address: string;
  labels: { namespace: string; pod: string; component: string };
}

/** One series of a range query: its labels and [unix seconds, value] points (NaN where Prometheus says so). */
export interface Series {
  metric: Record<string, string>;
  values: Array<[number, number]>;
}

export interface Prometheus {
  url: string;
  queryRange(expr: string, start: number, end: number, stepSeconds: number): Promise<Series[]>;
  /** Resolves once every target has been scraped successfully. */
  targetsUp(count: number): Promise<void>;
  stop(): Promise<void>;
}

/** PROMETHEUS_BIN, or .local/bin/prometheus of this checkout (deploy/tools.sh puts it there). */
export function prometheusPath(): string {
  const path = process.env.PROMETHEUS_BIN || join(repoRoot, '.local', 'bin', 'prometheus');
  if (!existsSync(path)) throw new Error(`${path} is missing: run deploy/tools.sh (it unpacks Debian's prometheus package), or set PROMETHEUS_BIN.`);
  return path;
}

/** YAML by hand: JSON is YAML, so every value is written as a JSON string. */
function config(targets: readonly Target[], scrapeSeconds: number): string {
  return JSON.stringify({
    global: { scrape_interval: `${scrapeSeconds}s`, scrape_timeout: `${scrapeSeconds}s`, evaluation_interval: `${scrapeSeconds}s` },
    scrape_configs: [{ job_name: 'herald', metrics_path: '/metrics', static_configs: targets.map(({ address, labels }) => ({ targets: [address], labels })) }],
  });
}

export async function startPrometheus(targets: readonly Target[], scrapeSeconds: number): Promise<Prometheus> {
  const dir = await mkdtemp(join(os.tmpdir(), 'herald-prometheus-'));
  const configFile = join(dir, 'prometheus.yml');
  await writeFile(configFile, config(targets, scrapeSeconds));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    prometheusPath(),
    [`--config.file=${configFile}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-8_000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const api = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await response.json()) as { status: string; data: T; error?: string };
    if (response.status !== 200 || body.status !== 'success') throw new Error(`Prometheus ${path} answered ${response.status}: ${body.error ?? JSON.stringify(body)}`);
    return body.data;
  };
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await eventually(
      'Prometheus ready',
      () => fetch(`${url}/-/ready`).then((response) => response.status, () => 0),
      (status) => status === 200 || child.exitCode !== null,
      30_000,
    );
    if (child.exitCode !== null) throw new Error(`Prometheus exited (${child.exitCode}): ${stderr}`);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url,
    async queryRange(expr, start, end, stepSeconds) {
      const params = new URLSearchParams({ query: expr, start: String(start), end: String(end), step: String(stepSeconds) });
      const data = await api<{ resultType: string; result: Array<{ metric: Record<string, string>; values: Array<[number, string]> }> }>(`/api/v1/query_range?${params}`);
      return data.result.map(({ metric, values }) => ({ metric, values: values.map(([at, value]): [number, number] => [at, Number(value)]) }));
    },
    async targetsUp(count) {
      await eventually(
        `${count} targets scraped`,
        () => api<{ activeTargets: Array<{ health: string }> }>('/api/v1/targets?state=active'),
        (data) => data.activeTargets.filter((target) => target.health === 'up').length === count,
        30_000,
      );
    },
    stop,
  };
}
