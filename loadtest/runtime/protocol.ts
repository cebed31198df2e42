// The messages between the runtime's main thread (host.ts: executors, HTTP, metrics) and each VU's
// worker thread (vu.ts: the script and the k6 shims). Everything here is structured-clone data.
import type { MessagePort } from 'node:worker_threads';

import type { MetricType, Tags } from '../runner/metrics.js';

export type { Tags };

/** http.expectedStatuses(...) as data: what counts as an expected response (http_req_failed). */
export interface ExpectedStatuses {
  readonly statuses: readonly number[];
  readonly ranges: ReadonlyArray<{ readonly min: number; readonly max: number }>;
}

export interface WireRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string | undefined;
  readonly timeoutMs: number;
  /** The request's tags (name, group, the scenario's and the request's own). */
  readonly tags: Tags;
  /** undefined: k6's default, 200-399. */
  readonly expected: ExpectedStatuses | undefined;
}

export interface WireResponse {
  readonly status: number;
  readonly statusText: string;
  readonly url: string;
  /** Header names in Go's canonical form, as k6 gives them (X-Ratelimit-Limit). */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly durationMs: number;
  /** '' or the network / time-out error (status 0). */
  readonly error: string;
  /** 0, or k6's code for the error class (1000 generic, 1050 time-out). */
  readonly errorCode: number;
}

export interface WireSample {
  readonly metric: string;
  readonly value: number;
  readonly tags: Tags;
}

export interface MetricDeclaration {
  readonly name: string;
  readonly type: MetricType;
  readonly isTime: boolean;
}

/** What the host asks a VU to run. */
export type ToVu =
  | { readonly type: 'iterate'; readonly exec: string; readonly scenario: string; readonly iteration: number; readonly iterationInTest: number; readonly tags: Tags }
  | { readonly type: 'setup' }
  | { readonly type: 'teardown'; readonly data: unknown }
  | { readonly type: 'summary'; readonly data: unknown };

export type FromVu =
  | { readonly type: 'ready'; readonly options: unknown; readonly metrics: readonly MetricDeclaration[]; readonly exports: readonly string[] }
  | { readonly type: 'init-error'; readonly error: string }
  /** A call ended: its samples, and its value (setup's data, handleSummary's outputs) or its error. */
  | { readonly type: 'done'; readonly samples: readonly WireSample[]; readonly value?: unknown; readonly error?: string };

/** A request on the HTTP port: `sync` ones block the VU on the shared flag until answered. */
export interface HttpCall {
  readonly id: number;
  readonly sync: boolean;
  readonly request: WireRequest;
}

export interface HttpAnswer {
  readonly id: number;
  readonly response: WireResponse;
}

export interface VuWorkerData {
  readonly vuId: number;
  /** The compiled script. */
  readonly scriptUrl: string;
  /** The script's own folder: open() resolves relative paths there. */
  readonly scriptDir: string;
  readonly env: Readonly<Record<string, string>>;
  /** setup()'s result as JSON (k6 hands each VU its own copy); undefined for the setup VU. */
  readonly data: string | undefined;
  readonly httpPort: MessagePort;
  /** Int32 flag the VU waits on for a sync request's answer. */
  readonly flag: SharedArrayBuffer;
}

/** The runtime's name wherever it prints results: never to be taken for k6's own output. */
export const RUNTIME_LABEL = "Herald's k6-compatible runtime (loadtest/runtime, not k6)";

/** What a script may not use here: named, never ignored. */
export function notImplemented(api: string): Error {
  return new Error(`${api} is not implemented by ${RUNTIME_LABEL}`);
}
