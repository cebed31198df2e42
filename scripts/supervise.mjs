// Runs every Herald process on this machine, as the component registry (the Helm chart's
// `components`) lists them: the services on loopback gRPC at the chart's ports, the gateway on
// http://localhost:8080 (PORT). Like the cluster, a process that exits is started again with a
// capped backoff, and the others keep running; Ctrl-C (or SIGTERM) drains them all.
//
// SUPERVISE_PORTS (comma-separated, in registry order) replaces the chart's ports: a second local
// stack, or a test of this script. Each process serves Prometheus metrics on its own port, from
// METRICS_PORT (default 9464) on, in registry order; METRICS_PORT=0 serves none.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';

import { loopbackEnv, readComponents, repositoryRoot } from '@herald/components';

const RESTART_FIRST_MS = 500;
const RESTART_CAP_MS = 30_000;
/** A process that ran this long before exiting was healthy: its next restart starts the backoff over. */
const HEALTHY_AFTER_MS = 60_000;

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
const running = new Map();
let stopping = false;

function start(component, restarts = 0) {
  const startedAt = Date.now();
  const child = spawn(process.execPath, ['--import', '@herald/telemetry/register', component.entry], {
    cwd: repositoryRoot,
    env: {
      ...process.env,
      HERALD_SERVICE: component.name,
      OTEL_SERVICE_NAME: `herald-${component.name}`,
      ...loopbackEnv(component, ports),
      METRICS_PORT: String(metricsPorts[component.name]),
      ...localEnv[component.name],
    },
    stdio: 'inherit',
  });
  running.set(component.name, child);
  log(`${component.name} started (pid ${child.pid}, port ${ports[component.name]})`);
  child.on('exit', (code, signal) => {
    running.delete(component.name);
    if (stopping) return;
    const healthy = Date.now() - startedAt >= HEALTHY_AFTER_MS;
    const attempt = healthy ? 0 : restarts;
    const delayMs = Math.min(RESTART_CAP_MS, RESTART_FIRST_MS * 2 ** attempt);
    log(`${component.name} exited (${signal ?? code}); restarting in ${delayMs} ms`);
    setTimeout(() => {
      if (!stopping) start(component, attempt + 1);
    }, delayMs);
  });
}

function stopAll(code) {
  if (stopping) {
    // A second Ctrl-C: no more waiting.
    for (const child of running.values()) child.kill('SIGKILL');
    return;
  }
  stopping = true;
  log('draining every process');
  for (const child of running.values()) child.kill('SIGTERM');
  const exitWhenDone = setInterval(() => {
    if (running.size === 0) {
      clearInterval(exitWhenDone);
      process.exit(code);
    }
  }, 100);
}

for (const component of components) start(component);
if (firstMetricsPort !== 0) {
  log(`Prometheus metrics: ${components.map((component) => `${component.name} http://127.0.0.1:${metricsPorts[component.name]}/metrics`).join(', ')}`);
}
process.on('SIGINT', () => stopAll(0));
process.on('SIGTERM', () => stopAll(0));
