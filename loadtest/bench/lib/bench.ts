// What every benchmark script needs around its measurement: settings from the environment, a
// timestamped log on stderr, the local infrastructure's environment, and a clean end whatever
// happens (normal end, failure, Ctrl-C, SIGTERM, a hard deadline): every process started through
// @herald/launcher is stopped and every registered clean-up step runs, once.
import { execFile } from 'node:child_process';
import os from 'node:os';
import { promisify } from 'node:util';

import { killAllNow, stopAll } from '@herald/launcher';
import { infrastructureEnv, repoRoot, requiredEnv } from '@herald/testkit';

const run = promisify(execFile);

export function intEnv(name: string, fallback: number): number {
  const value = process.env[name];
  if (value === undefined || value === '') return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1) throw new Error(`${name} must be a positive integer`);
  return parsed;
}

const t0 = performance.now();

/** Seconds since the script started. */
export const elapsedSeconds = (): number => (performance.now() - t0) / 1_000;

export const log = (message: string): void => {
  process.stderr.write(`[bench +${elapsedSeconds().toFixed(1)}s] ${message}\n`);
};

/**
 * DATABASE_URL, REDIS_URL and KAFKA_BROKERS of the local infrastructure: starts it when
 * `deploy/infra.sh status` fails, reads `deploy/infra.sh env` for whatever is unset, and refuses
 * anything but loopback. With all three set, the caller runs the infrastructure (another
 * checkout's, say) and deploy/infra.sh is left alone.
 */
export async function infraEnv(): Promise<Record<string, string>> {
  const names = ['DATABASE_URL', 'REDIS_URL', 'KAFKA_BROKERS'];
  const given = names.every((name) => process.env[name]);
  const status =
    given ||
    (await run('bash', ['deploy/infra.sh', 'status'], { cwd: repoRoot }).then(
      () => true,
      () => false,
    ));
  if (!status) {
    log('infrastructure not (fully) running: bash deploy/infra.sh up');
    await run('bash', ['deploy/infra.sh', 'up'], { cwd: repoRoot, maxBuffer: 64 * 1024 * 1024 });
  }
  if (names.some((name) => !process.env[name])) {
    const { stdout } = await run('bash', ['deploy/infra.sh', 'env'], { cwd: repoRoot });
    for (const [, name, value] of stdout.matchAll(/^export (\w+)=(.*)$/gm)) {
      if (name !== undefined && value !== undefined) process.env[name] ??= value;
    }
  }
  for (const name of names) if (!process.env[name]) throw new Error(`${name} is not set and deploy/infra.sh env did not provide it`);
  for (const name of ['REDIS_URL', 'DATABASE_URL']) {
    const host = new URL(requiredEnv(name)).hostname;
    if (host !== '127.0.0.1' && host !== 'localhost') throw new Error(`${name} points at ${host}; this benchmark only runs against local infrastructure`);
  }
  return infrastructureEnv();
}

/**
 * The head of a report: its title with the time, the machine (cores, CPU, memory, node, OS, load
 * average), and how busy the machine was before the run (`idleBusy`, a share; null: unknown).
 */
export function reportHead(title: string, idleBusy: number | null): string[] {
  const cores = os.availableParallelism();
  const load = os
    .loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
  const lines = [
    `${title}  ${new Date().toISOString()}`,
    `machine: nproc ${cores} (${os.cpus()[0]?.model?.trim() ?? 'unknown cpu'}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}, ${os.platform()} ${os.release()}, load avg ${load}`,
  ];
  if (idleBusy !== null) {
    lines.push(`machine busy before the run (background): ${(idleBusy * 100).toFixed(0)}% of ${cores} cores${idleBusy > 0.15 ? '  <- NOT idle: figures are worse and noisier than on an idle machine' : ''}`);
  }
  return lines;
}

// ---------------------------------------------------------------- a clean end, whatever happens
const steps: Array<() => Promise<unknown>> = [];

/**
 * Registers a clean-up step. At the end, after every started process is stopped, the steps run
 * one after the other, last registered first; a failing step is logged and the next one runs.
 */
export function atCleanup(step: () => Promise<unknown>): void {
  steps.push(step);
}

let cleaning: Promise<void> | null = null;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await stopAll(8_000).catch(() => killAllNow());
    for (const step of steps.splice(0).reverse()) {
      await step().catch((err: unknown) => log(`clean-up step failed: ${err instanceof Error ? err.message : String(err)}`));
    }
  })();
  return cleaning;
}

/**
 * Runs `main` (its result is the exit code), then cleans up and exits. Ctrl-C, SIGTERM and the
 * hard deadline clean up too; on exit anything still alive is killed.
 */
export async function runBench(main: () => Promise<number>, hardDeadlineMs: number): Promise<never> {
  process.on('exit', killAllNow);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping everything`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  const deadline = setTimeout(() => {
    log(`still running after ${(hardDeadlineMs / 1_000).toFixed(0)} s: giving up`);
    void cleanup().finally(() => process.exit(2));
  }, hardDeadlineMs);
  deadline.unref();

  let exitCode = 1;
  try {
    exitCode = await main();
  } catch (err) {
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    exitCode = 1;
  } finally {
    await cleanup();
    log(`done in ${elapsedSeconds().toFixed(1)} s; every started process stopped`);
  }
  process.exit(exitCode);
}
