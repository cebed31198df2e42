#!/usr/bin/env node
// Benchmark: flow delay timers in the real flow service. BENCH_ITEMS runs (default 1,000,000) are
// parked on a delay, all due within BENCH_WINDOW_S seconds (default 60), their next step an exit;
// one flow process works them (the run loop of services/flow/src/runs.ts on @herald/workloop);
// halfway through the window it is killed with SIGKILL and a replacement started. Reported:
// timers fired per second per process (the busiest seconds, and sustained over the run), lateness
// (fired - due) p50, p99 and max, and the check that every run fired exactly once (a trigger in the
// benchmark's own database records each run leaving `waiting`: none lost across the kill, none twice).
// It also counts executions: every claim of a run (a run claimed is a run worked), so a run worked
// twice shows even when its second working changes nothing. A run may be claimed again only when
// its first claim died with the killed process; any other second claim is counted "worked twice".
//
//   npm run bench:flow          (infra must be up, or this runs `deploy/infra.sh up`)
//
// Settings: BENCH_ITEMS, BENCH_WINDOW_S, BENCH_LEAD_S (seconds from scheduling to the first due
// run: 20, plus a second per 20,000 runs for writing them), BENCH_BATCH (runs per claim, 1000),
// BENCH_LEASE_MS (the claim's lease, 10000).
import { connectDatabase, createDatabase, createKafkaNamespace, freePort, infrastructureEnv } from '@herald/testkit';

import { atCleanup, infraEnv, intEnv, log, runBench } from './lib/bench.js';
import { backgroundLoad, cpuSeconds, startProcess, type BenchProcess } from './lib/processes.js';
import { recordRun } from './lib/record.js';

const items = intEnv('BENCH_ITEMS', 1_000_000);
const settings = {
  items,
  windowS: intEnv('BENCH_WINDOW_S', 60),
  // Writing a million runs takes about 20 s on 2 busy cores.
  leadS: intEnv('BENCH_LEAD_S', 20 + Math.ceil(items / 20_000)),
  batch: intEnv('BENCH_BATCH', 1_000),
  leaseMs: intEnv('BENCH_LEASE_MS', 10_000),
};
/** After the window: how long the backlog may take before the run is called failed. */
const DRAIN_S = 180;
const HARD_DEADLINE_MS = (settings.leadS + settings.windowS + DRAIN_S + 180) * 1_000;
const FLOW_ID = 'flw_bench';

