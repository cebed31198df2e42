// Child processes for the benchmark, started through @herald/launcher (the one launcher of npm start,
// the test stacks and the benchmarks); CPU and memory use from /proc.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

import { launch, type LaunchedProcess, type LaunchOptions } from '@herald/launcher';

export type BenchProcess = LaunchedProcess;

/**
 * How a benchmark's processes differ from a test's: readiness is a TCP connect, not a log line
 * (the services run with LOG_LEVEL=warn and print nothing), the last 64 KiB of output are kept for
 * error messages, and a stop that takes longer than 8 s ends in SIGKILL.
 */
export const BENCH_LAUNCH = { timeoutMs: 60_000, keepOutput: 65_536, stopGraceMs: 8_000 } satisfies Partial<LaunchOptions>;

export interface StartOptions {
  name: string;
  /** Script path relative to the repository root. */
  entry: string;
  /** Resolves once 127.0.0.1:`port` accepts connections. */
  port: number;
  env?: Record<string, string>;
  /** Default none (a helper such as the push peer); Herald's processes pass TELEMETRY_ARGS. */
  nodeArgs?: string[];
  /** Arguments after the script. */
  args?: string[];
  timeoutMs?: number;
}

/** Spawns `node [nodeArgs] entry [args]` and resolves once 127.0.0.1:`port` accepts connections. */
export function startProcess({ name, entry, port, env, nodeArgs = [], args, timeoutMs = BENCH_LAUNCH.timeoutMs }: StartOptions): Promise<BenchProcess> {
  return launch({ ...BENCH_LAUNCH, name, entry, env, nodeArgs, args, ready: { port }, timeoutMs });
}

/** utime + stime in seconds from the text of /proc/<pid>/stat (fields 14 and 15, 1-based; 12 and 13 after "state"). */
function statCpuSeconds(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux); null elsewhere. */
export function cpuSeconds(pid: number | undefined): number | null {
  try {
    return statCpuSeconds(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

export interface Jiffies {
  busy: number;
  total: number;
}

/** Busy and total jiffies of the whole machine, from /proc/stat; null elsewhere. */
export function machineJiffies(): Jiffies | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const values = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = (values[3] ?? 0) + (values[4] ?? 0);
    const total = values.slice(0, 8).reduce((sum, value) => sum + value, 0);
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

/** Share of the machine busy over `ms` (other tests, builds, ...), before a benchmark starts; null elsewhere. */
export async function backgroundLoad(ms = 1_000): Promise<number | null> {
  const before = machineJiffies();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const after = machineJiffies();
  if (!before || !after) return null;
  return (after.busy - before.busy) / (after.total - before.total);
}

/**
 * The live processes whose command name is one of `names` (or starts with it: `postgres` also
 * matches the backends), with the text of their /proc/<pid>/stat; null elsewhere.
 */
function processesByName<Name extends string>(names: readonly Name[]): Map<Name, { pid: number; stat: string }[]> | null {
  try {
    const found = new Map<Name, { pid: number; stat: string }[]>(names.map((name) => [name, []]));
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      } catch {
        continue;
      }
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const name = names.find((candidate) => comm === candidate || comm.startsWith(candidate));
      if (name) found.get(name)?.push({ pid: Number(entry), stat });
    }
    return found;
  } catch {
    return null;
  }
}

/**
 * CPU seconds used so far by all live processes whose command name is one of `names`
 * (e.g. postgres backends, redis-server), from /proc; null elsewhere. Processes that exit
 * between two samples drop out, so a difference is a lower bound.
 */
export function cpuSecondsByName<Name extends string>(names: readonly Name[]): Record<Name, number> | null {
  const found = processesByName(names);
  if (!found) return null;
  const totals = Object.fromEntries(names.map((name) => [name, 0])) as Record<Name, number>;
  for (const [name, list] of found) for (const { stat } of list) totals[name] += statCpuSeconds(stat);
  return totals;
}

/** Resident memory of one process, in KiB, from /proc/<pid>/status. */
export interface Memory {
  /** VmRSS: resident now. */
  rss: number;
  /** VmHWM: the peak resident size over the process's life. */
  hwm: number;
  /** RssAnon: private (heap, stacks). */
  anon: number;
  /** RssShmem: shared memory touched (PostgreSQL's shared buffers). */
  shmem: number;
}

/** Resident memory of a process (Linux); null if it is gone or elsewhere. */
export function memoryOf(pid: number | undefined): Memory | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
    return { rss: field('VmRSS'), hwm: field('VmHWM'), anon: field('RssAnon'), shmem: field('RssShmem') };
  } catch {
    return null;
  }
}

/** Memory of every live process whose command name is one of `names` (see cpuSecondsByName), per pid; null elsewhere. */
export function memoryByName<Name extends string>(names: readonly Name[]): Record<Name, Map<number, Memory>> | null {
  const found = processesByName(names);
  if (!found) return null;
  const result = Object.fromEntries(names.map((name) => [name, new Map<number, Memory>()])) as Record<Name, Map<number, Memory>>;
  for (const [name, list] of found) {
    for (const { pid } of list) {
      const memory = memoryOf(pid);
      if (memory) result[name].set(pid, memory);
    }
  }
  return result;
}

/** Open sockets (TCP connections, listeners, pipes) of a process, from /proc/<pid>/fd (Linux); null elsewhere. */
export function socketCount(pid: number | undefined): number | null {
  try {
    let count = 0;
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) count += 1;
      } catch {
        // Closed between the listing and the read.
      }
    }
    return count;
  } catch {
    return null;
  }
}
