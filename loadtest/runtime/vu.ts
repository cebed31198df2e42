// One k6 VU in a worker thread: sets k6's globals (__ENV, __VU,
// __ITER, open), runs the script's init context once, then whatever the host asks (an iteration
// of a scenario's exec function, setup, teardown, handleSummary), one at a time.
import { readFileSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';

import { connect, vu } from './context.js';
import type { FromVu, ToVu, VuWorkerData } from './protocol.js';

const given = workerData as VuWorkerData;
const host = parentPort;
if (!host) throw new Error('runtime/vu.js runs as a worker thread of the runtime');

connect(given.httpPort, given.flag);
vu.id = given.vuId;
vu.scriptDir = given.scriptDir;

const globals = globalThis as Record<string, unknown>;
globals.__ENV = { ...given.env };
globals.__VU = given.vuId;
globals.__ITER = 0;
// k6's open(): the init context only; a relative path is relative to the script.
globals.open = (path: string, mode?: string): string => {
  if (!vu.inInit) throw new Error('open() is only available in the init context (the script top level)');
  if (mode !== undefined) throw new Error(`open(path, "${mode}") is not implemented by this runtime: only text`);
  return readFileSync(resolvePath(vu.scriptDir, path), 'utf8');
};

const post = (message: FromVu): void => host.postMessage(message);
const describe = (err: unknown): string => (err instanceof Error ? (err.stack ?? err.message) : String(err));

type Exported = Record<string, unknown>;
let script: Exported;
try {
  script = (await import(given.scriptUrl)) as Exported;
  vu.inInit = false;
  post({ type: 'ready', options: script.options, metrics: vu.declared, exports: Object.keys(script) });
} catch (err) {
  post({ type: 'init-error', error: describe(err) });
  throw err;
}
const setupData: unknown = given.data === undefined ? undefined : JSON.parse(given.data);

function exported(name: string): (...args: unknown[]) => unknown {
  const fn = script[name];
  if (typeof fn !== 'function') throw new Error(`the script exports no function "${name}"`);
  return fn as (...args: unknown[]) => unknown;
}

async function handle(message: ToVu): Promise<unknown> {
  switch (message.type) {
    case 'iterate': {
      vu.running = message;
      globals.__ITER = message.iteration;
      try {
        return await exported(message.exec)(setupData);
      } finally {
        vu.running = undefined;
        vu.group = '';
      }
    }
    case 'setup':
      return typeof script.setup === 'function' ? ((await exported('setup')()) ?? null) : null;
    case 'teardown':
      return typeof script.teardown === 'function' ? await exported('teardown')(message.data) : undefined;
    case 'summary':
      return typeof script.handleSummary === 'function' ? await exported('handleSummary')(message.data) : undefined;
  }
}

host.on('message', (message: ToVu) => {
  void handle(message).then(
    (value) => {
      const samples = vu.samples.splice(0);
      // Only setup's data and handleSummary's outputs travel back; an iteration's value is dropped, as in k6.
      post(message.type === 'setup' || message.type === 'summary' ? { type: 'done', samples, value: JSON.parse(JSON.stringify(value ?? null)) } : { type: 'done', samples });
    },
    (err: unknown) => post({ type: 'done', samples: vu.samples.splice(0), error: describe(err) }),
  );
});
