import { createHmac, timingSafeEqual } from 'node:crypto';

import { WebhookVerificationError } from './errors.js';
import type { WebhookEvent } from './types.js';

/** Standard Webhooks verification (https://www.standardwebhooks.com) of what Herald posts. */

export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** How far the `webhook-timestamp` may be from now, either way (the replay window). Default 300. */
  toleranceSeconds?: number;
  /** The clock, in epoch milliseconds (tests). */
  now?: number;
}

function header(headers: WebhookHeaders, name: string): string {
  const value = headers instanceof Headers ? headers.get(name) : (headers[name] ?? Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1]);
  const text = Array.isArray(value) ? value.join(' ') : value;
  if (text === undefined || text === null || text === '') throw new WebhookVerificationError(`Missing ${name} header`);
  return text;
}

/** The HMAC key of a `whsec_<base64>` secret (the prefix is optional, as in the reference libraries). */
function keyOf(secret: string): Buffer {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
  if (key.length === 0) throw new WebhookVerificationError('The webhook secret is empty or not base64');
  return key;
}

/**
 * Checks a webhook and returns its parsed body. Pass the raw body exactly as received (not
 * re-serialised JSON) and every secret that may sign (two for 24 h after a rotation). Throws
 * WebhookVerificationError unless one `v1` signature matches one secret (compared in constant
 * time) and the timestamp is within the tolerance. Dedupe on the `webhook-id` header yourself.
 */
export function verifyWebhook<T = Record<string, unknown>>(
  secrets: string | readonly string[],
  headers: WebhookHeaders,
  rawBody: string | Uint8Array,
  { toleranceSeconds = 300, now = Date.now() }: VerifyOptions = {},
): WebhookEvent<T> {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!/^\d+$/.test(timestamp)) throw new WebhookVerificationError('Invalid webhook-timestamp header');
  if (Math.abs(now / 1_000 - Number(timestamp)) > toleranceSeconds) throw new WebhookVerificationError('The webhook timestamp is outside the tolerance');
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody) : Buffer.from(rawBody);
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`), body]);
  const given = signatures
    .split(' ')
    .filter((part) => part.startsWith('v1,'))
    .map((part) => Buffer.from(part.slice(3), 'base64'));
  const keys = (typeof secrets === 'string' ? [secrets] : secrets).map(keyOf);
  const matches = keys.some((key) => {
    const expected = createHmac('sha256', key).update(signed).digest();
    return given.some((signature) => signature.length === expected.length && timingSafeEqual(signature, expected));
  });
  if (!matches) throw new WebhookVerificationError('No matching webhook signature');
  return JSON.parse(body.toString('utf8')) as WebhookEvent<T>;
}
