// The benchmark record: what a run writes with BENCH_RECORD=1, and what `bench:compare` makes of
// the records (the latest beside the best earlier run of the same machine model, >10% worse flagged).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { recordRun, type Figure, type RunRecord } from '../bench/lib/record.js';

const run = promisify(execFile);
const COMPARE = fileURLToPath(new URL('../bench/compare.js', import.meta.url));
let dir: string;

before(async () => {
  dir = await mkdtemp(join(os.tmpdir(), 'herald-bench-record-'));
  process.env.BENCH_RESULTS_DIR = dir;
});
after(async () => {
  delete process.env.BENCH_RESULTS_DIR;
  delete process.env.BENCH_RECORD;
  await rm(dir, { recursive: true, force: true });
});

async function compare(bench?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(process.execPath, [COMPARE, ...(bench ? [bench] : [])], { env: { ...process.env, BENCH_RESULTS_DIR: dir } }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
  );
}

const figures = (lastPush: number, rate: number): Figure[] => [
  { name: 'last push accepted', value: lastPush, unit: 's', better: 'lower' },
  { name: 'pushes/s', value: rate, unit: '/s', better: 'higher' },
];

/** A record as another machine (or an earlier day) wrote it. */
async function writeRecord(name: string, recordedAt: string, model: string, values: Figure[]): Promise<void> {
  const record: RunRecord = {
    bench: 'send',
    recordedAt,
    commit: 'abc123def456',
    dirty: false,
    machine: { cores: 2, model, memoryGiB: 24, node: 'v24.21.0', os: 'linux', busyBefore: 0.02, loadDuring: 1.5 },
    settings: {},
    figures: values,
  };
  await mkdir(join(dir, 'send'), { recursive: true });
  await writeFile(join(dir, 'send', name), JSON.stringify(record));
}

test('without BENCH_RECORD=1 nothing is written', async () => {
  delete process.env.BENCH_RECORD;
  assert.equal(recordRun('send', figures(100, 9_000), {}, 0.01), null);
  assert.deepEqual(await readdir(dir), []);
});

test('a recorded run holds its figures, settings, commit and machine, in loadtest/results/<bench>/<time>-<commit>.json', async () => {
  process.env.BENCH_RECORD = '1';
  const path = recordRun('send', figures(118.5, 8_500), { subscribers: 1_000_000 }, 0.031);
  delete process.env.BENCH_RECORD;
  assert.ok(path);
  assert.match(path, new RegExp(`^${dir}/send/\\d{4}-\\d{2}-\\d{2}T\\d{6}-[0-9a-f]{12}\\.json$`));
  const record = JSON.parse(await readFile(path, 'utf8')) as RunRecord;
  assert.deepEqual(
    { bench: record.bench, figures: record.figures, settings: record.settings, busyBefore: record.machine.busyBefore, cores: record.machine.cores, model: record.machine.model },
    { bench: 'send', figures: figures(118.5, 8_500), settings: { subscribers: 1_000_000 }, busyBefore: 0.031, cores: os.availableParallelism(), model: os.cpus()[0]?.model.trim() },
  );
  assert.match(record.commit, /^[0-9a-f]{12}$/);
  assert.equal(typeof record.dirty, 'boolean');
  await rm(path);
});

test('compare: the latest run beside the best earlier one of the same machine; over 10% worse is flagged and exits 1', async () => {
  await writeRecord('a.json', '2026-11-01T10:00:00.000Z', 'Test CPU', figures(110, 9_000));
  await writeRecord('b.json', '2026-11-02T10:00:00.000Z', 'Test CPU', figures(120, 10_000));
  // Another machine model's far better run is not the yardstick.
  await writeRecord('c.json', '2026-11-03T10:00:00.000Z', 'Big CPU', figures(20, 90_000));
  await writeRecord('d.json', '2026-11-04T10:00:00.000Z', 'Test CPU', figures(125, 9_500));
  const worse = await compare('send');
  assert.equal(worse.code, 1);
  assert.deepEqual(worse.stdout.split('\n').slice(2), [
    'compared with the best of 2 earlier run(s) on the same machine model',
    '',
    'figure                                            latest        best  worse by',
    'last push accepted (s)                               125         110    +13.6%  <- more than 10% worse than the best',
    'pushes/s (/s)                                       9500       10000     +5.0%',
    '',
    '1 figure(s) more than 10% worse than the best recorded run',
    '',
  ]);

  await writeRecord('e.json', '2026-11-05T10:00:00.000Z', 'Test CPU', figures(105, 10_500));
  const better = await compare('send');
  assert.equal(better.code, 0);
  assert.deepEqual(better.stdout.split('\n').slice(5, 9), [
    'last push accepted (s)                               105         110     -4.5%',
    'pushes/s (/s)                                      10500       10000     -5.0%',
    '',
    'no figure more than 10% worse than the best recorded run',
  ]);
});

test('compare without a bench, or of a bench never recorded, says so and exits 2', async () => {
  const none = await compare();
  assert.deepEqual([none.code, none.stderr], [2, 'usage: npm run bench:compare -- <bench>\nrecorded: send\n']);
  const unknown = await compare('approval');
  assert.deepEqual([unknown.code, unknown.stderr], [2, `no recorded run of approval in ${dir} (run it with BENCH_RECORD=1)\n`]);
});
