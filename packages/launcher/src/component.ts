import { loopbackEnv, type Component } from '@herald/components';

import { launch, type LaunchedProcess, type LaunchOptions } from './launch.js';

export interface ComponentLaunchOptions extends Omit<LaunchOptions, 'name' | 'entry' | 'ready'> {
  /** The port of every component: where this one finds its callees (and, by default, its own port). */
  ports: Record<string, number>;
  /** This instance's own port when not `ports[name]` (a replica; what calls it keeps the first instance's address). */
  port?: number;
  /**
   * Resolve once its log says it serves (`log`: needs LOG_LEVEL info), once its port accepts
   * connections (`port`), or at once (`none`).
   */
  ready: 'log' | 'port' | 'none';
}

/** The line a component logs once it serves. */
export function servingLine(component: Component): RegExp {
  return component.protocol === 'http' ? /Server listening/ : new RegExp(`${component.name} service serving`);
}

/**
 * Starts a component of the registry (charts/herald/values.yaml) on loopback: its port and the
 * addresses of the components it calls, as the chart wires them, over `env`.
 */
export function launchComponent(component: Component, { ports, port = ports[component.name], ready, env = {}, ...options }: ComponentLaunchOptions): Promise<LaunchedProcess> {
  if (port === undefined) throw new Error(`no port for ${component.name}`);
  return launch({
    ...options,
    name: component.name,
    entry: component.entry,
    env: { ...loopbackEnv(component, { ...ports, [component.name]: port }), ...env },
    ready: ready === 'log' ? servingLine(component) : ready === 'port' ? { port } : undefined,
  });
}
