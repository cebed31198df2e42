// One run of a scenario file: parse the thresholds (a typo fails before any load), setup(), every
// executor at once, teardown(), then the summary through handleSummary. Exit code as k6's:
// 0 when every threshold held, 99 when one was crossed.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, join } from 'node:path';

import { ScenarioRun } from './executors.js';
import type { LoadScenario, RunEnv } from './scenario.js';
import { collectChecks, collectMetrics, textSummary, type Summary } from './summary.js';
import { evaluateThreshold, parseThresholds } from './thresholds.js';

export const THRESHOLDS_CROSSED = 99;

export interface RunResult {
  readonly summary: Summary;
  /** The files handleSummary wrote. */
  readonly written: readonly string[];
  readonly exitCode: number;
}

export async function runScenario<Data>(scenario: LoadScenario<Data>, env: RunEnv): Promise<RunResult> {
  const options = scenario.options(env.form);
  const thresholds = parseThresholds(options.thresholds);
  const data = await scenario.setup(env);
  const startedAt = new Date();
  const started = performance.now();
  await Promise.all(Object.entries(options.scenarios).map(([name, config]) => new ScenarioRun(name, config, data, env).run()));
  const seconds = (performance.now() - started) / 1_000;
  await scenario.teardown?.(data, env);
  const results = thresholds.map((threshold) => evaluateThreshold(threshold, seconds));
  const summary: Summary = {
    scenario: scenario.name,
    form: env.form,
    baseUrl: env.baseUrl,
    startedAt: startedAt.toISOString(),
    durationSeconds: seconds,
    scenarios: Object.fromEntries(Object.entries(options.scenarios).map(([name, { exec: _exec, initVu: _initVu, ...config }]) => [name, config])),
    metrics: collectMetrics(seconds, Object.keys(options.thresholds)),
    checks: collectChecks(),
    thresholds: results,
    ok: results.every((result) => result.ok),
  };
  const outputs = (await scenario.handleSummary?.(summary, env)) ?? { stdout: textSummary(summary) };
  const written: string[] = [];
  for (const [target, content] of Object.entries(outputs)) {
    if (target === 'stdout') {
      process.stdout.write(content);
      continue;
    }
    const path = isAbsolute(target) ? target : join(env.summaryDir, target);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, content);
    written.push(path);
  }
  return { summary, written, exitCode: summary.ok ? 0 : THRESHOLDS_CROSSED };
}
