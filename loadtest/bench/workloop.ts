#!/usr/bin/env node
// Benchmark: the durable work loop (@herald/workloop), the primitive under the campaign scheduler,
// flow delays, webhook and push retries. BENCH_ITEMS items (default 1,000,000) are scheduled due
// evenly within BENCH_WINDOW_S seconds (default 60); BENCH_WORKERS worker processes (default 2)
// fire them; halfway through the window one worker is killed with SIGKILL and a replacement
// started. Reported per run: items fired per second per process, lateness (fired - due) p50, p99
// and max, and the check that every item fired exactly once (none lost across the kill, none
// twice). Side by side in the same run, the baseline: the shape the loop replaced (due rows locked
// in a transaction while they are worked, polled every 250 ms).
//
//   npm run bench:workloop          (infra must be up, or this runs `deploy/infra.sh up`)
//
// Settings: BENCH_ITEMS, BENCH_WINDOW_S, BENCH_WORKERS, BENCH_BATCH (rows per claim, 1000),
// BENCH_LEAD_S (seconds from scheduling to the first due item, 20), BENCH_MODES (loop,baseline).
import { randomBytes } from 'node:crypto';

import { connectDatabase, createDatabase, freePort } from '@herald/testkit';

import { atCleanup, infraEnv, intEnv, log, runBench } from './lib/bench.js';
import { backgroundLoad, startProcess, type BenchProcess } from './lib/processes.js';
import { recordRun, type Figure } from './lib/record.js';

const settings = {
  items: intEnv('BENCH_ITEMS', 1_000_000),
  windowS: intEnv('BENCH_WINDOW_S', 60),
  workers: intEnv('BENCH_WORKERS', 2),
  batch: intEnv('BENCH_BATCH', 1_000),
  leadS: intEnv('BENCH_LEAD_S', 20),
  modes: (process.env.BENCH_MODES ?? 'loop,baseline').split(',').filter((mode) => mode === 'loop' || mode === 'baseline'),
};
/** After the window: how long the backlog may take before the run is called failed. */
const DRAIN_S = 180;
const HARD_DEADLINE_MS = (settings.leadS + settings.windowS + DRAIN_S + 120) * 1_000 * settings.modes.length + 120_000;

interface RunResult {
  mode: string;
  fired: number;
  distinct: number;
  lost: number;
  perProcess: number;
  p50: number;
  p99: number;
  max: number;
  killedWorker: string;
}

