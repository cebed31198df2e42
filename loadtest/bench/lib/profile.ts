// Summarises a V8 .cpuprofile (from node --cpu-prof): self time per bucket (package / area) and
// the hottest functions. Usage as a script: node loadtest/dist/bench/lib/profile.js <file.cpuprofile>
import { realpathSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import type { Profiler } from 'node:inspector';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A span on the monotonic clock, in microseconds (process.hrtime.bigint() / 1000n). */
export interface ProfileWindow {
  fromMicros: number;
  toMicros: number;
}

function bucketOf(url: string, functionName: string): string {
  if (!url) {
    if (functionName.startsWith('(')) return functionName; // (garbage collector), (idle), (program)
    return '(native/builtin)';
  }
  const modules = url.lastIndexOf('/node_modules/');
  if (modules !== -1) {
    const rest = url.slice(modules + '/node_modules/'.length).split('/');
    return rest[0]?.startsWith('@') ? `${rest[0]}/${rest[1]}` : (rest[0] ?? url);
  }
  if (url.startsWith('node:')) {
    const name = url.slice(5);
    return `node:${name.split('/')[0] === 'internal' ? name.split('/').slice(0, 2).join('/') : name}`;
  }
  const herald = /\/(gateway|services\/[^/]+|packages\/[^/]+|proto)\//.exec(url);
  if (herald) return `herald:${herald[1]}`;
  return url;
}

/**
 * `window`: only samples inside it count. V8 profile timestamps use the same clock on Linux; if no
 * sample falls inside the window, the whole profile is used (and the summary says so).
 */
export async function summarizeProfile(file: string, top = 20, window: ProfileWindow | undefined = undefined): Promise<string> {
  const profile = JSON.parse(await readFile(file, 'utf8')) as Profiler.Profile;
  let samples = profile.samples ?? [];
  let deltas = profile.timeDeltas ?? [];
  let { startTime, endTime } = profile;
  let windowNote = 'whole profile (start-up and warm-up included)';
  if (window) {
    const keep: number[] = [];
    const keepDeltas: number[] = [];
    let at = startTime;
    for (let index = 0; index < samples.length; index += 1) {
      at += deltas[index] ?? 0;
      if (at >= window.fromMicros && at <= window.toMicros) {
        keep.push(samples[index] as number);
        keepDeltas.push(deltas[index] ?? 0);
      }
    }
    if (keep.length > 0) {
      samples = keep;
      deltas = keepDeltas;
      startTime = window.fromMicros;
      endTime = window.toMicros;
      windowNote = 'measured window only';
    }
  }
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfMicros = new Map<number, number>();
  for (let index = 0; index < samples.length; index += 1) {
    const id = samples[index] as number;
    selfMicros.set(id, (selfMicros.get(id) ?? 0) + (deltas[index] ?? 0));
  }
  // Inclusive time per area: a sample counts for every area on its stack (once each).
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const areasOnStack = new Map<number, Set<string>>();
  const stackAreas = (id: number): Set<string> => {
    let areas = areasOnStack.get(id);
    if (areas) return areas;
    const node = byId.get(id);
    const parent = parentOf.get(id);
    areas = new Set(parent === undefined ? [] : stackAreas(parent));
    if (node?.callFrame.url) areas.add(bucketOf(node.callFrame.url, node.callFrame.functionName));
    areasOnStack.set(id, areas);
    return areas;
  };
  const inclusive = new Map<string, number>();
  const buckets = new Map<string, number>();
  const functions = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, micros] of selfMicros) {
    const node = byId.get(id);
    if (!node) throw new Error(`${file}: sample of unknown node ${id}`);
    const { functionName, url, lineNumber } = node.callFrame;
    const name = functionName || '(anonymous)';
    if (name === '(idle)') {
      idle += micros;
      continue;
    }
    total += micros;
    for (const area of stackAreas(id)) inclusive.set(area, (inclusive.get(area) ?? 0) + micros);
    const bucket = bucketOf(url, name);
    buckets.set(bucket, (buckets.get(bucket) ?? 0) + micros);
    const key = `${name}  ${url ? `${url.replace(/^file:\/\/.*?\/node_modules\//, '').replace(/^file:\/\/.*?\/main\//, '')}:${lineNumber + 1}` : ''}`;
    functions.set(key, (functions.get(key) ?? 0) + micros);
  }
  const sorted = (map: Map<string, number>): [string, number][] => [...map].sort((a, b) => b[1] - a[1]);
  const lines: string[] = [];
  const wall = endTime - startTime;
  lines.push(`profile ${file} (${windowNote})`);
  lines.push(`  wall ${(wall / 1e6).toFixed(1)} s, on-CPU (non-idle) ${(total / 1e6).toFixed(1)} s, idle ${(idle / 1e6).toFixed(1)} s`);
  lines.push('  self time by area (share of on-CPU):');
  for (const [bucket, micros] of sorted(buckets).slice(0, top)) {
    lines.push(`    ${((100 * micros) / total).toFixed(1).padStart(5)}%  ${bucket}`);
  }
  lines.push('  inclusive time by area (on the stack at all; overlaps):');
  for (const [bucket, micros] of sorted(inclusive).slice(0, top)) {
    lines.push(`    ${((100 * micros) / total).toFixed(1).padStart(5)}%  ${bucket}`);
  }
  lines.push('  hottest functions (self):');
  for (const [name, micros] of sorted(functions).slice(0, top)) {
    lines.push(`    ${((100 * micros) / total).toFixed(1).padStart(5)}%  ${name}`);
  }
  return lines.join('\n');
}

/** What a profiled process was, and the window of its profile that counts. */
export interface ProfiledProcess {
  label: string;
  window: ProfileWindow | undefined;
}

/**
 * Summaries of the main-thread profiles that `node --cpu-prof --cpu-prof-dir=<dir>` wrote into
 * `dir`, labelled by pid (`labels`; unknown pids by number), oldest first, then where they are kept.
 */
export async function summarizeProfileDir(dir: string, labels: Readonly<Record<string, ProfiledProcess>>, top = 20): Promise<string> {
  const parts: string[] = [];
  const files = (await readdir(dir)).filter((file) => file.endsWith('.cpuprofile'));
  for (const file of files.sort()) {
    // CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile; thread 0 is the main thread (the others
    // are the ESM loader-hooks thread of --import, idle after start-up).
    const [, pid, thread] = /\.(\d+)\.(\d+)\.\d+\.cpuprofile$/.exec(file) ?? [];
    if (thread !== '0' || pid === undefined) continue;
    const known = labels[pid];
    parts.push(`\n[${known?.label ?? `pid ${pid}`}] ${await summarizeProfile(join(dir, file), top, known?.window)}`);
  }
  parts.push(`\n(profiles kept in ${dir}; open them in Chrome DevTools or re-summarise with node loadtest/dist/bench/lib/profile.js <file>)`);
  return parts.join('\n');
}

if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const file of process.argv.slice(2)) console.log(await summarizeProfile(file, Number(process.env.TOP ?? 25)));
}
