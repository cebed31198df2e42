/** A small fetch wrapper that returns status, headers and the parsed body for exact assertions. */

export interface ApiResponse<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
}

export interface RequestOptions {
  method?: string;
  key?: string;
  body?: unknown;
  /** Sent as-is (for malformed-body tests); overrides `body`. */
  rawBody?: string;
  headers?: Record<string, string>;
  /** Gives up (the promise rejects with a TimeoutError) after this long. */
  timeoutMs?: number;
}

export async function call<T = Record<string, unknown>>(baseUrl: string, path: string, options: RequestOptions = {}): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  let body: string | undefined = options.rawBody;
  if (body === undefined && options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const signal = options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs);
  const response = await fetch(`${baseUrl}${path}`, { method: options.method ?? 'GET', headers, body, signal });
  const text = await response.text();
  let parsed: unknown = text;
  if ((response.headers.get('content-type') ?? '').includes('json') && text !== '') parsed = JSON.parse(text);
  return { status: response.status, headers: response.headers, body: parsed as T };
}

export const SERVER_API = '/api/v1/server';

/** The spec's error shape as a test stack renders it (documentation links under the default PUBLIC_ORIGIN). */
export function errorBody(code: string, status: number, error: string, message: string, hint: string, extra: Record<string, unknown> = {}) {
  return { error, code, status, message, hint, documentation: `http://localhost:8080/docs/errors#${code}`, ...extra };
}
