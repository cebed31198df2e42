#!/usr/bin/env node
// Faults under load, reconciled: a steady small load against a local Herald this script starts
// (sends and campaigns to a known audience through the strict push peer, engagement reports made
// with the pushes' tokens, questions with a waiter answered through the answer endpoint,
// subscriptions to another site that start runs of its welcome flow) while faults come one after
// another: kill -9 of a delivery worker, of the campaign service, of the flow service, of a
// gateway; PostgreSQL, Kafka and Redis stopped and started; the push service answering 429, 503,
// and resetting streams. Then every notification, report, answer and run is reconciled against the
// records, and a table is printed: fault, requests during it, errors by status, recovery, lost,
// duplicated. Exit code 0 only with nothing lost, nothing duplicated, and no broken promise.
//
//   npm run faults                      (all faults, about 3 minutes)
//   npm run faults -- push-503 postgres-restart     (only these, in this order)
//
// It STOPS AND STARTS the PostgreSQL, Redis and Kafka that `deploy/infra.sh` runs for this
// checkout (with the HERALD_*_PORT variables of this shell): never run it against servers other
// work is using. Settings: FAULTS_HOLD_S (3, how long each fault lasts), FAULTS_CALM_S (2, load
// without a fault between two), FAULTS_ROUND_MS (500), FAULTS_SUBSCRIBERS (4), PUSH_MAX_ATTEMPTS
// (the delivery fleet's, 5 as shipped).
import { consumers, QUESTION_PIPELINE } from '@herald/bus';
import { FAULTS, formatFaultTable, runFaultDrill, type FaultName } from '@herald/testkit';

import { infraEnv, intEnv, log, reportHead, runBench } from '../bench/lib/bench.js';

/** Every loop of the drill is bounded; this is the last resort. */
const HARD_DEADLINE_MS = 30 * 60_000;

function chosenFaults(args: string[]): FaultName[] {
  const known: readonly string[] = FAULTS;
  const unknown = args.filter((arg) => !known.includes(arg));
  if (unknown.length > 0) throw new Error(`unknown fault(s) ${unknown.join(', ')}; known: ${FAULTS.join(', ')}`);
  return args.length > 0 ? (args as FaultName[]) : [...FAULTS];
}

async function main(): Promise<number> {
  const faults = chosenFaults(process.argv.slice(2));
  await infraEnv();
  const report = await runFaultDrill({
    faults,
    holdMs: intEnv('FAULTS_HOLD_S', 3) * 1_000,
    calmMs: intEnv('FAULTS_CALM_S', 2) * 1_000,
    roundMs: intEnv('FAULTS_ROUND_MS', 500),
    subscribers: intEnv('FAULTS_SUBSCRIBERS', 4),
    // Production's PUSH_MAX_ATTEMPTS unless told otherwise: the table shows what a deployment as shipped loses.
    ...(process.env.PUSH_MAX_ATTEMPTS ? { deliveryEnv: { PUSH_MAX_ATTEMPTS: process.env.PUSH_MAX_ATTEMPTS } } : {}),
    settle: [...QUESTION_PIPELINE, consumers.campaignEngagement, consumers.flowTriggers],
    groups: Object.values(consumers),
    log,
  });
  const { totals } = report;
  console.log('');
  for (const line of reportHead('Faults under load, reconciled', null)) console.log(line);
  console.log(
    `load: ${totals.requests} requests; ${totals.notifications} notifications (${totals.pushes} pushes accepted by the peer), ` +
      `${totals.reports} distinct engagement reports accepted, ${totals.questions} questions answered (${totals.questionPushes} pushed) ` +
      `(${totals.wokenWaiters} waiters woken, ${totals.readAfterwards} read it afterwards); ${(report.durationMs / 1_000).toFixed(0)} s`,
  );
  console.log('');
  console.log(formatFaultTable(report));
  console.log('');
  if (report.problems.length === 0) {
    console.log('every notification reached each subscriber once, every accepted report counted once, every answer applied once and readable; no 5xx but 503, no hang');
    return 0;
  }
  console.log(`${report.problems.length} problem(s):`);
  for (const problem of report.problems) console.log(`  - ${problem}`);
  return 1;
}

void runBench(main, HARD_DEADLINE_MS);
