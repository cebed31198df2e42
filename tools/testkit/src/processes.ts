import { randomBytes } from 'node:crypto';
import { mkdir, stat, unlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { chartValuesPath, readComponents, type Component } from '@herald/components';
import { launch, launchComponent, type LaunchedProcess } from '@herald/launcher';

import { infrastructureEnv } from './env.js';
import { createKafkaNamespace } from './kafka.js';

/** Starting Herald's real processes for a test (through @herald/launcher), each on free ports, and stopping them. */

/**
 * Ports for test processes come from below the kernel's ephemeral range (32768 and up here), at
 * random: a port the kernel picked (listen on 0) can be handed to any outgoing connection between
 * this check and the child binding it, which made parallel test files collide now and then.
 */
const PORT_RANGE = { low: 20_000, high: 32_000 };
/**
 * Each port handed out is also claimed with a file created exclusively, so two test files picking
 * the same random port between the check and their children binding it cannot both get it (a
 * gateway once failed with EADDRINUSE that way). Claims expire: ports are reused in later runs.
 */
const PORT_CLAIMS = join(tmpdir(), 'herald-test-ports');
const CLAIM_TTL_MS = 15 * 60_000;

async function claimPort(port: number): Promise<boolean> {
  const file = join(PORT_CLAIMS, String(port));
  try {
    await writeFile(file, String(process.pid), { flag: 'wx' });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const claimed = await stat(file).catch(() => undefined);
  if (claimed !== undefined && Date.now() - claimed.mtimeMs < CLAIM_TTL_MS) return false;
  // A claim from a run long over: take it, again exclusively, so only one taker wins.
  await unlink(file).catch(() => undefined);
  return writeFile(file, String(process.pid), { flag: 'wx' }).then(
    () => true,
    () => false,
  );
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

export async function freePort(): Promise<number> {
  await mkdir(PORT_CLAIMS, { recursive: true });
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const port = PORT_RANGE.low + Math.floor(Math.random() * (PORT_RANGE.high - PORT_RANGE.low));
    if ((await claimPort(port)) && (await canListen(port))) return port;
  }
  throw new Error(`no free port between ${PORT_RANGE.low} and ${PORT_RANGE.high}`);
}

/** A process a test started (@herald/launcher's handle: its child, output, exit, stop). */
export type RunningProcess = LaunchedProcess;

/** Whether a process with this pid exists (signal 0 asks without signalling). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts one of Herald's processes, logging at info, and resolves once its output matches `ready`.
 * Its metrics endpoint is on a free port unless `env` names one (`metricsUrl`).
 */
export async function startProcess(name: string, entry: string, env: Record<string, string>, ready: RegExp, timeoutMs?: number): Promise<RunningProcess> {
  return launch({ name, entry, env: { LOG_LEVEL: 'info', METRICS_PORT: String(await freePort()), ...env }, ready, timeoutMs });
}

export interface Stack {
  gatewayUrls: string[];
  gatewayUrl: string;
  gateways: RunningProcess[];
  /** The services started, in registry order (replicas added by startService follow). */
  services: RunningProcess[];
  /** The stack's own namespace (HERALD_NAMESPACE of every process). */
  topicPrefix: string;
  /** What the stack's delivery fleet signs engagement tokens with (tests forge old ones with it). */
  engagementTokenSecret: string;
  /**
   * Starts one more gateway on these services, with extra environment, on `port` when given (one
   * its PUBLIC_ORIGIN can name); returns its URL.
   */
  addGateway(env?: Record<string, string>, port?: number): Promise<string>;
  /**
   * Starts another instance of a service: a replica on a port of its own, or (`replacing`) the
   * replacement of the first instance, killed, on its port, so that what calls it reaches it again.
   */
  startService(name: ServiceName, env?: Record<string, string>, options?: { replacing?: boolean }): Promise<RunningProcess>;
  stop(): Promise<void>;
}

/** A component of the registry (charts/herald/values.yaml) other than the gateway. */
export type ServiceName = string;

export interface StackOptions {
  gateways?: number;
  gatewayEnv?: Record<string, string>;
  /** Extra environment for every process of the stack, services and gateways. */
  env?: Record<string, string>;
  /** Also start the campaign service and the delivery fleet (POST /send end to end). */
  sending?: boolean;
  deliveryEnv?: Record<string, string>;
  /** Also start the policy service (POST /authorize, /policy). */
  policy?: boolean;
  /** Also start the decision service (/ask, /decisions, the answer page). */
  decisions?: boolean;
  /** Any further services of the registry to start, by name. */
  services?: ServiceName[];
}

/** The services every stack runs: the gateway authenticates through account, the SDK endpoints need audience. */
const ALWAYS = ['account', 'audience'];

/**
 * Herald's processes on the real infrastructure, as the component registry lays them out (the
 * chart's ports replaced by free ones, the calls between components as the chart wires them).
 * Each stack gets its own Kafka namespace (topics and consumer groups under a random prefix), so
 * stacks of parallel test files never consume each other's events.
 */
export async function startStack({ gateways = 1, gatewayEnv = {}, env = {}, sending = false, deliveryEnv = {}, policy = false, decisions = false, services: more = [] }: StackOptions = {}): Promise<Stack> {
  const components = new Map(readComponents().map((component) => [component.name, component]));
  const wanted = new Set([...ALWAYS, ...(sending ? ['campaign', 'delivery'] : []), ...(policy ? ['policy'] : []), ...(decisions ? ['decision'] : []), ...more]);
  for (const name of wanted) if (!components.has(name)) throw new Error(`no component "${name}" in ${chartValuesPath}`);
  const namespace = await createKafkaNamespace();
  const infra = {
    ...infrastructureEnv(),
    HERALD_NAMESPACE: namespace.prefix,
    // Rate-limit buckets too: parallel stacks all call from 127.0.0.1 and must not share per-IP counts.
    // A short session lets a killed consumer's partitions move on quickly.
    KAFKA_SESSION_TIMEOUT_MS: '6000',
    // Each stack signs answer links with its own secret, shared by its decision replicas; and
    // engagement tokens with another, shared by its delivery fleet and gateways.
    ANSWER_TOKEN_SECRET: randomBytes(32).toString('base64url'),
    ENGAGEMENT_TOKEN_SECRET: randomBytes(32).toString('base64url'),
    ...env,
  };
  const ports: Record<string, number> = {};
  for (const name of components.keys()) ports[name] = await freePort();
  const componentNamed = (name: string): Component => {
    const component = components.get(name);
    if (!component) throw new Error(`no component "${name}" in ${chartValuesPath}`);
    return component;
  };
  // A replica listens on a port of its own; what calls it keeps the first instance's address.
  // Each process serves its metrics on a free port of its own (RunningProcess.metricsUrl).
  const start = async (name: string, extra: Record<string, string>, port = ports[name] as number): Promise<RunningProcess> =>
    launchComponent(componentNamed(name), { ports, port, ready: 'log', env: { LOG_LEVEL: 'info', METRICS_PORT: String(await freePort()), ...infra, ...(name === 'delivery' ? deliveryEnv : {}), ...extra } });
  const started = await Promise.allSettled([...components.keys()].filter((name) => wanted.has(name)).map((name) => start(name, {})));
  const services = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const gatewayProcesses: RunningProcess[] = [];
  // A stack that cannot start stops what it did start: left running, its processes would keep the
  // test file alive (its after hook has no stack to stop) and the whole suite would hang.
  const abandon = async (err: unknown): Promise<never> => {
    await Promise.all([...gatewayProcesses, ...services].map((running) => running.stop()));
    await namespace.remove();
    throw err;
  };
  const failed = started.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed) await abandon(failed.reason);
  const addGateway = async (extra: Record<string, string> = {}, chosen?: number): Promise<string> => {
    const port = chosen ?? (await freePort());
    gatewayProcesses.push(await start('gateway', extra, port));
    return `http://127.0.0.1:${port}`;
  };
  const gatewayUrls: string[] = [];
  try {
    for (let index = 0; index < gateways; index += 1) gatewayUrls.push(await addGateway(gatewayEnv));
  } catch (err) {
    await abandon(err);
  }
  return {
    gatewayUrls,
    gatewayUrl: gatewayUrls[0] as string,
    gateways: gatewayProcesses,
    services,
    topicPrefix: namespace.prefix,
    engagementTokenSecret: infra.ENGAGEMENT_TOKEN_SECRET,
    addGateway,
    async startService(name, extra = {}, { replacing = false } = {}) {
      const running = await start(name, extra, replacing ? ports[name] : await freePort());
      services.push(running);
      return running;
    },
    async stop() {
      await Promise.all(gatewayProcesses.map((gateway) => gateway.stop()));
      await Promise.all(services.map((running) => running.stop()));
      await namespace.remove();
    },
  };
}
