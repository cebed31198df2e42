import { createHmac } from 'node:crypto';

/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256 over
 * "<webhook-id>.<webhook-timestamp>.<body>" keyed with the base64 part of "whsec_<base64>",
 * sent as "v1,<base64>", one per secret, space-separated (so receivers can rotate secrets).
 */

const SECRET_PREFIX = 'whsec_';

function signatureHeader(id: string, timestampSeconds: number, body: string, secrets: readonly string[]): string {
  return secrets
    .map((secret) => {
      const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
      const mac = createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64');
      return `v1,${mac}`;
    })
    .join(' ');
}

/** The headers of one attempt; the timestamp is the attempt's, so a retry hours later still passes the receiver's replay window. */
export function webhookHeaders(id: string, body: string, secrets: readonly string[], now = new Date()): Record<string, string> {
  const timestamp = Math.floor(now.getTime() / 1000);
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatureHeader(id, timestamp, body, secrets),
  };
}
