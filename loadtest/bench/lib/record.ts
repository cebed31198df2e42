// The benchmark record: with BENCH_RECORD=1 a benchmark writes its figures, its settings and the
// machine it ran on to loadtest/results/<bench>/<date>-<commit>.json (committed), and
// `npm run bench:compare -- <bench>` reads them back. A figure is only ever compared with runs of
// the same machine model: a 2-core laptop's figures say nothing about a 64-core server's.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';

import { repoRoot } from '@herald/testkit';

/** One measured figure; `better` says which way is an improvement. */
export interface Figure {
  name: string;
  value: number;
  unit: string;
  better: 'lower' | 'higher';
}

export interface RunRecord {
  bench: string;
  recordedAt: string;
  commit: string;
  /** Whether the working tree had uncommitted changes: the commit alone does not say what ran. */
  dirty: boolean;
  machine: {
    cores: number;
    model: string;
    memoryGiB: number;
    node: string;
    os: string;
    /** Share of the machine busy in the second before the run (null: unknown). */
    busyBefore: number | null;
    /** The 1-minute load average when the figures were taken. */
    loadDuring: number;
  };
  settings: Record<string, unknown>;
  figures: Figure[];
}

/** Where the records live: BENCH_RESULTS_DIR, or loadtest/results in the checkout. */
export const resultsDir = (): string => process.env.BENCH_RESULTS_DIR ?? join(repoRoot, 'loadtest', 'results');

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '';
  }
}

/**
 * Writes the run's record when BENCH_RECORD=1 and returns its path (null when not asked). Call it
 * once the figures are known, while the load they were taken under is still in the load average.
 */
export function recordRun(bench: string, figures: Figure[], settings: Record<string, unknown>, busyBefore: number | null): string | null {
  if (process.env.BENCH_RECORD !== '1') return null;
  const recordedAt = new Date().toISOString();
  const commit = git(['rev-parse', '--short=12', 'HEAD']) || 'unknown';
  const record: RunRecord = {
    bench,
    recordedAt,
    commit,
    dirty: git(['status', '--porcelain', '--untracked-files=no']) !== '',
    machine: {
      cores: os.availableParallelism(),
      model: os.cpus()[0]?.model.trim() ?? 'unknown',
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      os: `${os.platform()} ${os.release()}`,
      busyBefore: busyBefore === null ? null : Number(busyBefore.toFixed(3)),
      loadDuring: Number((os.loadavg()[0] ?? 0).toFixed(2)),
    },
    settings,
    figures,
  };
  const dir = join(resultsDir(), bench);
  mkdirSync(dir, { recursive: true });
  // The time as well as the date: two runs of a day on one commit are both kept.
  const path = join(dir, `${recordedAt.slice(0, 19).replace(/:/g, '')}-${commit}.json`);
  writeFileSync(path, `${JSON.stringify(record, null, 2)}\n`);
  return path;
}

/** Every record of `bench`, oldest first. */
export function readRuns(bench: string): RunRecord[] {
  const dir = join(resultsDir(), bench);
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => name.endsWith('.json'));
  } catch {
    return [];
  }
  return names
    .map((name) => JSON.parse(readFileSync(join(dir, name), 'utf8')) as RunRecord)
    .sort((a, b) => a.recordedAt.localeCompare(b.recordedAt));
}

export interface Comparison {
  name: string;
  unit: string;
  latest: number;
  /** The best of the earlier runs on the same machine model (null: none has this figure). */
  best: number | null;
  /** How much worse than the best the latest is, as a share (negative: better). */
  worse: number | null;
  flagged: boolean;
}

/** How much worse than the best recorded run a figure may be before it is flagged. */
export const REGRESSION_SHARE = 0.1;

/** The latest run's figures beside the best earlier run of the same machine model, each flagged when over 10% worse. */
export function compareLatest(runs: RunRecord[]): { latest: RunRecord; earlier: number; figures: Comparison[] } | null {
  const latest = runs.at(-1);
  if (!latest) return null;
  const peers = runs.slice(0, -1).filter((run) => run.machine.model === latest.machine.model && run.machine.cores === latest.machine.cores);
  const figures = latest.figures.map((figure): Comparison => {
    const values = peers.flatMap((run) => run.figures.filter((other) => other.name === figure.name).map((other) => other.value));
    if (values.length === 0) return { name: figure.name, unit: figure.unit, latest: figure.value, best: null, worse: null, flagged: false };
    const best = figure.better === 'lower' ? Math.min(...values) : Math.max(...values);
    const worse =
      figure.better === 'lower' ? (best === 0 ? (figure.value > 0 ? Infinity : 0) : figure.value / best - 1) : best === 0 ? 0 : 1 - figure.value / best;
    return { name: figure.name, unit: figure.unit, latest: figure.value, best, worse, flagged: worse > REGRESSION_SHARE };
  });
  return { latest, earlier: peers.length, figures };
}

/** The figures of a closed-loop load row: requests per second, p50 and p99. */
export const loadFigures = (name: string, measured: { rps: number; p50: number; p99: number }): Figure[] => [
  { name: `${name} req/s`, value: Math.round(measured.rps), unit: '/s', better: 'higher' },
  { name: `${name} p50`, value: Number(measured.p50.toFixed(2)), unit: 'ms', better: 'lower' },
  { name: `${name} p99`, value: Number(measured.p99.toFixed(2)), unit: 'ms', better: 'lower' },
];
