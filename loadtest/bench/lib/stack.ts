// Herald's own processes for a benchmark: services and a gateway (more on demand) on free ports, each started
// by @herald/launcher's launchComponent (ready when its port accepts, so LOG_LEVEL=warn is fine), wired to each
// other as the component registry (the chart's `components`) says, like testkit's startStack, with
// `--import @herald/telemetry/register` as in production, and each its own Prometheus endpoint (its
// `metricsUrl`) unless metrics are off.
import { randomBytes } from 'node:crypto';

import { readComponents, type Component } from '@herald/components';
import { launchComponent, TELEMETRY_ARGS } from '@herald/launcher';
import { freePort, type ServiceName } from '@herald/testkit';

import { BENCH_LAUNCH, type BenchProcess } from './processes.js';

export type ProcessName = ServiceName | 'gateway';

export interface HeraldOptions {
  /** Started at once, before the gateway. */
  services: readonly ServiceName[];
  /** Environment of every process (infrastructure, LOG_LEVEL, HERALD_NAMESPACE, ...). */
  env: Record<string, string>;
  /** Extra environment per process (a service's replicas get it too). */
  processEnv?: Partial<Record<ProcessName, Record<string, string>>>;
  /** Node arguments per process; default `--import @herald/telemetry/register`. */
  nodeArgs?: (name: ProcessName) => string[];
  /**
   * true (default): every process serves /metrics on a free port of its own, as each pod does on
   * 9464; false: METRICS_PORT=0 everywhere (with no OTLP endpoint given, no meter provider at all).
   */
  metrics?: boolean;
}

export interface Herald {
  gatewayPort: number;
  gateway: BenchProcess;
  /** The first instance of each service. */
  services: Partial<Record<ServiceName, BenchProcess>>;
  /** Every service instance, replicas included, in start order. */
  instances: BenchProcess[];
  /** One more instance of a service on a port of its own; the others keep talking to the first. */
  addReplica(name: ServiceName): Promise<BenchProcess>;
  /** One more gateway replica on the same services (same Redis: rate limits and answer wake-ups are shared). */
  addGateway(): Promise<{ port: number; process: BenchProcess }>;
  /** The gateways first, then every service instance. */
  stop(): Promise<void>;
}

export async function startHerald({ services, env: given, processEnv = {}, nodeArgs = () => [...TELEMETRY_ARGS], metrics = true }: HeraldOptions): Promise<Herald> {
  // The delivery fleet signs engagement tokens that the gateway checks: one secret per stack.
  const env = { ENGAGEMENT_TOKEN_SECRET: randomBytes(32).toString('base64url'), ...given };
  const components = new Map(readComponents().map((component) => [component.name, component]));
  const ports: Record<string, number> = {};
  for (const name of components.keys()) ports[name] = await freePort();
  const componentNamed = (name: ProcessName): Component => {
    const component = components.get(name);
    if (!component) throw new Error(`no component "${name}" in the registry`);
    return component;
  };
  const instances: BenchProcess[] = [];
  const metricsEnv = async (): Promise<{ METRICS_PORT: string }> => ({ METRICS_PORT: metrics ? String(await freePort()) : '0' });
  // A replica listens on a port of its own; what calls it keeps the first instance's address.
  const start = async (name: ServiceName, port: number): Promise<BenchProcess> => {
    const instance = await launchComponent(componentNamed(name), { ...BENCH_LAUNCH, ports, port, ready: 'port', nodeArgs: nodeArgs(name), env: { ...env, ...(await metricsEnv()), ...processEnv[name] } });
    instances.push(instance);
    return instance;
  };
  const first = await Promise.all(services.map((name) => start(name, ports[name] as number)));
  const gateways: BenchProcess[] = [];
  const startGateway = async (): Promise<{ port: number; process: BenchProcess }> => {
    const port = await freePort();
    const gateway = await launchComponent(componentNamed('gateway'), { ...BENCH_LAUNCH, ports, port, ready: 'port', nodeArgs: nodeArgs('gateway'), env: { ...env, ...(await metricsEnv()), HOST: '127.0.0.1', ...processEnv.gateway } });
    gateways.push(gateway);
    return { port, process: gateway };
  };
  const { port: gatewayPort, process: gateway } = await startGateway();
  return {
    gatewayPort,
    gateway,
    services: Object.fromEntries(first.map((instance) => [instance.name, instance])),
    instances,
    async addReplica(name) {
      return start(name, await freePort());
    },
    addGateway: startGateway,
    async stop() {
      await Promise.all(gateways.map((instance) => instance.stop()));
      await Promise.all(instances.map((instance) => instance.stop()));
    },
  };
}