async function runMode(mode: string, databaseUrl: string): Promise<RunResult> {
  const schema = `bench_${mode}_${randomBytes(3).toString('hex')}`;
  const db = await connectDatabase(databaseUrl);
  try {
    await db.query(`CREATE SCHEMA ${schema}`);
    await db.query(`CREATE TABLE ${schema}.items (id bigint PRIMARY KEY, due_at timestamptz NOT NULL, fired_at timestamptz,
      claim uuid, leased_until timestamptz, namespace text NOT NULL DEFAULT '')`);
    await db.query(`CREATE TABLE ${schema}.fired (id bigint NOT NULL, worker text NOT NULL, lateness_ms double precision NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`);
    // Scheduled from a fixed start, so the time the insert takes does not move the due times.
    const start = Date.now() + settings.leadS * 1_000;
    log(`${mode}: scheduling ${settings.items} items due between +${settings.leadS} s and +${settings.leadS + settings.windowS} s`);
    await db.query(
      `INSERT INTO ${schema}.items (id, due_at) SELECT n, to_timestamp(($2::double precision + (n - 1) * $3::double precision / $1) / 1000) FROM generate_series(1, $1::bigint) AS n`,
      [settings.items, start, settings.windowS * 1_000],
    );
    await db.query(`CREATE INDEX ON ${schema}.items (namespace, due_at) WHERE fired_at IS NULL`);
    await db.query(`ANALYZE ${schema}.items`);
    if (Date.now() > start) throw new Error(`scheduling took longer than BENCH_LEAD_S (${settings.leadS} s); raise it`);

    const startWorker = async (name: string): Promise<BenchProcess> => {
      const port = await freePort();
      return startProcess({
        name,
        entry: 'loadtest/dist/bench/workloop-worker.js',
        port,
        env: { DATABASE_URL: databaseUrl, BENCH_SCHEMA: schema, WORKER_NAME: name, WORKER_PORT: String(port), MODE: mode, BENCH_BATCH: String(settings.batch) },
      });
    };
    const workers = await Promise.all(Array.from({ length: settings.workers }, (_, index) => startWorker(`${mode}-${index}`)));
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + (settings.windowS * 1_000) / 2 - Date.now())));
    const victim = workers[0] as BenchProcess;
    log(`${mode}: SIGKILL ${victim.name} halfway through the window; starting a replacement`);
    victim.child.kill('SIGKILL');
    await victim.exited;
    workers.push(await startWorker(`${mode}-replacement`));

    const deadline = start + (settings.windowS + DRAIN_S) * 1_000;
    for (;;) {
      const { rows } = await db.query<{ left: number }>(`SELECT count(*)::int AS left FROM ${schema}.items WHERE fired_at IS NULL`);
      const left = rows[0]?.left ?? 0;
      if (left === 0) break;
      if (Date.now() > deadline) throw new Error(`${mode}: ${left} items still not fired ${DRAIN_S} s after the window`);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    await Promise.all(workers.map((worker) => worker.stop()));

    const { rows } = await db.query<{ fired: number; distinct: number; lost: number; p50: number; p99: number; max: number; seconds: number }>(
      `SELECT count(*)::int AS fired, count(DISTINCT id)::int AS distinct,
              (SELECT count(*)::int FROM ${schema}.items i WHERE NOT EXISTS (SELECT 1 FROM ${schema}.fired f WHERE f.id = i.id)) AS lost,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY lateness_ms) AS p50, percentile_cont(0.99) WITHIN GROUP (ORDER BY lateness_ms) AS p99,
              max(lateness_ms) AS max, extract(epoch FROM max(at) - min(at)) AS seconds
         FROM ${schema}.fired`,
    );
    const { rows: busiest } = await db.query<{ worker: string; fired: number; seconds: number }>(
      `SELECT worker, count(*)::int AS fired, greatest(0.001, extract(epoch FROM max(at) - min(at)))::float AS seconds FROM ${schema}.fired GROUP BY worker ORDER BY 2 DESC`,
    );
    const result = rows[0] as { fired: number; distinct: number; lost: number; p50: number; p99: number; max: number };
    // Per process: each worker's firings over the time it was firing, averaged over the workers.
    const rates = busiest.map((row) => row.fired / row.seconds);
    const perProcess = rates.reduce((sum, rate) => sum + rate, 0) / Math.max(1, rates.length);
    for (const row of busiest) log(`${mode}: ${row.worker} fired ${row.fired} in ${row.seconds.toFixed(1)} s`);
    return { mode, ...result, perProcess, killedWorker: victim.name };
  } finally {
    await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await db.end();
  }
}

await runBench(async () => {
  await infraEnv();
  const idleBusy = await backgroundLoad();
  const database = await createDatabase();
  atCleanup(() => database.drop());
  const results: RunResult[] = [];
  for (const mode of settings.modes) results.push(await runMode(mode, database.url));
  const ms = (value: number) => `${Math.round(value)} ms`.padStart(10);
  console.log(`\n${settings.items} items due within ${settings.windowS} s, ${settings.workers} worker processes, one killed (SIGKILL) halfway and replaced; batch ${settings.batch}`);
  console.log(`${'mode'.padEnd(10)}${'fired/s/process'.padStart(17)}${'lateness p50'.padStart(14)}${'p99'.padStart(10)}${'max'.padStart(10)}${'fired'.padStart(10)}${'twice'.padStart(7)}${'lost'.padStart(6)}`);
  let exitCode = 0;
  for (const result of results) {
    const twice = result.fired - result.distinct;
    console.log(`${result.mode.padEnd(10)}${Math.round(result.perProcess).toString().padStart(17)}${ms(result.p50).padStart(14)}${ms(result.p99)}${ms(result.max)}${String(result.distinct).padStart(10)}${String(twice).padStart(7)}${String(result.lost).padStart(6)}`);
    if (twice !== 0 || result.lost !== 0 || result.distinct !== settings.items) exitCode = 1;
  }
  console.log('loop: @herald/workloop (leased batch claims, no lock across work). baseline: due rows locked in a transaction while worked, polled every 250 ms.');
  const recorded = recordRun(
    'workloop',
    results.flatMap((result): Figure[] => [
      { name: `${result.mode}: fired/s/process`, value: Math.round(result.perProcess), unit: '/s', better: 'higher' },
      { name: `${result.mode}: lateness p99`, value: Math.round(result.p99), unit: 'ms', better: 'lower' },
      { name: `${result.mode}: fired twice`, value: result.fired - result.distinct, unit: 'items', better: 'lower' },
      { name: `${result.mode}: lost`, value: result.lost, unit: 'items', better: 'lower' },
    ]),
    settings,
    idleBusy,
  );
  if (recorded) log(`recorded in ${recorded}`);
  return exitCode;
}, HARD_DEADLINE_MS);
