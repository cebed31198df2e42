// The state of the VU this worker thread is (what k6 keeps per VU): its id, the iteration running,
// the samples its checks and custom metrics produced, the response callback, and the two ways it
// reaches the host's HTTP: blocking (k6's http.get and friends) and asynchronous (asyncRequest).
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';

import type { MetricType } from '../runner/metrics.js';
import { notImplemented, type ExpectedStatuses, type HttpAnswer, type HttpCall, type MetricDeclaration, type Tags, type ToVu, type WireRequest, type WireResponse, type WireSample } from './protocol.js';

type Running = Extract<ToVu, { type: 'iterate' }>;

let port: MessagePort | undefined;
let flag: Int32Array | undefined;
let nextId = 1;
const pendingAsync = new Map<number, (response: WireResponse) => void>();

export const vu = {
  id: 0,
  /** True while the script's module body (k6's init context) runs. */
  inInit: true,
  /** The iteration running now, undefined in setup/teardown/handleSummary. */
  running: undefined as Running | undefined,
  /** The current group path ('' outside any group; '::a::b' inside). */
  group: '',
  expected: undefined as ExpectedStatuses | undefined,
  samples: [] as WireSample[],
  declared: [] as MetricDeclaration[],
  scriptDir: '',
};

export function connect(httpPort: MessagePort, shared: SharedArrayBuffer): void {
  port = httpPort;
  flag = new Int32Array(shared);
  port.on('message', settle);
  // Pending async requests keep the VU's loop alive; an idle VU must not.
  port.unref();
}

/** Tags every sample of this VU carries now: the scenario's, the group. */
export function currentTags(): Tags {
  return { ...(vu.running?.tags ?? {}), ...(vu.running ? { scenario: vu.running.scenario } : {}), group: vu.group };
}

export function record(metric: string, value: number, tags: Tags): void {
  vu.samples.push({ metric, value, tags });
}

export function declareMetric(name: string, type: MetricType, isTime: boolean): void {
  if (!vu.inInit) throw new Error(`metric "${name}": k6 creates metrics only in the init context (the script's top level)`);
  vu.declared.push({ name, type, isTime });
}

function channel(): { port: MessagePort; flag: Int32Array } {
  if (!port || !flag) throw new Error('the VU is not connected to the host');
  if (vu.inInit) throw new Error('k6/http: requests cannot be made in the init context (make them in setup() or an iteration)');
  return { port, flag };
}

/** A blocking request: the VU waits on the shared flag while the host's main thread makes it. */
export function requestSync(request: WireRequest): WireResponse {
  const { port: httpPort, flag: shared } = channel();
  const id = nextId++;
  Atomics.store(shared, 0, 0);
  httpPort.postMessage({ id, sync: true, request } satisfies HttpCall);
  Atomics.wait(shared, 0, 0);
  // Answers to asyncRequests made earlier may be queued before this one: they resolve their promises.
  for (;;) {
    const answer = receiveMessageOnPort(httpPort)?.message as HttpAnswer | undefined;
    if (!answer) throw new Error(`k6/http: the host signalled request ${id} without answering it`);
    if (answer.id === id) return answer.response;
    settle(answer);
  }
}

function settle(answer: HttpAnswer): void {
  const resolve = pendingAsync.get(answer.id);
  pendingAsync.delete(answer.id);
  resolve?.(answer.response);
}

export function requestAsync(request: WireRequest): Promise<WireResponse> {
  const { port: httpPort } = channel();
  const id = nextId++;
  return new Promise((resolve) => {
    pendingAsync.set(id, resolve);
    httpPort.ref();
    httpPort.postMessage({ id, sync: false, request } satisfies HttpCall);
  }).finally(() => {
    if (pendingAsync.size === 0) httpPort.unref();
  }) as Promise<WireResponse>;
}

/** k6's sleep(): blocks the VU (never the host). */
export function blockFor(ms: number): void {
  if (vu.inInit) throw new Error('sleep() cannot be called in the init context');
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

export { notImplemented };
