// One HTTP request as k6 makes and records it: timed to the end of its body, recorded in
// http_reqs, http_req_duration and http_req_failed with the request's tags plus status and
// expected_response. A response outside the expected statuses (default 200-399, as in k6) counts
// as failed; a connection error or time-out is status 0 with the error (k6's error_code 1000, or
// 1050 for a time-out).
import type { ExpectedStatuses, WireRequest, WireResponse } from '../runtime/protocol.js';
import { builtin } from './metrics.js';

/** Go's canonical header key, as k6's Response.headers has them: x-ratelimit-limit -> X-Ratelimit-Limit. */
export function canonicalHeader(name: string): string {
  return name
    .toLowerCase()
    .split('-')
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('-');
}

export function isExpected(status: number, expected: ExpectedStatuses | undefined): boolean {
  if (status === 0) return false;
  if (!expected) return status >= 200 && status < 400;
  return expected.statuses.includes(status) || expected.ranges.some((range) => status >= range.min && status <= range.max);
}

export async function httpRequest(request: WireRequest, signal: AbortSignal): Promise<WireResponse> {
  const started = performance.now();
  let status = 0;
  let statusText = '';
  let url = request.url;
  const headers: Record<string, string> = {};
  let body = '';
  let error = '';
  let errorCode = 0;
  const timeout = AbortSignal.timeout(request.timeoutMs);
  try {
    const response = await fetch(request.url, { method: request.method, headers: request.headers, body: request.body, signal: AbortSignal.any([signal, timeout]) });
    body = await response.text();
    status = response.status;
    statusText = `${response.status} ${response.statusText}`;
    url = response.url;
    response.headers.forEach((value, name) => (headers[canonicalHeader(name)] = value));
  } catch (err) {
    error = err instanceof Error ? `${err.name}: ${err.message}${err.cause instanceof Error ? ` (${err.cause.message})` : ''}` : String(err);
    errorCode = timeout.aborted ? 1050 : 1000;
  }
  const durationMs = performance.now() - started;
  const expected = isExpected(status, request.expected);
  const tags = { ...request.tags, status: String(status), expected_response: String(expected) };
  builtin.httpReqs.add(1, tags);
  builtin.httpReqDuration.add(durationMs, tags);
  builtin.httpReqFailed.add(!expected, tags);
  return { status, statusText, url, headers, body, durationMs, error, errorCode };
}
