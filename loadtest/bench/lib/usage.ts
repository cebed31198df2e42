// CPU and memory of a set of processes over a window, from /proc: CPU seconds between start() and
// stop(), cores used per sampling interval (mean, p90, max), resident memory sampled every
// interval (peak), and VmHWM when stopped. Processes are either known pids (our children) or
// groups by command name (postgres: the server and every backend; java: Kafka).
import { cpuSeconds, cpuSecondsByName, machineJiffies, memoryByName, memoryOf, type Jiffies } from './processes.js';

export interface WatchedProcess {
  label: string;
  pid: number | undefined;
}

export interface WatchedGroup {
  label: string;
  /** Command name (prefix), as in cpuSecondsByName. */
  comm: string;
}

export interface ProcessUsage {
  label: string;
  /** CPU seconds (user + system) used inside the window; null if unreadable. */
  cpuSeconds: number | null;
  /** Cores used per sampling interval: mean over the window, 90th percentile, max (1 = one core). */
  cores: { mean: number; p90: number; max: number } | null;
  /** Largest VmRSS seen by the sampler, KiB. For a group: Σ RssAnon of its processes + the largest RssShmem (shared memory counted once). */
  peakRssKb: number | null;
  /** VmHWM when the window closed, KiB (the process's lifetime peak). For a group: its largest member's. */
  hwmKb: number | null;
  /** Groups only: the largest Σ VmRSS of the members (shared memory counted in each) and the most members seen. */
  group?: { peakSumRssKb: number; processes: number };
}

export interface UsageReport {
  seconds: number;
  processes: ProcessUsage[];
  /** The whole machine: busy share of all cores over the window. */
  machineBusyShare: number | null;
  /** This process (the benchmark driver) in CPU seconds. */
  selfCpuSeconds: number;
}

interface Track {
  label: string;
  read: () => number | null;
  first: number | null;
  last: number | null;
  perInterval: number[];
  peakRss: number | null;
  peakSumRss: number;
  members: number;
  memory: () => { rss: number; sumRss: number; members: number; hwm: number } | null;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? 0;
}

export class UsageMonitor {
  private readonly tracks: Track[];
  private timer: NodeJS.Timeout | undefined;
  private startedAt = 0;
  private lastAt = 0;
  private machine: Jiffies | null = null;
  private self: NodeJS.CpuUsage | undefined;

  constructor(processes: readonly WatchedProcess[], groups: readonly WatchedGroup[], private readonly intervalMs = 1_000) {
    const base = { first: null, last: null, peakRss: null, peakSumRss: 0, members: 0 };
    this.tracks = [
      ...processes.map(({ label, pid }) => ({
        ...base,
        perInterval: [],
        label,
        read: () => cpuSeconds(pid),
        memory: () => {
          const memory = memoryOf(pid);
          return memory && { rss: memory.rss, sumRss: memory.rss, members: 1, hwm: memory.hwm };
        },
      })),
      ...groups.map(({ label, comm }) => ({
        ...base,
        perInterval: [],
        label,
        read: () => cpuSecondsByName([comm])?.[comm] ?? null,
        memory: () => {
          const members = memoryByName([comm])?.[comm];
          if (!members || members.size === 0) return null;
          const all = [...members.values()];
          const sum = (pick: (m: (typeof all)[number]) => number): number => all.reduce((total, m) => total + pick(m), 0);
          return { rss: sum((m) => m.anon) + Math.max(...all.map((m) => m.shmem)), sumRss: sum((m) => m.rss), members: all.length, hwm: Math.max(...all.map((m) => m.hwm)) };
        },
      })),
    ];
  }

  private sample(): void {
    const now = performance.now();
    const seconds = (now - this.lastAt) / 1_000;
    this.lastAt = now;
    for (const track of this.tracks) {
      const value = track.read();
      if (value !== null && track.last !== null && seconds > 0) track.perInterval.push(Math.max(0, value - track.last) / seconds);
      if (value !== null) track.last = value;
      const memory = track.memory();
      if (memory) {
        track.peakRss = Math.max(track.peakRss ?? 0, memory.rss);
        track.peakSumRss = Math.max(track.peakSumRss, memory.sumRss);
        track.members = Math.max(track.members, memory.members);
      }
    }
  }

  start(): void {
    this.startedAt = this.lastAt = performance.now();
    this.machine = machineJiffies();
    this.self = process.cpuUsage();
    for (const track of this.tracks) track.first = track.last = track.read();
    this.sample();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
  }

  /** Closes the window; memory keeps what the sampler saw. */
  stop(): UsageReport {
    clearInterval(this.timer);
    this.sample();
    const seconds = (performance.now() - this.startedAt) / 1_000;
    const machine = machineJiffies();
    const self = process.cpuUsage(this.self);
    return {
      seconds,
      machineBusyShare: this.machine && machine ? (machine.busy - this.machine.busy) / (machine.total - this.machine.total) : null,
      selfCpuSeconds: (self.user + self.system) / 1e6,
      processes: this.tracks.map((track) => {
        const memory = track.memory();
        const cpu = track.first !== null && track.last !== null ? track.last - track.first : null;
        return {
          label: track.label,
          cpuSeconds: cpu,
          cores:
            cpu === null || track.perInterval.length === 0
              ? null
              : { mean: cpu / seconds, p90: percentile(track.perInterval, 90), max: Math.max(...track.perInterval) },
          peakRssKb: track.peakRss,
          hwmKb: memory?.hwm ?? null,
          ...(track.members > 1 ? { group: { peakSumRssKb: track.peakSumRss, processes: track.members } } : {}),
        };
      }),
    };
  }
}
