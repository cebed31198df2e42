import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';

import { backoffMs, type BackoffOptions } from '@herald/backoff';
import { repositoryRoot } from '@herald/components';

/**
 * Starting one of Herald's processes (or a helper such as a push peer) on this machine: the one
 * launcher behind `npm start` (scripts/supervise.mjs), the test stacks (@herald/testkit) and the
 * benchmarks (loadtest/bench).
 */

/** Node arguments of every Herald process, as in production: OpenTelemetry starts before anything else. */
export const TELEMETRY_ARGS: readonly string[] = ['--import', '@herald/telemetry/register'];

const PARENT_GUARD = new URL('./parent-guard.js', import.meta.url).href;

/** Started again when it exits, as the cluster does. */
export interface RestartPolicy {
  /** Restart n waits `backoffMs(n, backoff)`. */
  backoff: BackoffOptions;
  /** A process that ran this long before exiting was healthy: its next restart starts the backoff over. */
  healthyAfterMs: number;
}

export type LaunchEvent =
  | { kind: 'started'; pid: number | undefined }
  /** `restartInMs`: when it is started again (absent when it is not). */
  | { kind: 'exited'; code: number | string; restartInMs?: number };

export interface LaunchOptions {
  /** HERALD_SERVICE, and OTEL_SERVICE_NAME herald-<name>. */
  name: string;
  /** Script path, relative to the repository root (or absolute). */
  entry: string;
  /** Over this process's own environment. */
  env?: Record<string, string>;
  /** Default TELEMETRY_ARGS. */
  nodeArgs?: readonly string[];
  /** Arguments after the script. */
  args?: readonly string[];
  /** Resolves once its output matches (a RegExp) or 127.0.0.1:`port` accepts connections; at once without. */
  ready?: RegExp | { port: number };
  /**
   * How long readiness may take. A safety net, not a speed check: on 2 cores running four test
   * files at once a service's start (Node, its migrations) took over 20 s. Default 60 s.
   */
  timeoutMs?: number;
  /** `pipe` (default): its output is kept for `output()`; `inherit`: it prints where this process prints. */
  stdio?: 'pipe' | 'inherit';
  /** The most output kept, in characters (the latest). Default all of it. */
  keepOutput?: number;
  /** `stop()` sends SIGKILL this long after its signal. Default: it waits for the exit. */
  stopGraceMs?: number;
  restart?: RestartPolicy;
  /** Each start and exit (for a log line). */
  onEvent?(event: LaunchEvent): void;
}

