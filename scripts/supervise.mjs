// Runs every Herald process on this machine, as the component registry (the Helm chart's
// `components`) lists them: the services on loopback gRPC at the chart's ports, the gateway on
// http://localhost:8080 (PORT). Like the cluster, a process that exits is started again with a
// capped backoff, and the others keep running; Ctrl-C (or SIGTERM) drains them all. The processes
// are started by @herald/launcher, as the test stacks and the benchmarks start theirs; each ends at
// once if this supervisor is killed.
//
// SUPERVISE_PORTS (comma-separated, in registry order) replaces the chart's ports: a second local
// stack, or a test of this script. Each process serves Prometheus metrics on its own port, from
// METRICS_PORT (default 9464) on, in registry order; METRICS_PORT=0 serves none.
import { randomBytes } from 'node:crypto';

import { readComponents } from '@herald/components';
import { launchComponent } from '@herald/launcher';

/**
 * Restart n waits between half of and all of 0.5 s, 1 s, 2 s, ... 30 s (equal jitter: a process
 * that keeps crashing is never started again at once).
 */
const RESTART = {
  backoff: { baseMs: 500, capMs: 30_000, jitter: 'equal' },
  /** A process that ran this long before exiting was healthy: its next restart starts the backoff over. */
  healthyAfterMs: 60_000,
};

const components = readComponents();
const given = process.env.SUPERVISE_PORTS ? process.env.SUPERVISE_PORTS.split(',').map(Number) : undefined;
if (given && (given.length !== components.length || given.some((port) => !Number.isInteger(port) || port < 1 || port > 65_535))) {
  throw new Error(`SUPERVISE_PORTS needs ${components.length} ports, for ${components.map((component) => component.name).join(', ')}`);
}
const ports = Object.fromEntries(components.map((component, index) => [component.name, given?.[index] ?? component.port]));
if (!given && process.env.PORT) ports.gateway = Number(process.env.PORT);
const firstMetricsPort = Number(process.env.METRICS_PORT ?? 9464);
const metricsPorts = Object.fromEntries(components.map((component, index) => [component.name, firstMetricsPort === 0 ? 0 : firstMetricsPort + index]));

// Engagement tokens in pushes are signed by the delivery fleet and checked by the gateway: one
// secret for both, made per run unless set (pushes shown before a restart then report nothing).
const engagementTokenSecret = process.env.ENGAGEMENT_TOKEN_SECRET ?? randomBytes(32).toString('base64url');
// Answer links are signed with this secret; a local run makes a new one unless one is set, so links
// from an earlier run stop working (the decision service keeps it across its own restarts).
const localEnv = {
  decision: { ANSWER_TOKEN_SECRET: process.env.ANSWER_TOKEN_SECRET ?? randomBytes(32).toString('base64url') },
  delivery: { ENGAGEMENT_TOKEN_SECRET: engagementTokenSecret },
  // A local run accepts push endpoints on any https host (local push services); production does not.
  gateway: { ALLOW_ANY_PUSH_SERVICE: process.env.ALLOW_ANY_PUSH_SERVICE ?? 'true', ENGAGEMENT_TOKEN_SECRET: engagementTokenSecret },
};

const log = (message) => console.error(`[supervise] ${message}`);
let stopping = false;

const processes = await Promise.all(
  components.map((component) =>
    launchComponent(component, {
      ports,
      ready: 'none',
      stdio: 'inherit',
      env: { METRICS_PORT: String(metricsPorts[component.name]), ...localEnv[component.name] },
      restart: RESTART,
      onEvent(event) {
        if (event.kind === 'started') log(`${component.name} started (pid ${event.pid}, port ${ports[component.name]})`);
        else if (event.restartInMs !== undefined) log(`${component.name} exited (${event.code}); restarting in ${event.restartInMs} ms`);
      },
    }),
  ),
);

if (firstMetricsPort !== 0) {
  log(`Prometheus metrics: ${components.map((component) => `${component.name} http://127.0.0.1:${metricsPorts[component.name]}/metrics`).join(', ')}`);
}

async function stopAll(code) {
  if (stopping) {
    // A second Ctrl-C: no more waiting.
    for (const running of processes) void running.stop('SIGKILL');
    return;
  }
  stopping = true;
  log('draining every process');
  await Promise.all(processes.map((running) => running.stop('SIGTERM')));
  process.exit(code);
}

process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));
