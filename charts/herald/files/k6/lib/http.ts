// Response helpers: the body as JSON without throwing (a check fails instead), and the spec's
// rate-limit headers checked exactly on a 200 or a 429.
import type { RefinedResponse, ResponseType } from 'k6/http';

type Response = RefinedResponse<ResponseType | undefined>;

/** The body parsed as JSON, or undefined when it is not (an HTML error page, an empty body). */
export function body<T>(response: Response): T | undefined {
  if (typeof response.body !== 'string') return undefined;
  try {
    return JSON.parse(response.body) as T;
  } catch {
    return undefined;
  }
}

const integerHeader = (response: Response, name: string): number => {
  const value = response.headers[name];
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : Number.NaN;
};

/**
 * X-RateLimit-Limit exactly the plan's limit, Remaining an integer below it (0 on a 429), Reset a
 * Unix time within the window; on a 429 Retry-After in whole seconds within the window and the
 * rate_limited error body naming the same limit and wait.
 */
export function rateLimitChecks(limit: number, windowSeconds = 60): Record<string, (response: Response) => boolean> {
  const now = (): number => Date.now() / 1_000;
  return {
    'X-RateLimit-Limit is the plan limit': (r) => r.headers['X-Ratelimit-Limit'] === String(limit),
    'X-RateLimit-Remaining is below the limit': (r) => {
      const remaining = integerHeader(r, 'X-Ratelimit-Remaining');
      return remaining >= 0 && remaining < limit && (r.status !== 429 || remaining === 0);
    },
    'X-RateLimit-Reset is within the window': (r) => {
      const reset = integerHeader(r, 'X-Ratelimit-Reset');
      return reset >= now() - 1 && reset <= now() + windowSeconds + 1;
    },
    'a 429 has Retry-After within the window': (r) => {
      if (r.status !== 429) return r.headers['Retry-After'] === undefined;
      const retryAfter = integerHeader(r, 'Retry-After');
      return retryAfter >= 1 && retryAfter <= windowSeconds;
    },
    'a 429 has the rate_limited body': (r) => {
      if (r.status !== 429) return true;
      const error = body<{ code?: string; status?: number; limit?: number; retryAfter?: number }>(r);
      return error?.code === 'rate_limited' && error.status === 429 && error.limit === limit && error.retryAfter === integerHeader(r, 'Retry-After');
    },
  };
}
