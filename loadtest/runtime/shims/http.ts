// k6/http with k6's semantics: http.get/post/... block the VU until the response is in (the host's
// main thread makes the request while this worker waits), http.asyncRequest returns a promise.
// Every request is recorded by the host as k6 records it (http_reqs, http_req_duration,
// http_req_failed, tagged name/method/status/url/expected_response/scenario/group).
import { parseDuration } from '../../runner/duration.js';
import { currentTags, notImplemented, requestAsync, requestSync, vu } from '../context.js';
import type { ExpectedStatuses, Tags, WireRequest, WireResponse } from '../protocol.js';

const DEFAULT_TIMEOUT_MS = 60_000;
const PARAMS = new Set(['headers', 'tags', 'timeout', 'responseCallback', 'responseType']);

interface Params {
  readonly headers?: Readonly<Record<string, string | number>>;
  readonly tags?: Tags;
  readonly timeout?: string | number;
  readonly responseCallback?: ExpectedStatuses | null;
  readonly responseType?: string;
}

type Body = string | Readonly<Record<string, string | number | boolean>> | null | undefined;

export function expectedStatuses(...given: Array<number | { min: number; max: number }>): ExpectedStatuses {
  const statuses: number[] = [];
  const ranges: Array<{ min: number; max: number }> = [];
  for (const item of given) {
    if (typeof item === 'number' && Number.isInteger(item)) statuses.push(item);
    else if (typeof item === 'object' && Number.isInteger(item.min) && Number.isInteger(item.max)) ranges.push({ min: item.min, max: item.max });
    else throw new Error(`expectedStatuses: ${JSON.stringify(item)} is neither a status nor {min, max}`);
  }
  return Object.freeze({ statuses, ranges });
}

export function setResponseCallback(callback: ExpectedStatuses | null): void {
  if (callback !== null && !isExpected(callback)) throw notImplemented('setResponseCallback with anything but http.expectedStatuses(...)');
  vu.expected = callback ?? { statuses: [], ranges: [{ min: 0, max: 999 }] };
}

const isExpected = (value: unknown): value is ExpectedStatuses => typeof value === 'object' && value !== null && Array.isArray((value as ExpectedStatuses).statuses);

function formBody(body: Readonly<Record<string, string | number | boolean>>): string {
  return Object.entries(body)
    .map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(String(value))}`)
    .join('&');
}

function wire(method: string, url: string, body: Body, params: Params = {}): WireRequest {
  for (const key of Object.keys(params)) if (!PARAMS.has(key)) throw notImplemented(`k6/http params.${key}`);
  if (params.responseType !== undefined && params.responseType !== 'text') throw notImplemented(`k6/http params.responseType "${params.responseType}"`);
  if (typeof url !== 'string') throw notImplemented('k6/http URLs other than strings (http.url``)');
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(params.headers ?? {})) headers[name] = String(value);
  let text: string | undefined;
  if (typeof body === 'string') text = body;
  else if (body !== null && body !== undefined) {
    if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) throw notImplemented('k6/http binary request bodies');
    text = formBody(body);
    if (!Object.keys(headers).some((name) => name.toLowerCase() === 'content-type')) headers['Content-Type'] = 'application/x-www-form-urlencoded';
  }
  const timeoutMs = params.timeout === undefined ? DEFAULT_TIMEOUT_MS : typeof params.timeout === 'number' ? params.timeout : parseDuration(params.timeout);
  let expected = vu.expected;
  if (params.responseCallback !== undefined) {
    if (params.responseCallback !== null && !isExpected(params.responseCallback)) throw notImplemented('params.responseCallback with anything but http.expectedStatuses(...)');
    expected = params.responseCallback ?? { statuses: [], ranges: [{ min: 0, max: 999 }] };
  }
  return { method, url, headers, body: text, timeoutMs, tags: { ...currentTags(), name: url, url, method, ...params.tags }, expected };
}

const unsupported = (api: string) => ({
  get(): never {
    throw notImplemented(api);
  },
  enumerable: false,
});

/** k6's Response: what this runtime measures; the rest throws when read. */
export class Response {
  readonly status: number;
  readonly status_text: string;
  readonly url: string;
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly error: string;
  readonly error_code: number;
  readonly timings: { readonly duration: number };
  readonly request: { readonly method: string; readonly url: string; readonly headers: Readonly<Record<string, string>>; readonly body: string };

  constructor(request: WireRequest, response: WireResponse) {
    this.status = response.status;
    this.status_text = response.statusText;
    this.url = response.url;
    this.body = response.body;
    this.headers = response.headers;
    this.error = response.error;
    this.error_code = response.errorCode;
    const timings = { duration: response.durationMs };
    for (const part of ['blocked', 'connecting', 'tls_handshaking', 'sending', 'waiting', 'receiving']) Object.defineProperty(timings, part, unsupported(`Response.timings.${part}`));
    this.timings = timings;
    this.request = { method: request.method, url: request.url, headers: request.headers, body: request.body ?? '' };
    for (const field of ['cookies', 'proto', 'remote_ip', 'remote_port', 'tls_version', 'tls_cipher_suite', 'ocsp']) Object.defineProperty(this, field, unsupported(`Response.${field}`));
  }

  json(selector?: string): unknown {
    if (selector !== undefined) throw notImplemented('Response.json(selector)');
    try {
      return JSON.parse(this.body) as unknown;
    } catch (err) {
      throw new Error(`Response.json(): the body is not JSON (${err instanceof Error ? err.message : String(err)}): ${this.body.slice(0, 200)}`);
    }
  }

  html(): never {
    throw notImplemented('Response.html');
  }

  clickLink(): never {
    throw notImplemented('Response.clickLink');
  }

  submitForm(): never {
    throw notImplemented('Response.submitForm');
  }
}

export function request(method: string, url: string, body?: Body, params?: Params): Response {
  const outgoing = wire(method.toUpperCase(), url, body, params);
  return new Response(outgoing, requestSync(outgoing));
}

export async function asyncRequest(method: string, url: string, body?: Body, params?: Params): Promise<Response> {
  const outgoing = wire(method.toUpperCase(), url, body, params);
  return new Response(outgoing, await requestAsync(outgoing));
}

export const get = (url: string, params?: Params): Response => request('GET', url, null, params);
export const head = (url: string, params?: Params): Response => request('HEAD', url, null, params);
export const post = (url: string, body?: Body, params?: Params): Response => request('POST', url, body, params);
export const put = (url: string, body?: Body, params?: Params): Response => request('PUT', url, body, params);
export const patch = (url: string, body?: Body, params?: Params): Response => request('PATCH', url, body, params);
export const del = (url: string, body?: Body, params?: Params): Response => request('DELETE', url, body, params);
export const options = (url: string, body?: Body, params?: Params): Response => request('OPTIONS', url, body, params);

export function batch(): never {
  throw notImplemented('k6/http.batch');
}

export function file(): never {
  throw notImplemented('k6/http.file');
}

export function cookieJar(): never {
  throw notImplemented('k6/http.cookieJar');
}

export function url(): never {
  throw notImplemented('k6/http.url');
}

export default { request, asyncRequest, get, head, post, put, patch, del, options, batch, file, cookieJar, url, expectedStatuses, setResponseCallback };
