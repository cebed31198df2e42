import { setTimeout as sleep } from 'node:timers/promises';

import { call, SERVER_API } from './http.js';
import { seedAudience, startSendingHarness, type Audience, type SendingHarness } from './sending.js';
import { within } from './within.js';
import {
  countInto,
  FAULTS,
  FLOW_ENV,
  GATEWAY_ENV,
  RECOVERY_LIMIT_MS,
  REQUEST_DEADLINE_MS,
  STEP_LIMIT_MS,
  WELCOME_STEPS,
  type FaultDrillOptions,
  type FaultDrillReport,
  type FaultRow,
} from './faults/drill.js';
import { FAULT_MODULES } from './faults/index.js';
import { startLoad, type Load } from './faults/load.js';
import { reconcile } from './faults/reconcile.js';

export { FAULTS, KAFKA_RECOVERY_BAR_MS, type FaultDrillOptions, type FaultDrillReport, type FaultName, type FaultRow } from './faults/drill.js';

/**
 * A fault drill: a steady small load against a local Herald (sends and campaigns to a known
 * audience through the strict push peer, engagement reports made with the pushes' tokens,
 * questions with a waiter, answered through the answer endpoint; faults/load.ts) while faults are
 * injected one after another (one module each under faults/: how it injects, how it proves it
 * bit, how it recovers, what it reconciles); then the reconciliation against the records
 * (faults/reconcile.ts): each subscriber got each notification once, each accepted report is
 * counted once, each question is answered once and readable, nothing is left pending or
 * unpublished, and the API answered only 2xx, expected 409s, or 503 `unavailable` within its
 * deadline. Used by `npm run faults` and by gateway/test/faults-under-load.disruptive.test.ts (it
 * stops and starts PostgreSQL, Redis and Kafka through deploy/infra.sh: only against
 * infrastructure nothing else is using).
 */

export async function runFaultDrill(options: FaultDrillOptions): Promise<FaultDrillReport> {
  const { faults = FAULTS, subscribers: audienceSize = 4, roundMs = 500, holdMs = 3_000, calmMs = 2_000, deliveryEnv = {}, settle, groups, limitMs = 600_000, log = () => undefined } = options;
  const started = Date.now();
  const deadline = started + limitMs;
  /** A step of the drill, bounded by its own limit and by what is left of the drill's. */
  const step = <T>(what: string, stepLimitMs: number, work: Promise<T>): Promise<T> => within(what, Math.min(stepLimitMs, deadline - Date.now()), work);
  log('starting Herald: two gateways, account, audience, campaign, delivery, decision, flow; a strict push peer');
  const harness = await step(
    'starting Herald',
    STEP_LIMIT_MS,
    startSendingHarness({
      decisions: true,
      services: ['flow'],
      gateways: 2,
      gatewayEnv: GATEWAY_ENV,
      env: FLOW_ENV,
      // Production's back-off base (1 s) and PUSH_MAX_ATTEMPTS (5) unless `deliveryEnv` says otherwise; the 8 s cap keeps a drill short.
      deliveryEnv: { PUSH_RETRY_BASE_MS: '1000', PUSH_RETRY_CAP_MS: '8000', ...deliveryEnv },
    }),
  );
  try {
    const audience = await step('seeding the audience', STEP_LIMIT_MS, seedAudience(harness, audienceSize, 'enterprise'));
    // The welcome flow's site is a workspace of its own: its subscribers are not the sends' audience.
    const flowSite = await step('seeding the flow site', STEP_LIMIT_MS, seedAudience(harness, 0, 'enterprise'));
    const flowId = await step('activating the welcome flow', STEP_LIMIT_MS, activateWelcomeFlow(harness, flowSite));
    log(`audience: ${audienceSize} subscribers; a welcome flow on another site`);
    return await drill(startLoad(harness, audience, { flowSite, flowId }, { faults, roundMs, holdMs, calmMs, settle, groups, log, started, step }));
  } finally {
    harness.peer.respondWith(null);
    // Bounded on its own, past the drill's limit: what a failed drill started must still be stopped.
    await within('stopping Herald', STEP_LIMIT_MS, harness.stop());
  }
}

