// What a scenario file declares, in k6's terms: options.scenarios (executors), options.thresholds,
// setup() whose result every iteration gets, teardown() and handleSummary(). Each executor config
// names its own iteration function (`exec`), typed against the setup data.
import type { Tags } from './metrics.js';
import type { Summary } from './summary.js';
import type { Thresholds } from './thresholds.js';

/** smoke: seconds, small rates, every threshold held (what the test suite runs). full: the load. */
export type Form = 'smoke' | 'full';

export interface RunEnv {
  /** The Herald under load, without a trailing slash (HERALD_URL). */
  readonly baseUrl: string;
  readonly form: Form;
  /** Where summaries go. */
  readonly summaryDir: string;
  readonly env: Readonly<Record<string, string | undefined>>;
}

export interface VirtualUser {
  /** Unique in the run, from 1 (k6's __VU). */
  readonly id: number;
  /** Iterations this VU has started before this one (k6's __ITER). */
  iterations: number;
  /** Whatever an iteration keeps for the next one on the same VU (a connection, a counter). */
  readonly state: Map<string, unknown>;
}

export interface Iteration<Data> {
  readonly data: Data;
  readonly vu: VirtualUser;
  readonly scenario: string;
  /** Aborted when the scenario's graceful stop runs out: pass it on to anything that waits. */
  readonly signal: AbortSignal;
  readonly env: RunEnv;
}

export type Exec<Data> = (iteration: Iteration<Data>) => Promise<void>;

interface Common<Data> {
  readonly exec: Exec<Data>;
  /** Prepares a new VU before its first iteration, outside iteration_duration (k6's VU initialisation). */
  readonly initVu?: (vu: VirtualUser) => Promise<void>;
  /** Offset from the start of the run, e.g. "2s". */
  readonly startTime?: string;
  /** How long iterations still running at the end may finish before they are aborted (default 30s). */
  readonly gracefulStop?: string;
  /** Extra tags on every sample of this scenario. */
  readonly tags?: Tags;
}

/** Open model: `rate` iterations start every `timeUnit` whatever the responses take; late ones are dropped once maxVUs are busy. */
export interface ConstantArrivalRate<Data> extends Common<Data> {
  readonly executor: 'constant-arrival-rate';
  readonly rate: number;
  readonly timeUnit?: string;
  readonly duration: string;
  readonly preAllocatedVUs: number;
  readonly maxVUs?: number;
}

/** Open model with the rate moving linearly from stage to stage. */
export interface RampingArrivalRate<Data> extends Common<Data> {
  readonly executor: 'ramping-arrival-rate';
  readonly startRate: number;
  readonly timeUnit?: string;
  readonly stages: ReadonlyArray<{ readonly duration: string; readonly target: number }>;
  readonly preAllocatedVUs: number;
  readonly maxVUs?: number;
}

/** Closed model: `vus` loops, each starting its next iteration when the last ends. */
export interface ConstantVus<Data> extends Common<Data> {
  readonly executor: 'constant-vus';
  readonly vus: number;
  readonly duration: string;
}

export type ScenarioConfig<Data> = ConstantArrivalRate<Data> | RampingArrivalRate<Data> | ConstantVus<Data>;

export interface Options<Data> {
  readonly scenarios: Readonly<Record<string, ScenarioConfig<Data>>>;
  readonly thresholds: Thresholds;
}

/** One run's script, as the engine drives it (runtime/host.ts adapts a k6 script to it). */
export interface LoadScenario<Data> {
  readonly name: string;
  readonly description: string;
  options(form: Form): Options<Data>;
  setup(env: RunEnv): Promise<Data>;
  teardown?(data: Data, env: RunEnv): Promise<void>;
  /** Returns what to write: file paths (relative to summaryDir) or "stdout" -> content. */
  handleSummary?(summary: Summary, env: RunEnv): Promise<Readonly<Record<string, string>>>;
}

/** Identity function that fixes the setup data's type across options, setup and iterations. */
export function defineScenario<Data>(scenario: LoadScenario<Data>): LoadScenario<Data> {
  return scenario;
}
