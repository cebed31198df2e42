// A k6 script's `options` as this runtime takes them: k6's executors and the fields each requires
// (what the static checks hold every script to), the three executors the runner implements, and
// thresholds as strings. Whatever else a script sets is refused by name.
import type { ScenarioConfig } from '../runner/scenario.js';
import type { Thresholds } from '../runner/thresholds.js';
import { notImplemented } from './protocol.js';

/** k6's executors: the fields each requires and the ones it may have besides the common ones. */
export const K6_EXECUTORS: Readonly<Record<string, { readonly required: readonly string[]; readonly optional: readonly string[] }>> = {
  'shared-iterations': { required: [], optional: ['vus', 'iterations', 'maxDuration'] },
  'per-vu-iterations': { required: [], optional: ['vus', 'iterations', 'maxDuration'] },
  'constant-vus': { required: ['duration'], optional: ['vus'] },
  'ramping-vus': { required: ['stages'], optional: ['startVUs', 'gracefulRampDown'] },
  'constant-arrival-rate': { required: ['rate', 'duration', 'preAllocatedVUs'], optional: ['timeUnit', 'maxVUs'] },
  'ramping-arrival-rate': { required: ['stages', 'preAllocatedVUs'], optional: ['startRate', 'timeUnit', 'maxVUs'] },
  'externally-controlled': { required: ['duration'], optional: ['vus', 'maxVUs'] },
};
export const K6_COMMON_FIELDS = ['executor', 'startTime', 'gracefulStop', 'exec', 'env', 'tags', 'options'] as const;

/** The executors the runner (runner/executors.ts) implements, and the common fields it honours. */
const SUPPORTED_EXECUTORS = new Set(['constant-vus', 'constant-arrival-rate', 'ramping-arrival-rate']);
const SUPPORTED_COMMON = new Set(['executor', 'startTime', 'gracefulStop', 'exec', 'tags']);
const SUPPORTED_OPTIONS = new Set(['scenarios', 'thresholds']);

/** k6's metrics a threshold may name besides the script's own (k6 v1 builtins). */
export const K6_BUILTIN_METRICS = new Set([
  'checks',
  'data_received',
  'data_sent',
  'dropped_iterations',
  'group_duration',
  'http_req_blocked',
  'http_req_connecting',
  'http_req_duration',
  'http_req_failed',
  'http_req_receiving',
  'http_req_sending',
  'http_req_tls_handshaking',
  'http_req_waiting',
  'http_reqs',
  'iteration_duration',
  'iterations',
  'vus',
  'vus_max',
]);

/** A k6 scenario with its exec's name (k6's default: the default export). */
type WithExecName<Config> = Config extends unknown ? Omit<Config, 'exec'> & { readonly exec: string } : never;
export type K6Scenario = WithExecName<ScenarioConfig<unknown>>;

export interface K6Options {
  readonly scenarios: Readonly<Record<string, K6Scenario>>;
  readonly thresholds: Thresholds;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Problems with one scenario against k6's own rules: an unknown executor, a missing or foreign field. */
export function k6ScenarioProblems(name: string, scenario: unknown): string[] {
  if (!isObject(scenario)) return [`scenario "${name}" is not an object`];
  const executor = scenario.executor;
  const spec = typeof executor === 'string' ? K6_EXECUTORS[executor] : undefined;
  if (!spec) return [`scenario "${name}": executor ${JSON.stringify(executor)} is not one of k6's (${Object.keys(K6_EXECUTORS).join(', ')})`];
  const allowed = new Set<string>([...K6_COMMON_FIELDS, ...spec.required, ...spec.optional]);
  return [
    ...spec.required.filter((field) => scenario[field] === undefined).map((field) => `scenario "${name}" (${String(executor)}) lacks ${field}`),
    ...Object.keys(scenario)
      .filter((field) => !allowed.has(field))
      .map((field) => `scenario "${name}" (${String(executor)}) has ${field}, which k6 does not know there`),
  ];
}

/** The script's options as the runner takes them; anything k6 knows but the runner lacks throws. */
export function readOptions(options: unknown): K6Options {
  if (!isObject(options)) throw new Error('the script exports no `options` object (this runtime runs scenarios; k6 shortcuts such as vus/duration are not implemented)');
  for (const key of Object.keys(options)) if (!SUPPORTED_OPTIONS.has(key)) throw notImplemented(`options.${key}`);
  if (!isObject(options.scenarios) || Object.keys(options.scenarios).length === 0) throw new Error('options.scenarios names no scenario');
  const scenarios: Record<string, K6Scenario> = {};
  for (const [name, scenario] of Object.entries(options.scenarios)) {
    const problems = k6ScenarioProblems(name, scenario);
    if (problems.length > 0) throw new Error(problems.join('; '));
    const config = scenario as Record<string, unknown>;
    if (!SUPPORTED_EXECUTORS.has(String(config.executor))) throw notImplemented(`the ${String(config.executor)} executor (scenario "${name}")`);
    for (const field of K6_COMMON_FIELDS) if (config[field] !== undefined && !SUPPORTED_COMMON.has(field)) throw notImplemented(`scenario field ${field} (scenario "${name}")`);
    scenarios[name] = { ...config, exec: typeof config.exec === 'string' ? config.exec : 'default' } as K6Scenario;
  }
  const thresholds: Record<string, string[]> = {};
  for (const [key, list] of Object.entries(isObject(options.thresholds) ? options.thresholds : {})) {
    if (!Array.isArray(list)) throw new Error(`threshold ${key}: not a list`);
    thresholds[key] = list.map((item: unknown) => {
      if (typeof item === 'string') return item;
      if (isObject(item) && typeof item.threshold === 'string') {
        const extra = Object.keys(item).filter((field) => field !== 'threshold');
        if (extra.length > 0) throw notImplemented(`threshold ${extra.join(', ')} (on ${key})`);
        return item.threshold;
      }
      throw new Error(`threshold on ${key}: ${JSON.stringify(item)} is neither a string nor {threshold}`);
    });
  }
  return { scenarios, thresholds };
}