export interface LaunchedProcess {
  name: string;
  /** Its Prometheus endpoint, from the METRICS_PORT it was given (none when not given, or 0). */
  metricsUrl: string | undefined;
  /** The running child (after a restart, the new one). */
  readonly child: ChildProcess;
  readonly pid: number | undefined;
  /** What it printed so far (with `stdio: 'pipe'`). */
  output(): string;
  /** Resolves with the exit code (or signal name) once it has ended and is not started again. */
  exited: Promise<number | string>;
  /** Sends `signal` (default SIGTERM; SIGKILL after the grace period when one is set), no more restarts; resolves with `exited`. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<number | string>;
}

const launched = new Set<LaunchedProcess>();

function portAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Starts `node [nodeArgs] entry [args]` from the repository root; resolves once it is ready. */
export async function launch(options: LaunchOptions): Promise<LaunchedProcess> {
  const { name, entry, env = {}, nodeArgs = TELEMETRY_ARGS, args = [], ready, timeoutMs = 60_000, stdio = 'pipe', keepOutput = Infinity, restart, onEvent } = options;
  if (ready instanceof RegExp && stdio !== 'pipe') throw new Error(`${name}: readiness by output needs stdio 'pipe'`);
  let output = '';
  const keep = (chunk: Buffer): void => {
    output += chunk.toString();
    if (output.length > keepOutput) output = output.slice(-keepOutput);
  };
  let stopping = false;
  let attempt = 0;
  /** Set while it waits to be started again. */
  let restartTimer: NodeJS.Timeout | undefined;
  let lastCode: number | string = -1;
  let ended!: (code: number | string) => void;
  const exited = new Promise<number | string>((resolve) => (ended = resolve));
  let child!: ChildProcess;

  const start = (): void => {
    const startedAt = Date.now();
    restartTimer = undefined;
    child = spawn(process.execPath, [...nodeArgs, '--import', PARENT_GUARD, entry, ...args], {
      cwd: repositoryRoot,
      env: { ...process.env, HERALD_SERVICE: name, OTEL_SERVICE_NAME: `herald-${name}`, ...env },
      // Standard input: the pipe whose end tells the process that this one died (parent-guard.ts).
      stdio: ['pipe', stdio, stdio],
    });
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    onEvent?.({ kind: 'started', pid: child.pid });
    child.once('exit', (code, signal) => {
      lastCode = signal ?? code ?? -1;
      if (stopping || !restart) {
        onEvent?.({ kind: 'exited', code: lastCode });
        launched.delete(handle);
        ended(lastCode);
        return;
      }
      attempt = Date.now() - startedAt >= restart.healthyAfterMs ? 1 : attempt + 1;
      const restartInMs = backoffMs(attempt, restart.backoff);
      onEvent?.({ kind: 'exited', code: lastCode, restartInMs });
      restartTimer = setTimeout(start, restartInMs);
    });
  };

  const handle: LaunchedProcess = {
    name,
    metricsUrl: env.METRICS_PORT && env.METRICS_PORT !== '0' ? `http://127.0.0.1:${env.METRICS_PORT}/metrics` : undefined,
    get child() {
      return child;
    },
    get pid() {
      return child.pid;
    },
    output: () => output,
    exited,
    async stop(signal = 'SIGTERM', graceMs = options.stopGraceMs) {
      stopping = true;
      if (restartTimer !== undefined) {
        // Between two starts: nothing is running.
        clearTimeout(restartTimer);
        restartTimer = undefined;
        launched.delete(handle);
        ended(lastCode);
        return exited;
      }
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
        const killer = graceMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(killer);
      }
      return exited;
    },
  };
  start();
  launched.add(handle);
  if (ready !== undefined) {
    await whenReady(handle, ready, timeoutMs).catch(async (err: unknown) => {
      await handle.stop('SIGKILL');
      throw err;
    });
  }
  return handle;
}

/** Resolves once `ready` holds; rejects if the first child exits before, or after `timeoutMs`. */
function whenReady(handle: LaunchedProcess, ready: RegExp | { port: number }, timeoutMs: number): Promise<void> {
  const { child, name } = handle;
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const settle = (err?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.off('exit', onExit);
      child.stdout?.off('data', onData);
      child.stderr?.off('data', onData);
      if (err) reject(err);
      else resolve();
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => settle(new Error(`${name} exited (${signal ?? code}) before it was ready:\n${handle.output()}`));
    // Registered after the output is kept, so the chunk is already part of it.
    const onData = (): void => {
      if (ready instanceof RegExp && ready.test(handle.output())) settle();
    };
    const what = ready instanceof RegExp ? 'become ready' : `listen on ${ready.port}`;
    const timer = setTimeout(() => settle(new Error(`${name} did not ${what} within ${timeoutMs} ms:\n${handle.output()}`)), timeoutMs);
    child.once('exit', onExit);
    if (ready instanceof RegExp) {
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      onData();
      return;
    }
    void (async () => {
      while (!settled) {
        if (await portAccepts(ready.port)) settle();
        else await new Promise((wait) => setTimeout(wait, 100));
      }
    })();
  });
}

/** Stops every process launched here that is still running (see `LaunchedProcess.stop`). */
export async function stopAll(graceMs?: number): Promise<void> {
  await Promise.all([...launched].map((running) => running.stop('SIGTERM', graceMs)));
}

/** Last resort on exit: synchronous SIGKILL of every process launched here that is still alive. */
export function killAllNow(): void {
  for (const running of launched) {
    if (running.child.exitCode === null && running.child.signalCode === null) running.child.kill('SIGKILL');
  }
}
