// The runtime's main thread: runs a k6 script on the runner (runner/engine.ts and its executors).
// The script's TypeScript is compiled here once (compileFolder: types stripped, k6/* imports
// resolved to the shims in shims/); each VU is a worker thread (vu.ts) running that output. The VUs'
// requests are made here, so k6/http can block a VU (Atomics.wait) while this thread does the I/O,
// and every sample lands in the runner's metrics, thresholds and summary.
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MessageChannel, Worker } from 'node:worker_threads';

import ts from 'typescript';

import { runScenario, type RunResult } from '../runner/engine.js';
import { httpRequest } from '../runner/http.js';
import { Counter, Gauge, metricNamed, Rate, Trend } from '../runner/metrics.js';
import type { Iteration, LoadScenario, RunEnv, ScenarioConfig, VirtualUser } from '../runner/scenario.js';
import { textSummary, type Summary } from '../runner/summary.js';
import { readOptions, type K6Options, type K6Scenario } from './options.js';
import { RUNTIME_LABEL, type FromVu, type HttpCall, type HttpAnswer, type MetricDeclaration, type Tags, type ToVu, type VuWorkerData } from './protocol.js';

const SHIMS = ['k6', 'k6/http', 'k6/metrics', 'k6/execution', 'k6/crypto', 'k6/encoding', 'k6/data', 'k6/timers'] as const;
const shimUrls = Object.fromEntries(SHIMS.map((name) => [name, new URL(`./shims/${name === 'k6' ? 'k6' : name.slice(3)}.js`, import.meta.url).href]));

// k6 emits group_duration for every group; the runner has no such builtin.
if (!metricNamed('group_duration')) new Trend('group_duration', true);

/**
 * The module loader: every .ts and .js file under the script's folder, types stripped
 * (typescript's transpileModule, nothing else changed, as k6's esbuild does), its imports of k6/*
 * resolved to this runtime's shims and its relative imports to the transpiled files, written to
 * `out`. Anything else a script imports (node:*, packages, URLs) is refused: k6 would not have it.
 * (Resolved here once rather than with module.register hooks in each VU: on Node 20 every worker
 * that registers hooks starts its own loader thread, which more than doubled a VU's start-up.)
 */
