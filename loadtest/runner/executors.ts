// Runs one scenario's executor: when iterations start, on which virtual user, and what happens to
// iterations still running at the end (a graceful stop, then an abort).
import { setTimeout as sleep } from 'node:timers/promises';

import { parseDuration } from './duration.js';
import { builtin, type Tags } from './metrics.js';
import type { Iteration, RunEnv, ScenarioConfig, VirtualUser } from './scenario.js';

const DEFAULT_GRACEFUL_STOP_MS = 30_000;
/** How often the arrival-rate loop wakes to start what is due. */
const TICK_MS = 5;
/** Iteration errors printed per scenario; the rest are only counted. */
const ERRORS_SHOWN = 5;

let nextVuId = 1;
let activeVus = 0;

/** Iterations started before `elapsedMs` (k6 starts one at 0, then one each 1/rate). */
export function arrivalsBy(config: { startRate: number; timeUnitMs: number; stages: ReadonlyArray<{ durationMs: number; target: number }> }, elapsedMs: number): number {
  let rate = config.startRate;
  let stageStart = 0;
  let total = 0;
  for (const stage of config.stages) {
    const within = Math.min(Math.max(elapsedMs - stageStart, 0), stage.durationMs);
    // The area under the rate, linear across the stage.
    const rateThere = rate + ((stage.target - rate) * within) / stage.durationMs;
    total += ((rate + rateThere) / 2) * (within / config.timeUnitMs);
    if (elapsedMs < stageStart + stage.durationMs) break;
    rate = stage.target;
    stageStart += stage.durationMs;
  }
  return Math.floor(total) + 1;
}

export class ScenarioRun<Data> {
  private readonly stop = new AbortController();
  private readonly running = new Set<Promise<void>>();
  private readonly free: VirtualUser[] = [];
  private vus = 0;
  private errorsShown = 0;
  private readonly tags: Tags;

  constructor(
    private readonly name: string,
    private readonly config: ScenarioConfig<Data>,
    private readonly data: Data,
    private readonly env: RunEnv,
  ) {
    this.tags = { scenario: name, ...config.tags };
  }

  async run(): Promise<void> {
    if (this.config.startTime) await sleep(parseDuration(this.config.startTime));
    const config = this.config;
    switch (config.executor) {
      case 'constant-arrival-rate': {
        const durationMs = parseDuration(config.duration);
        await this.arrivals({ startRate: config.rate, timeUnitMs: parseDuration(config.timeUnit ?? '1s'), stages: [{ durationMs, target: config.rate }] }, config.maxVUs ?? config.preAllocatedVUs);
        break;
      }
      case 'ramping-arrival-rate': {
        const stages = config.stages.map((stage) => ({ durationMs: parseDuration(stage.duration), target: stage.target }));
        await this.arrivals({ startRate: config.startRate, timeUnitMs: parseDuration(config.timeUnit ?? '1s'), stages }, config.maxVUs ?? config.preAllocatedVUs);
        break;
      }
      case 'constant-vus': {
        // Iterations still running at the end get the graceful stop, then are aborted (a VU
        // blocked in a wait must not hold the run open).
        const durationMs = parseDuration(config.duration);
        const until = performance.now() + durationMs;
        void this.loops(config.vus, () => performance.now() < until);
        await sleep(durationMs);
        break;
      }
    }
    await this.finish();
  }

  private async arrivals(schedule: Parameters<typeof arrivalsBy>[0], maxVus: number): Promise<void> {
    const totalMs = schedule.stages.reduce((sum, stage) => sum + stage.durationMs, 0);
    const started = performance.now();
    let launched = 0;
    for (let elapsed = 0; elapsed < totalMs; elapsed = performance.now() - started) {
      const due = arrivalsBy(schedule, elapsed);
      this.launch(due - launched, maxVus);
      launched = due;
      await sleep(TICK_MS);
    }
    // A late last tick still starts what the schedule had due: a run starts exactly its arrivals.
    this.launch(arrivalsBy(schedule, totalMs - 1e-6) - launched, maxVus);
  }

  private launch(count: number, maxVus: number): void {
    for (let started = 0; started < count; started += 1) {
      const vu = this.free.pop() ?? (this.vus < maxVus ? this.newVu() : undefined);
      if (!vu) builtin.droppedIterations.add(1, this.tags);
      else this.track(this.iterate(vu).finally(() => this.free.push(vu)));
    }
  }

  private async loops(vus: number, more: () => boolean): Promise<void> {
    const loop = async (vu: VirtualUser): Promise<void> => {
      while (!this.stop.signal.aborted && more()) await this.iterate(vu);
    };
    await Promise.all(Array.from({ length: vus }, () => this.track(loop(this.newVu()))));
  }

  private newVu(): VirtualUser {
    this.vus += 1;
    return { id: nextVuId++, iterations: 0, state: new Map() };
  }

  private track(promise: Promise<void>): Promise<void> {
    this.running.add(promise);
    void promise.finally(() => this.running.delete(promise));
    return promise;
  }

  private async iterate(vu: VirtualUser): Promise<void> {
    const iteration: Iteration<Data> = {
      data: this.data,
      vu,
      scenario: this.name,
      signal: this.stop.signal,
      env: this.env,
    };
    activeVus += 1;
    builtin.vus.add(activeVus, this.tags);
    let started = performance.now();
    try {
      if (vu.iterations === 0 && this.config.initVu) {
        await this.config.initVu(vu);
        started = performance.now();
      }
      await this.config.exec(iteration);
      builtin.iterations.add(1, this.tags);
      builtin.iterationDuration.add(performance.now() - started, this.tags);
    } catch (err) {
      // An iteration cut off by the graceful stop is interrupted, not wrong.
      if (!this.stop.signal.aborted) {
        builtin.iterationErrors.add(1, this.tags);
        if (this.errorsShown < ERRORS_SHOWN) {
          this.errorsShown += 1;
          process.stderr.write(`[${this.name}] iteration error: ${err instanceof Error ? err.message : String(err)}\n`);
        }
      }
    } finally {
      activeVus -= 1;
      vu.iterations += 1;
    }
  }

  /** Waits for running iterations up to the graceful stop, then aborts the rest. */
  private async finish(): Promise<void> {
    const graceMs = this.config.gracefulStop === undefined ? DEFAULT_GRACEFUL_STOP_MS : parseDuration(this.config.gracefulStop);
    const settled = Promise.allSettled([...this.running]);
    const grace = new AbortController();
    const ended = await Promise.race([settled.then(() => true), sleep(graceMs, false, { signal: grace.signal }).catch(() => false)]);
    grace.abort();
    if (!ended) {
      this.stop.abort(new Error(`${this.name}: graceful stop (${graceMs} ms) ran out`));
      await Promise.allSettled([...this.running]);
    }
  }
}
