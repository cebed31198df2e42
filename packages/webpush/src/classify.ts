/**
 * What to do with a push service's answer (RFC 8030 section 5 and 8.4, and what FCM, Mozilla autopush,
 * Apple and WNS actually return).
 */

export type PushOutcome = 'sent' | 'expired' | 'failed' | 'retry';

export interface Classification {
  outcome: PushOutcome;
  /** Only for `retry`: how long the push service asked us to wait (Retry-After), in ms. */
  retryAfterMs?: number;
}

/**
 * - 2xx (201 Created is the norm; 200/202 also seen): `sent`.
 * - 404 Not Found / 410 Gone: the subscription is dead: `expired` (delete it).
 * - 408 Request Timeout, 429 Too Many Requests, 5xx: `retry`, honouring Retry-After when present.
 * - anything else (400 bad request/headers, 401/403 VAPID problems, 413 payload too large, other 4xx,
 *   unexpected 1xx/3xx): `failed` (do not retry; 403 usually means the subscription belongs to another
 *   VAPID key and is NOT a reason to delete it).
 */
export function classifyResponse(status: number, retryAfter?: string | null, nowMs: number = Date.now()): Classification {
  if (status >= 200 && status < 300) return { outcome: 'sent' };
  if (status === 404 || status === 410) return { outcome: 'expired' };
  if (status === 429 || status === 408 || (status >= 500 && status < 600)) {
    const retryAfterMs = parseRetryAfter(retryAfter, nowMs);
    return retryAfterMs === undefined ? { outcome: 'retry' } : { outcome: 'retry', retryAfterMs };
  }
  return { outcome: 'failed' };
}

/**
 * Retry-After as milliseconds from `nowMs`: either delay-seconds (`120`) or an HTTP-date
 * (`Wed, 21 Oct 2015 07:28:00 GMT`; a date in the past gives 0). Anything else gives undefined.
 */
export function parseRetryAfter(value: string | null | undefined, nowMs: number = Date.now()): number | undefined {
  if (value === undefined || value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) {
    const seconds = Number(text);
    return Number.isSafeInteger(seconds * 1000) ? seconds * 1000 : undefined;
  }
  // IMF-fixdate, and the obsolete RFC 850 / asctime forms Date.parse understands; must name a weekday
  // or month so bare numbers with junk are not misread as dates.
  if (!/[A-Za-z]{3}/.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}
