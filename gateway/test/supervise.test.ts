import assert from 'node:assert/strict';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { after, before, test } from 'node:test';

import { readComponents } from '@herald/components';
import { call, createKafkaNamespace, scrapeMetrics, createWorkspace, eventually, freePort, infrastructureEnv, isAlive as alive, repoRoot, SERVER_API } from '@herald/testkit';

// `npm start`'s supervisor (scripts/supervise.mjs) behaves like the cluster: it runs every
// component of the registry, restarts one that exits (with a log line) while the others keep
// running, and drains them all on Ctrl-C.

const components = readComponents();
let supervisor: ChildProcessByStdio<null, Readable, Readable>;
let output = '';
let gatewayUrl: string;
let removeNamespace: () => Promise<void>;
let firstMetricsPort: number;

/** Pid of the latest start of `name`, from the supervisor's log. */
function pidOf(name: string): number {
  const started = [...output.matchAll(new RegExp(`\\[supervise\\] ${name} started \\(pid (\\d+), port \\d+\\)`, 'g'))];
  const last = started.at(-1)?.[1];
  assert.ok(last, `${name} never started:\n${output}`);
  return Number(last);
}

before(async () => {
  const namespace = await createKafkaNamespace();
  removeNamespace = () => namespace.remove();
  const ports = await Promise.all(components.map(() => freePort()));
  firstMetricsPort = await freePort();
  gatewayUrl = `http://127.0.0.1:${ports[components.findIndex((component) => component.name === 'gateway')]}`;
  supervisor = spawn(process.execPath, ['scripts/supervise.mjs'], {
    cwd: repoRoot,
    env: {
      ...process.env,
      ...infrastructureEnv(),
      HERALD_NAMESPACE: namespace.prefix,
      SUPERVISE_PORTS: ports.join(','),
      METRICS_PORT: String(firstMetricsPort),
      ANSWER_TOKEN_SECRET: randomBytes(32).toString('base64url'),
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  supervisor.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  supervisor.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await eventually('the gateway up', () => call(gatewayUrl, '/healthz').catch(() => ({ status: 0 })), (reply) => reply.status === 200, 60_000);
});
after(async () => {
  if (supervisor.exitCode === null) supervisor.kill('SIGKILL');
  await removeNamespace();
});

test('npm start prints no schema warnings: every format the route and tool schemas use is known to their validators', () => {
  assert.match(output, /\[supervise\] gateway started/);
  assert.doesNotMatch(output, /unknown format|ignored in schema|strict mode/);
});

test('npm start prints where each process serves its metrics, on consecutive ports in registry order', async () => {
  const urls = components.map((component, index) => `${component.name} http://127.0.0.1:${firstMetricsPort + index}/metrics`);
  assert.ok(output.includes(`[supervise] Prometheus metrics: ${urls.join(', ')}`), output);
  const gatewayIndex = components.findIndex((component) => component.name === 'gateway');
  const metrics = await scrapeMetrics(`http://127.0.0.1:${firstMetricsPort + gatewayIndex}/metrics`);
  assert.equal(metrics.target_info?.type, 'gauge');
  assert.equal((metrics.target_info?.data[0]?.labels as Record<string, string> | undefined)?.service_name, 'herald-gateway');
});

test('every component of the registry runs; one that dies is restarted while the others keep running; Ctrl-C drains them all', { timeout: 120_000 }, async () => {
  const pids = Object.fromEntries(components.map((component) => [component.name, pidOf(component.name)]));
  for (const [name, pid] of Object.entries(pids)) assert.ok(alive(pid), `${name} (pid ${pid}) is running`);

  const { apiKey } = await createWorkspace();
  const identity = () => call(gatewayUrl, `${SERVER_API}/identity`, { key: apiKey });
  assert.equal((await identity()).status, 200);

  process.kill(pids.account as number, 'SIGKILL');
  await eventually('account restarted', async () => output.includes('[supervise] account exited (SIGKILL); restarting in ') && pidOf('account') !== pids.account, Boolean, 20_000);
  // The first restart waits between half of and all of 0.5 s (@herald/backoff, equal jitter).
  const delay = Number(/\[supervise\] account exited \(SIGKILL\); restarting in (\d+) ms/.exec(output)?.[1]);
  assert.ok(delay >= 250 && delay < 500, `restarted after ${delay} ms`);
  for (const [name, pid] of Object.entries(pids)) if (name !== 'account') assert.ok(alive(pid), `${name} kept running`);
  // Its replacement serves: a new key must be looked up in the account service.
  const { apiKey: newKey } = await createWorkspace();
  await eventually('the API through the new account service', () => call(gatewayUrl, `${SERVER_API}/identity`, { key: newKey }), (reply) => reply.status === 200, 20_000);

  const exited = new Promise<number | null>((resolve) => supervisor.once('exit', (code) => resolve(code)));
  supervisor.kill('SIGINT');
  assert.equal(await exited, 0);
  assert.ok(output.includes('[supervise] draining every process'));
  for (const name of Object.keys(pids)) assert.equal(alive(pidOf(name)), false, `${name} stopped`);
});
