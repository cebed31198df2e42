import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { parse } from 'yaml';

/**
 * The component registry. The Helm chart's `components` (charts/herald/values.yaml) is the one
 * list of Herald's processes: the chart renders a Deployment per entry, and the local supervisor
 * and the test stacks start the same processes on loopback, with the same ports and the same
 * calls between them. A new service is its folder plus one entry there.
 */

/** External systems a component reaches (the chart opens their egress and passes their settings). */
export type Backing = 'postgres' | 'redis' | 'kafka' | 'internet' | 'smtp';

export interface Component {
  name: string;
  /** The port it listens on: GRPC_PORT for a service, PORT for the gateway. */
  port: number;
  protocol: 'grpc' | 'http';
  /** Its script, relative to the repository root. */
  entry: string;
  /** Components it calls over gRPC (each one's address arrives as <NAME>_GRPC_URL). */
  calls: string[];
  uses: Backing[];
}

interface ChartComponent {
  port?: number;
  protocol?: 'grpc' | 'http';
  entry?: string;
  calls?: string[];
  uses?: Backing[];
  enabled?: boolean;
}

export const repositoryRoot = fileURLToPath(new URL('../../../../', import.meta.url));
export const chartValuesPath = fileURLToPath(new URL('../../../../charts/herald/values.yaml', import.meta.url));

/** Every enabled component of the chart's defaults, in the order the chart lists them. */
export function readComponents(valuesPath = chartValuesPath): Component[] {
  const values = parse(readFileSync(valuesPath, 'utf8')) as { default: ChartComponent; components: Record<string, ChartComponent> };
  return Object.entries(values.components).flatMap(([name, own]) => {
    // The chart merges `default` under each entry; lists and scalars replace.
    const merged = { ...values.default, ...own };
    if (merged.enabled === false) return [];
    if (merged.port === undefined) throw new Error(`${valuesPath}: component ${name} has no port`);
    return [
      {
        name,
        port: merged.port,
        protocol: merged.protocol ?? 'grpc',
        entry: merged.entry || `services/${name}/dist/src/main.js`,
        calls: merged.calls ?? [],
        uses: merged.uses ?? [],
      },
    ];
  });
}

/** The variable a caller reads a component's gRPC address from, as the chart names it. */
export const grpcUrlVariable = (name: string): string => `${name.toUpperCase().replaceAll('-', '_')}_GRPC_URL`;

/**
 * A component's listening and addressing environment on one machine: its own port, and the
 * loopback address of each component it calls, at `ports` (by name).
 */
export function loopbackEnv(component: Component, ports: Record<string, number>): Record<string, string> {
  const env: Record<string, string> = component.protocol === 'http' ? { PORT: String(ports[component.name]) } : { GRPC_PORT: String(ports[component.name]) };
  for (const callee of component.calls) {
    const port = ports[callee];
    if (port === undefined) throw new Error(`${component.name} calls ${callee}, which is not a component`);
    env[grpcUrlVariable(callee)] = `127.0.0.1:${port}`;
  }
  return env;
}