async function activateWelcomeFlow(harness: SendingHarness, site: Audience): Promise<string> {
  const options = { method: 'POST', key: site.workspace.apiKey, timeoutMs: REQUEST_DEADLINE_MS };
  const created = await call<{ id: string }>(harness.stack.gatewayUrl, `${SERVER_API}/flows`, { ...options, body: { name: 'Welcome', triggerType: 'subscription', steps: WELCOME_STEPS } });
  if (created.status !== 201) throw new Error(`creating the welcome flow: ${created.status} ${JSON.stringify(created.body)}`);
  const activated = await call<{ status: string }>(harness.stack.gatewayUrl, `${SERVER_API}/flows/${created.body.id}/activate`, options);
  if (activated.body.status !== 'active') throw new Error(`activating the welcome flow: ${activated.status} ${JSON.stringify(activated.body)}`);
  return created.body.id;
}

/** The faults one after another, each in its window (its row), then the reconciliation. */
async function drill(load: Load): Promise<FaultDrillReport> {
  const { peer, settings, windows, runProblems } = load;
  const rows: FaultRow[] = [];
  try {
    await sleep(settings.calmMs);
    for (const name of settings.faults) {
      const fault = FAULT_MODULES[name];
      const row: FaultRow = { fault: name, requests: 0, errors: {}, recoveryMs: undefined, lost: 0, duplicated: 0, repeated: 0, problems: [] };
      const window = { row, start: Date.now(), end: Number.MAX_SAFE_INTEGER };
      windows.push(window);
      rows.push(row);
      settings.log(`fault: ${name}`);
      let injected = true;
      let gone: string | undefined;
      try {
        gone = await settings.step(`injecting ${name}`, STEP_LIMIT_MS + settings.holdMs, fault.inject(load));
      } catch (err) {
        injected = false;
        row.problems.push(`injecting the fault failed: ${(err as Error).message}`);
      }
      const restored = Date.now();
      row.recoveryMs = await settings
        .step(`recovering from ${name}`, RECOVERY_LIMIT_MS + REQUEST_DEADLINE_MS, fault.recover ? fault.recover(load, row, restored) : load.recovery(restored))
        .catch((err: unknown) => {
          row.problems.push((err as Error).message);
          return undefined;
        });
      load.gatewayDown(false);
      if (row.recoveryMs === undefined) row.problems.push(`the API did not serve end to end within ${RECOVERY_LIMIT_MS / 1_000} s`);
      window.end = Date.now();
      // What the delivery fleet met at the push service meanwhile (it retries those).
      for (const attempt of peer.attempts()) {
        if (attempt.at >= window.start && attempt.at <= window.end && attempt.status !== 201) countInto(row.errors, `push ${attempt.status}`);
      }
      if (gone !== undefined) {
        // Every fault proves it bit: the process it took is gone, and someone met its absence.
        const seen = fault.bit(load, row);
        row.proof = `${gone}; ${seen ?? 'nothing saw it'}`;
        if (seen === undefined) row.problems.push(`the fault did not bite: ${gone}, but no request or push met it`);
      }
      settings.log(`  ${row.requests} requests, recovered in ${row.recoveryMs ?? '-'} ms`);
      // Said now as well as in the report: a drill that throws later (its database gone) still shows why.
      for (const problem of row.problems) settings.log(`  problem: ${problem}`);
      // Faults piled on a Herald that did not come back would only add waits: the rest is skipped, and the drill fails naming this one.
      if (!injected || row.recoveryMs === undefined) {
        runProblems.push(`faults after ${name} not injected: it ${injected ? 'never recovered' : 'could not be injected'}`);
        break;
      }
      await sleep(settings.calmMs);
    }
  } finally {
    await load.stop();
  }
  return reconcile(load, rows);
}

/** The drill's table: fault, requests during it, errors by status, recovery time, lost, duplicated (shown twice), pushed again (same Topic). */
export function formatFaultTable(report: FaultDrillReport): string {
  const header = ['fault', 'requests', 'errors by status', 'recovery', 'lost', 'duplicated', 'pushed again', 'proof it bit'];
  const lines = report.rows.map((row) => [
    row.fault,
    String(row.requests),
    Object.entries(row.errors)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([status, count]) => `${status}: ${count}`)
      .join(', ') || '-',
    row.recoveryMs === undefined ? '-' : `${(row.recoveryMs / 1_000).toFixed(1)} s`,
    String(row.lost),
    String(row.duplicated),
    String(row.repeated),
    row.proof ?? '-',
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...lines.map((line) => (line[column] ?? '').length)));
  const render = (cells: string[]) => `| ${cells.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join(' | ')} |`;
  return [render(header), `|${widths.map((width) => '-'.repeat(width + 2)).join('|')}|`, ...lines.map(render)].join('\n');
}
