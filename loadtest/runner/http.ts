// The HTTP client of an iteration, k6's http module in spirit: every request is timed to the end
// of its body and recorded in http_reqs, http_req_duration and http_req_failed with the tags
// name (the endpoint, so thresholds can select it), method, status, scenario and
// expected_response. A response outside `expected` (default 200-399, as in k6) counts as failed;
// a connection error or time-out is status 0.
import { builtin, type Tags } from './metrics.js';

export interface RequestParams {
  /** The endpoint's tag: one name per route, never per URL (ids in paths would explode the tag set). */
  readonly name: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** Serialised as JSON (content-type application/json) unless a string. */
  readonly body?: unknown;
  /** Statuses that are success for this request, e.g. [200, 429] where a limit is the point. */
  readonly expected?: readonly number[];
  readonly timeoutMs?: number;
  readonly tags?: Tags;
}

export interface HttpResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
  readonly durationMs: number;
  /** Network or time-out error, when status is 0. */
  readonly error?: string;
  /** The body parsed as JSON; undefined when it is not JSON. */
  json<T = Record<string, unknown>>(): T | undefined;
}

const DEFAULT_TIMEOUT_MS = 60_000;

export class HttpClient {
  constructor(
    private readonly baseUrl: string,
    private readonly tags: Tags,
    private readonly signal: AbortSignal,
  ) {}

  get(path: string, params: RequestParams): Promise<HttpResponse> {
    return this.request('GET', path, params);
  }

  post(path: string, params: RequestParams): Promise<HttpResponse> {
    return this.request('POST', path, params);
  }

  put(path: string, params: RequestParams): Promise<HttpResponse> {
    return this.request('PUT', path, params);
  }

  async request(method: string, path: string, params: RequestParams): Promise<HttpResponse> {
    const headers: Record<string, string> = { ...params.headers };
    let body: string | undefined;
    if (typeof params.body === 'string') body = params.body;
    else if (params.body !== undefined) {
      body = JSON.stringify(params.body);
      headers['content-type'] ??= 'application/json';
    }
    const started = performance.now();
    let status = 0;
    let responseHeaders = new Headers();
    let text = '';
    let error: string | undefined;
    try {
      const response = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers,
        body,
        signal: AbortSignal.any([this.signal, AbortSignal.timeout(params.timeoutMs ?? DEFAULT_TIMEOUT_MS)]),
      });
      text = await response.text();
      status = response.status;
      responseHeaders = response.headers;
    } catch (err) {
      error = err instanceof Error ? `${err.name}: ${err.message}${err.cause instanceof Error ? ` (${err.cause.message})` : ''}` : String(err);
    }
    const durationMs = performance.now() - started;
    const expected = status !== 0 && (params.expected ? params.expected.includes(status) : status >= 200 && status < 400);
    const tags: Tags = { ...this.tags, ...params.tags, name: params.name, method, status: String(status), expected_response: String(expected) };
    builtin.httpReqs.add(1, tags);
    builtin.httpReqDuration.add(durationMs, tags);
    builtin.httpReqFailed.add(!expected, tags);
    return {
      status,
      headers: responseHeaders,
      body: text,
      durationMs,
      ...(error === undefined ? {} : { error }),
      json<T>() {
        try {
          return JSON.parse(text) as T;
        } catch {
          return undefined;
        }
      },
    };
  }
}

/**
 * k6's check(): each named predicate is a sample of the `checks` rate (tagged check=<name>), a
 * predicate that throws fails; returns whether all held. A failed check does not stop the iteration.
 */
export function check<T>(value: T, predicates: Readonly<Record<string, (value: T) => boolean>>, tags: Tags = {}): boolean {
  let all = true;
  for (const [name, predicate] of Object.entries(predicates)) {
    let ok = false;
    try {
      ok = predicate(value);
    } catch {
      ok = false;
    }
    builtin.checks.add(ok, { ...tags, check: name });
    all &&= ok;
  }
  return all;
}
