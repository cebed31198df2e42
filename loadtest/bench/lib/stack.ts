// Herald's own processes for a benchmark: services and a gateway (more on demand) on free ports, each started
// through ./processes.js (ready when its port accepts, so LOG_LEVEL=warn is fine), wired to each
// other like testkit's startStack does, with `--import @herald/telemetry/register` as in production.
import { freePort, type ServiceName } from '@herald/testkit';

import { startProcess, type BenchProcess } from './processes.js';

export type ProcessName = ServiceName | 'gateway';

export interface HeraldOptions {
  /** Started at once, before the gateway. */
  services: readonly ServiceName[];
  /** Environment of every process (infrastructure, LOG_LEVEL, KAFKA_TOPIC_PREFIX, ...). */
  env: Record<string, string>;
  /** Extra environment per process (a service's replicas get it too). */
  processEnv?: Partial<Record<ProcessName, Record<string, string>>>;
  /** Node arguments per process; default `--import @herald/telemetry/register`. */
  nodeArgs?: (name: ProcessName) => string[];
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

const TELEMETRY = ['--import', '@herald/telemetry/register'];
const grpcUrlVariable = (name: ServiceName): string => `${name.toUpperCase()}_GRPC_URL`;

export async function startHerald({ services, env, processEnv = {}, nodeArgs = () => TELEMETRY }: HeraldOptions): Promise<Herald> {
  const ports = new Map<ServiceName, number>();
  for (const name of services) ports.set(name, await freePort());
  const addresses = Object.fromEntries([...ports].map(([name, port]) => [grpcUrlVariable(name), `127.0.0.1:${port}`]));
  const instances: BenchProcess[] = [];
  const start = async (name: ServiceName, port: number): Promise<BenchProcess> => {
    const instance = await startProcess({
      name,
      entry: `services/${name}/dist/src/main.js`,
      port,
      nodeArgs: nodeArgs(name),
      env: { ...env, ...addresses, ...processEnv[name], GRPC_PORT: String(port) },
    });
    instances.push(instance);
    return instance;
  };
  const first = await Promise.all([...ports].map(([name, port]) => start(name, port)));
  const gateways: BenchProcess[] = [];
  const startGateway = async (): Promise<{ port: number; process: BenchProcess }> => {
    const port = await freePort();
    const gateway = await startProcess({
      name: 'gateway',
      entry: 'gateway/dist/src/main.js',
      port,
      nodeArgs: nodeArgs('gateway'),
      env: { ...env, ...addresses, HOST: '127.0.0.1', PORT: String(port), ...processEnv.gateway },
    });
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