async function compileFolder(folder: string, out: string): Promise<void> {
  const files = (await readdir(folder, { recursive: true })).filter((file) => /\.[jt]s$/.test(file) && !file.endsWith('.d.ts'));
  const known = new Set(files.map((file) => join(folder, file)));
  for (const file of files) {
    const path = join(folder, file);
    const resolveSpecifier = (specifier: string): string => {
      const shim = shimUrls[specifier];
      if (shim !== undefined) return shim;
      if (!/^\.\.?\//.test(specifier)) throw new Error(`${path}: import "${specifier}" is neither a k6 module this runtime has nor a relative module`);
      const target = join(dirname(path), specifier);
      if (!known.has(target)) throw new Error(`${path}: import "${specifier}" is not a .ts or .js file of ${folder}`);
      return specifier.replace(/\.ts$/, '.js');
    };
    const rewrite: ts.TransformerFactory<ts.SourceFile> = (context) => (source) =>
      context.factory.updateSourceFile(
        source,
        source.statements.map((statement) => {
          if (ts.isImportDeclaration(statement) && ts.isStringLiteral(statement.moduleSpecifier)) {
            return context.factory.updateImportDeclaration(statement, statement.modifiers, statement.importClause, context.factory.createStringLiteral(resolveSpecifier(statement.moduleSpecifier.text)), statement.attributes);
          }
          if (ts.isExportDeclaration(statement) && statement.moduleSpecifier && ts.isStringLiteral(statement.moduleSpecifier)) {
            return context.factory.updateExportDeclaration(statement, statement.modifiers, statement.isTypeOnly, statement.exportClause, context.factory.createStringLiteral(resolveSpecifier(statement.moduleSpecifier.text)), statement.attributes);
          }
          return statement;
        }),
      );
    const output = ts.transpileModule(await readFile(path, 'utf8'), {
      fileName: path,
      reportDiagnostics: true,
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true, sourceMap: false },
      transformers: { after: [rewrite] },
    });
    const errors = output.diagnostics?.filter((diagnostic) => diagnostic.category === ts.DiagnosticCategory.Error) ?? [];
    if (errors.length > 0) throw new Error(`${path}: ${errors.map((diagnostic) => ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')).join('; ')}`);
    if (/\bimport\s*\(|\brequire\s*\(/.test(output.outputText)) throw new Error(`${path}: dynamic import() and require() are not supported (k6 has neither)`);
    const target = join(out, file.replace(/\.ts$/, '.js'));
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, output.outputText);
  }
  await writeFile(join(out, 'package.json'), '{ "type": "module" }\n');
}

interface Pending {
  resolve(message: Extract<FromVu, { type: 'done' }>): void;
  reject(err: Error): void;
}

/** One VU: its worker, the port its requests come in on, the flag a blocking request waits on. */
class VuWorker {
  private pending: Pending | undefined;
  /** The signal of the iteration running (its requests are aborted with it). */
  signal: AbortSignal = new AbortController().signal;
  private readonly worker: Worker;
  readonly ready: Promise<Extract<FromVu, { type: 'ready' }>>;

  constructor(data: Omit<VuWorkerData, 'httpPort' | 'flag'>) {
    const { port1, port2 } = new MessageChannel();
    const flag = new SharedArrayBuffer(4);
    const waiting = new Int32Array(flag);
    this.worker = new Worker(new URL('./vu.js', import.meta.url), { workerData: { ...data, httpPort: port2, flag } satisfies VuWorkerData, transferList: [port2] });
    port1.on('message', (call: HttpCall) => {
      void httpRequest(call.request, this.signal).then((response) => {
        port1.postMessage({ id: call.id, response } satisfies HttpAnswer);
        if (call.sync) {
          Atomics.store(waiting, 0, 1);
          Atomics.notify(waiting, 0);
        }
      });
    });
    this.ready = new Promise((resolve, reject) => {
      const fail = (err: Error): void => {
        reject(err);
        this.pending?.reject(err);
        this.pending = undefined;
      };
      this.worker.on('message', (message: FromVu) => {
        if (message.type === 'ready') resolve(message);
        else if (message.type === 'init-error') fail(new Error(`VU ${data.vuId}: the init context failed: ${message.error}`));
        else {
          const pending = this.pending;
          this.pending = undefined;
          pending?.resolve(message);
        }
      });
      this.worker.on('error', fail);
      this.worker.on('exit', (code) => {
        port1.close();
        fail(new Error(`VU ${data.vuId}: its worker exited (${code})`));
      });
    });
    // A worker that fails to start is reported through ready; nobody else may wait on it.
    this.ready.catch(() => undefined);
  }

  /** One call; its samples are recorded here; an error the script threw rejects. */
  async call(message: ToVu, signal?: AbortSignal): Promise<unknown> {
    await this.ready;
    if (this.pending) throw new Error('a VU runs one thing at a time');
    if (signal) this.signal = signal;
    // Past the graceful stop an iteration is cut off: k6 interrupts it, here its worker ends.
    const cutOff = (): void => void this.worker.terminate();
    signal?.addEventListener('abort', cutOff, { once: true });
    const done = await new Promise<Extract<FromVu, { type: 'done' }>>((resolve, reject) => {
      this.pending = { resolve, reject };
      this.worker.postMessage(message);
    }).finally(() => signal?.removeEventListener('abort', cutOff));
    for (const sample of done.samples) {
      const metric = metricNamed(sample.metric);
      if (!metric) throw new Error(`a sample of "${sample.metric}", a metric the script did not create in its init context`);
      metric.add(sample.value, sample.tags);
    }
    if (done.error !== undefined) throw new Error(done.error);
    return done.value;
  }

  stop(): Promise<number> {
    return this.worker.terminate();
  }
}

export function declare(metrics: readonly MetricDeclaration[]): void {
  for (const { name, type, isTime } of metrics) {
    const existing = metricNamed(name);
    if (existing) {
      if (existing.type !== type) throw new Error(`metric "${name}" is a ${existing.type} already (k6 builtin or declared twice)`);
      continue;
    }
    if (type === 'counter') new Counter(name);
    else if (type === 'gauge') new Gauge(name);
    else if (type === 'rate') new Rate(name);
    else new Trend(name, isTime);
  }
}

/** The data k6 hands handleSummary: metrics (with their thresholds' results), root_group's checks, state. */
export function k6SummaryData(summary: Summary, thresholds: K6Options['thresholds']): Record<string, unknown> {
  const metrics: Record<string, unknown> = {};
  for (const [name, metric] of Object.entries(summary.metrics)) {
    const results = summary.thresholds.filter((result) => result.key === name);
    metrics[name] = {
      type: metric.type,
      contains: metric.contains,
      values: metric.values,
      ...(name in thresholds ? { thresholds: Object.fromEntries(results.map((result) => [result.expression, { ok: result.ok }])) } : {}),
    };
  }
  // A threshold whose (sub-)metric got no samples is crossed; k6 lists it with the metric too.
  for (const key of Object.keys(thresholds)) {
    if (metrics[key] !== undefined) continue;
    const results = summary.thresholds.filter((result) => result.key === key);
    const metric = metricNamed(key.replace(/\{.*$/, ''));
    // A counter without samples counted 0; the others measured nothing.
    const values = metric?.type === 'counter' ? metric.aggregate([], summary.durationSeconds) : {};
    metrics[key] = { type: metric?.type, contains: 'default', values, thresholds: Object.fromEntries(results.map((result) => [result.expression, { ok: result.ok }])) };
  }
  return {
    runtime: RUNTIME_LABEL,
    metrics,
    root_group: { name: '', path: '', id: 'd41d8cd98f00b204e9800998ecf8427e', groups: [], checks: summary.checks.map((check) => ({ name: check.name, path: `::${check.name}`, id: '', passes: check.passes, fails: check.fails })) },
    options: { summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)'], summaryTimeUnit: '', noColor: true },
    state: { isStdOutTTY: false, isStdErrTTY: false, testRunDurationMs: summary.durationSeconds * 1_000 },
  };
}

export interface ScriptRun {
  readonly script: string;
  /** __ENV of every VU. */
  readonly vars: Readonly<Record<string, string>>;
  readonly env: RunEnv;
}

/** A VU factory for the script: its folder compiled once, each VU a new worker on that output. */
async function vuFactory(script: string, vars: Readonly<Record<string, string>>): Promise<{ start: (data: string | undefined) => VuWorker; remove: () => Promise<void> }> {
  if (!/\.[jt]s$/.test(script)) throw new Error(`${script} is not a .ts or .js file`);
  const out = await mkdtemp(join(tmpdir(), 'herald-k6-script-'));
  const remove = (): Promise<void> => rm(out, { recursive: true, force: true });
  try {
    await compileFolder(dirname(script), out);
  } catch (err) {
    await remove();
    throw err;
  }
  const scriptUrl = pathToFileURL(join(out, basename(script).replace(/\.ts$/, '.js'))).href;
  let nextVuId = 0;
  return { start: (data) => new VuWorker({ vuId: nextVuId++, scriptUrl, scriptDir: dirname(script), env: vars, data }), remove };
}

/** The script's init context alone (what the static checks read): its options, metrics and exports. */
export async function inspectScript(script: string, vars: Readonly<Record<string, string>>): Promise<Extract<FromVu, { type: 'ready' }>> {
  const { start, remove } = await vuFactory(script, vars);
  const worker = start(undefined);
  try {
    return await worker.ready;
  } finally {
    await worker.stop();
    await remove();
  }
}

/** Runs a k6 script: init, setup, the scenarios, teardown, handleSummary. */
export async function runScript({ script, vars, env }: ScriptRun): Promise<RunResult> {
  const { start, remove } = await vuFactory(script, vars);

  // VU 0 runs the init context first (options, metrics), then setup, teardown and handleSummary.
  const main = start(undefined);
  const pool: VuWorker[] = [];
  const all: VuWorker[] = [main];
  try {
    const ready = await main.ready;
    const options = readOptions(ready.options);
    declare(ready.metrics);
    let data = '';
    const counters = new Map<string, number>();

    // VUs beyond the pre-allocated ones start one at a time: a burst of worker threads booting at
    // once starves the running VUs of CPU, which makes them slower and asks for yet more VUs.
    let starting: Promise<unknown> = Promise.resolve();
    const spawn = (): Promise<VuWorker> => {
      const next = starting.then(() => {
        const worker = start(data);
        all.push(worker);
        return worker.ready.then(
          () => worker,
          () => worker,
        );
      });
      starting = next;
      return next;
    };

    const initVu = async (vu: VirtualUser): Promise<void> => {
      vu.state.set('worker', pool.pop() ?? (await spawn()));
    };

    const iterate = async (name: string, config: K6Scenario, iteration: Iteration<unknown>): Promise<void> => {
      const worker = iteration.vu.state.get('worker') as VuWorker;
      const inTest = counters.get(name) ?? 0;
      counters.set(name, inTest + 1);
      const tags: Tags = { ...config.tags };
      await worker.call({ type: 'iterate', exec: config.exec, scenario: name, iteration: iteration.vu.iterations, iterationInTest: inTest, tags }, iteration.signal);
    };

    const scenario: LoadScenario<unknown> = {
      name: basename(script).replace(/\.[jt]s$/, ''),
      description: `k6 script ${relative(process.cwd(), script)}`,
      options: () => ({
        scenarios: Object.fromEntries(
          Object.entries(options.scenarios).map(([name, config]) => {
            if (!ready.exports.includes(config.exec)) throw new Error(`scenario "${name}": the script exports no function "${config.exec}"`);
            return [name, { ...config, initVu, exec: (iteration: Iteration<unknown>) => iterate(name, config, iteration) } as ScenarioConfig<unknown>];
          }),
        ),
        thresholds: options.thresholds,
      }),
      async setup() {
        const value = await main.call({ type: 'setup' });
        data = JSON.stringify(value ?? null);
        // k6 initialises the VUs before the run: the pre-allocated ones (or a constant-vus's) start now.
        const preAllocated = Object.values(options.scenarios).reduce((sum, config) => sum + ('preAllocatedVUs' in config ? config.preAllocatedVUs : config.executor === 'constant-vus' ? config.vus : 0), 0);
        for (let index = 0; index < preAllocated; index += 1) pool.push(start(data));
        all.push(...pool);
        await Promise.all(pool.map((worker) => worker.ready));
        return value;
      },
      async teardown(value) {
        await main.call({ type: 'teardown', data: value });
      },
      async handleSummary(summary) {
        process.stderr.write(`${RUNTIME_LABEL}: ${ready.exports.includes('handleSummary') ? "the script's handleSummary" : 'the end-of-test summary'} follows\n`);
        if (!ready.exports.includes('handleSummary')) return { stdout: textSummary(summary) };
        const outputs = await main.call({ type: 'summary', data: k6SummaryData(summary, options.thresholds) });
        if (typeof outputs !== 'object' || outputs === null || Object.values(outputs).some((content) => typeof content !== 'string')) throw new Error('handleSummary must return { path: content } with string contents');
        return outputs as Record<string, string>;
      },
    };
    return await runScenario(scenario, env);
  } finally {
    await Promise.all(all.map((worker) => worker.stop()));
    await remove();
  }
}
