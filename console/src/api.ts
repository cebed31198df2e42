import type { ErrorBody } from '@herald/sdk';

/**
 * Every call the console makes: the public REST API with the member's session (the HttpOnly
 * herald_session cookie, sent by the browser) and, on a state change, the X-CSRF-Token of GET /me.
 */

export const API = '/api/v1/server';

/** A non-2xx answer, with the spec's error body. */
export class ApiError extends Error {
  readonly status: number;
  readonly body: ErrorBody;

  constructor(status: number, body: ErrorBody) {
    super(body.message ?? body.error ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

let csrfToken = '';

/** Set from GET /me; every state-changing call sends it. */
export function setCsrfToken(token: string): void {
  csrfToken = token;
}

export async function api<T>(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${API}${path}`, {
    method,
    headers,
    credentials: 'same-origin',
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = { error: text };
  }
  if (!response.ok) throw new ApiError(response.status, (parsed ?? {}) as ErrorBody);
  return parsed as T;
}

/** The API's problem with one field of the body (the error shape's `fields`), to show next to it. */
export function fieldProblem(error: unknown, field: string): string | undefined {
  if (!(error instanceof ApiError)) return undefined;
  return error.body.fields?.find((entry) => entry.field === field)?.problem;
}

/** What a failed call says to a person: the message and the hint of the error body. */
export function describeError(error: unknown): string {
  if (error instanceof ApiError) return [error.body.message ?? `The server answered ${error.status}.`, error.body.hint].filter(Boolean).join(' ');
  return error instanceof Error ? error.message : String(error);
}