await runBench(async () => {
  // Infrastructure the environment already names (deploy/infra.sh env exported) is used as it is.
  const infra = process.env.DATABASE_URL && process.env.REDIS_URL && process.env.KAFKA_BROKERS ? infrastructureEnv() : await infraEnv();
  const idleBusy = await backgroundLoad();
  const database = await createDatabase();
  atCleanup(() => database.drop());
  const namespace = await createKafkaNamespace();
  atCleanup(() => namespace.remove());

  const startFlow = async (name: string): Promise<BenchProcess> => {
    const port = await freePort();
    return startProcess({
      name,
      entry: 'services/flow/dist/src/main.js',
      port,
      timeoutMs: 60_000,
      env: {
        ...infra,
        DATABASE_URL: database.url,
        HERALD_NAMESPACE: namespace.prefix,
        GRPC_PORT: String(port),
        LOG_LEVEL: 'warn',
        FLOW_RUN_BATCH_SIZE: String(settings.batch),
        FLOW_RUN_CONCURRENCY: String(settings.batch * 4),
        FLOW_RUN_LEASE_MS: String(settings.leaseMs),
        // Exit steps call nothing; these are never dialled.
        CAMPAIGN_GRPC_URL: '127.0.0.1:1',
        ACCOUNT_GRPC_URL: '127.0.0.1:1',
      },
    });
  };
  // The first process creates the schema (its migrations) before the runs are written.
  const first = await startFlow('flow-0');
  const db = await connectDatabase(database.url);
  atCleanup(() => db.end());
  await db.query(`CREATE TABLE flow.bench_fired (id text NOT NULL, due_at timestamptz NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`);
  // Once per statement over its transition tables (a row trigger would cost the service's
  // statements a plpgsql call per run, and be measured as the service's cost).
  await db.query(`CREATE FUNCTION flow.bench_record() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO flow.bench_fired (id, due_at)
        SELECT n.id, o.due_at FROM changed_from o JOIN changed_to n USING (id) WHERE o.state = 'waiting' AND n.state <> 'waiting';
      RETURN NULL;
    END $$`);
  await db.query(
    `CREATE TRIGGER bench_fired AFTER UPDATE ON flow.flow_runs REFERENCING OLD TABLE AS changed_from NEW TABLE AS changed_to FOR EACH STATEMENT EXECUTE FUNCTION flow.bench_record()`,
  );
  // Every claim of a run (the work loop sets a new claim id on each): the executions.
  await db.query(`CREATE TABLE flow.bench_claims (id text NOT NULL, claim uuid NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`);
  await db.query(`CREATE FUNCTION flow.bench_claimed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO flow.bench_claims (id, claim)
        SELECT n.id, n.claim FROM changed_from o JOIN changed_to n USING (id) WHERE n.claim IS NOT NULL AND n.claim IS DISTINCT FROM o.claim;
      RETURN NULL;
    END $$`);
  await db.query(
    `CREATE TRIGGER bench_claimed AFTER UPDATE ON flow.flow_runs REFERENCING OLD TABLE AS changed_from NEW TABLE AS changed_to FOR EACH STATEMENT EXECUTE FUNCTION flow.bench_claimed()`,
  );
  await db.query(
    `INSERT INTO flow.flows (id, workspace_id, site_id, name, trigger_type, status, execution_count) VALUES ($1, 'ws_bench', 'site_bench', 'bench', 'subscription', 'active', $2)`,
    [FLOW_ID, settings.items],
  );
  await db.query(`INSERT INTO flow.flow_versions (flow_id, version, steps) VALUES ($1, 1, $2)`, [
    FLOW_ID,
    JSON.stringify([
      { id: 'stp_delay', stepType: 'delay', config: { delay: { value: 1, unit: 'seconds' } } },
      { id: 'stp_exit', stepType: 'exit', config: {} },
    ]),
  ]);
  // Scheduled from a fixed start, so the time the insert takes does not move the due times.
  const start = Date.now() + settings.leadS * 1_000;
  log(`scheduling ${settings.items} runs parked on a delay, due between +${settings.leadS} s and +${settings.leadS + settings.windowS} s`);
  await db.query(
    `INSERT INTO flow.flow_runs (id, flow_id, version, workspace_id, site_id, subscriber_id, trigger_type, trigger_event_id, state, step_index, due_at, namespace)
     SELECT 'run_' || n, $4, 1, 'ws_bench', 'site_bench', 'sub_' || n, 'subscription', n::text, 'waiting', 1,
            to_timestamp(($2::double precision + (n - 1) * $3::double precision / $1) / 1000), $5
       FROM generate_series(1, $1::bigint) AS n`,
    [settings.items, start, settings.windowS * 1_000, FLOW_ID, namespace.prefix],
  );
  await db.query(`ANALYZE flow.flow_runs`);
  if (Date.now() > start) throw new Error(`scheduling took longer than BENCH_LEAD_S (${settings.leadS} s); raise it`);

  await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + (settings.windowS * 1_000) / 2 - Date.now())));
  log('SIGKILL of the flow process halfway through the window; starting a replacement');
  const firstCpuS = cpuSeconds(first.pid);
  first.child.kill('SIGKILL');
  await first.exited;
  const killedAt = Date.now();
  const replacement = await startFlow('flow-1');
  log(`replacement serving ${((Date.now() - killedAt) / 1_000).toFixed(1)} s after the kill`);

  const deadline = start + (settings.windowS + DRAIN_S) * 1_000;
  // Whether any run still waits: one probe of the due index (a count would scan the table every second beside the process measured).
  for (;;) {
    const { rows } = await db.query(`SELECT 1 FROM flow.flow_runs WHERE due_at IS NOT NULL AND namespace = $1 LIMIT 1`, [namespace.prefix]);
    if (rows.length === 0) break;
    if (Date.now() > deadline) {
      const { rows: left } = await db.query<{ left: number }>(`SELECT count(*)::int AS left FROM flow.flow_runs WHERE state = 'waiting'`);
      throw new Error(`${left[0]?.left} runs still waiting ${DRAIN_S} s after the window`);
    }
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
  const replacementCpuS = cpuSeconds(replacement.pid);
  await replacement.stop();

  const { rows } = await db.query<{ fired: number; distinct: number; exited: number; p50: number; p99: number; max: number; seconds: number }>(
    `SELECT count(*)::int AS fired, count(DISTINCT id)::int AS distinct,
            (SELECT count(*)::int FROM flow.flow_runs WHERE state = 'exited') AS exited,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM at - due_at)::float8 * 1000) AS p50,
            percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM at - due_at)::float8 * 1000) AS p99,
            max(extract(epoch FROM at - due_at)::float8 * 1000) AS max, extract(epoch FROM max(at) - min(at))::float8 AS seconds
       FROM flow.bench_fired`,
  );
  // The busiest seconds: what one process fires when the due runs outpace it (the backlog after the kill).
  const { rows: peaks } = await db.query<{ fired: number }>(
    `SELECT count(*)::int AS fired FROM flow.bench_fired GROUP BY date_trunc('second', at) ORDER BY 1 DESC LIMIT 5`,
  );
  // Each process's own rate: the first fired until the kill, the replacement after it.
  const { rows: spans } = await db.query<{ before: boolean; fired: number; seconds: number }>(
    `SELECT at < to_timestamp($1::double precision / 1000) AS before, count(*)::int AS fired, extract(epoch FROM max(at) - min(at))::float8 AS seconds
       FROM flow.bench_fired GROUP BY 1 ORDER BY 1 DESC`,
    [killedAt],
  );
  // Executions: the claims worked. A run claimed more than once is legitimate only when all its
  // claims but the last were made by the killed process (before the kill) and the last after it.
  const { rows: claimRows } = await db.query<{ executions: number; reclaimed: number; workedTwice: number }>(
    `WITH per_run AS (
       SELECT id, count(*) AS claims,
              count(*) FILTER (WHERE at < to_timestamp($1::double precision / 1000)) AS before_kill,
              count(*) FILTER (WHERE at >= to_timestamp($1::double precision / 1000)) AS after_kill
         FROM flow.bench_claims GROUP BY id)
     SELECT coalesce(sum(claims), 0)::int AS executions,
            count(*) FILTER (WHERE claims > 1)::int AS reclaimed,
            count(*) FILTER (WHERE before_kill > 1 OR after_kill > 1)::int AS "workedTwice"
       FROM per_run`,
    [killedAt],
  );
  const claims = claimRows[0] ?? { executions: 0, reclaimed: 0, workedTwice: 0 };
  const result = rows[0] as { fired: number; distinct: number; exited: number; p50: number; p99: number; max: number; seconds: number };
  const twice = result.fired - result.distinct + claims.workedTwice;
  const lost = settings.items - result.exited;
  const ms = (value: number) => `${Math.round(value)} ms`;
  console.log(`\n${settings.items} flow runs parked on a delay, due within ${settings.windowS} s; one flow process, killed (SIGKILL) halfway and replaced; batch ${settings.batch}, lease ${settings.leaseMs} ms`);
  console.log(`fired/s/process: sustained ${Math.round(result.fired / Math.max(0.001, result.seconds))} (over ${result.seconds.toFixed(1)} s), busiest seconds ${peaks.map((peak) => peak.fired).join(', ')}`);
  for (const span of spans) {
    const cpu = span.before ? firstCpuS : replacementCpuS;
    console.log(
      `  ${span.before ? 'first process, until the kill' : 'replacement, after the kill'}: ${span.fired} fired in ${span.seconds.toFixed(1)} s (${Math.round(span.fired / Math.max(0.001, span.seconds))}/s)` +
        (cpu === null ? '' : `, ${cpu.toFixed(1)} CPU s in the flow process (${((cpu * 1_000_000) / Math.max(1, span.fired)).toFixed(0)} µs per timer, start-up included)`),
    );
  }
  console.log(`lateness: p50 ${ms(result.p50)}, p99 ${ms(result.p99)}, max ${ms(result.max)}`);
  console.log(`fired ${result.distinct}, twice ${twice}, lost ${lost}`);
  console.log(
    `executions (claims worked): ${claims.executions} for ${settings.items} runs; ${claims.reclaimed} claimed again after the killed process's claim died, ${claims.workedTwice} claimed twice by live processes`,
  );
  const recorded = recordRun(
    'flow',
    [
      { name: 'fired/s, sustained', value: Math.round(result.fired / Math.max(0.001, result.seconds)), unit: '/s', better: 'higher' },
      { name: 'lateness p50', value: Math.round(result.p50), unit: 'ms', better: 'lower' },
      { name: 'lateness p99', value: Math.round(result.p99), unit: 'ms', better: 'lower' },
      { name: 'fired twice', value: twice, unit: 'runs', better: 'lower' },
      { name: 'executions', value: claims.executions, unit: 'claims', better: 'lower' },
      { name: 'reclaimed after the kill', value: claims.reclaimed, unit: 'runs', better: 'lower' },
      { name: 'lost', value: lost, unit: 'runs', better: 'lower' },
    ],
    settings,
    idleBusy,
  );
  if (recorded) log(`recorded in ${recorded}`);
  // Every execution accounted for: one per run, plus one per run whose first claim died with the kill.
  const accounted = claims.executions === settings.items + claims.reclaimed;
  if (!accounted) log(`executions ${claims.executions} != runs ${settings.items} + reclaimed ${claims.reclaimed}`);
  return twice === 0 && lost === 0 && accounted && result.distinct === settings.items ? 0 : 1;
}, HARD_DEADLINE_MS);
