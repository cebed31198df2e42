// npm run bench:compare -- <bench>: the latest recorded run of a benchmark beside the best earlier
// run on the same machine model, one line per figure; a figure more than 10% worse is flagged and
// the exit code is 1, so a pipeline can stop on it. Runs are recorded with BENCH_RECORD=1.
import { readdirSync } from 'node:fs';

import { compareLatest, readRuns, REGRESSION_SHARE, resultsDir } from './lib/record.js';

function recordedBenches(): string[] {
  try {
    return readdirSync(resultsDir(), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name)
      .sort();
  } catch {
    return [];
  }
}

const number = (value: number): string => (Number.isInteger(value) ? String(value) : value.toFixed(Math.abs(value) >= 100 ? 1 : 3));

function main(bench: string | undefined): number {
  if (!bench) {
    process.stderr.write(`usage: npm run bench:compare -- <bench>\nrecorded: ${recordedBenches().join(', ') || 'none yet (run a benchmark with BENCH_RECORD=1)'}\n`);
    return 2;
  }
  const comparison = compareLatest(readRuns(bench));
  if (!comparison) {
    process.stderr.write(`no recorded run of ${bench} in ${resultsDir()} (run it with BENCH_RECORD=1)\n`);
    return 2;
  }
  const { latest, earlier, figures } = comparison;
  const lines = [
    `${bench}: latest run ${latest.recordedAt}, commit ${latest.commit}${latest.dirty ? ' (uncommitted changes)' : ''}`,
    `machine: ${latest.machine.cores} cores, ${latest.machine.model}; busy before ${latest.machine.busyBefore === null ? 'unknown' : `${Math.round(latest.machine.busyBefore * 100)}%`}, load during ${latest.machine.loadDuring}`,
    `compared with the best of ${earlier} earlier run(s) on the same machine model`,
    '',
    `${'figure'.padEnd(44)}${'latest'.padStart(12)}${'best'.padStart(12)}${'worse by'.padStart(10)}`,
  ];
  for (const figure of figures) {
    const change = figure.worse === null ? '' : figure.worse === Infinity ? 'worse' : `${figure.worse > 0 ? '+' : ''}${(figure.worse * 100).toFixed(1)}%`;
    lines.push(
      `${`${figure.name} (${figure.unit})`.padEnd(44)}${number(figure.latest).padStart(12)}${(figure.best === null ? '-' : number(figure.best)).padStart(12)}${change.padStart(10)}${figure.flagged ? `  <- more than ${REGRESSION_SHARE * 100}% worse than the best` : ''}`,
    );
  }
  const flagged = figures.filter((figure) => figure.flagged).length;
  lines.push('', flagged === 0 ? 'no figure more than 10% worse than the best recorded run' : `${flagged} figure(s) more than 10% worse than the best recorded run`);
  console.log(lines.join('\n'));
  return flagged === 0 ? 0 : 1;
}

process.exitCode = main(process.argv[2]);
