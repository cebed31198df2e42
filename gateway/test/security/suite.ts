import { randomInt } from 'node:crypto';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';

import { eventually } from '@herald/testkit';

/**
 * What the security suite's files share (issue #22): the count of attacker inputs per class (each
 * file records what it sends and prints the counts when it ends; docs/testing.md's "Security suite"
 * section lists them), and requests sent from a chosen client address.
 */

const tried = new Map<string, number>();

export function recordTried(kind: string, count = 1): void {
  tried.set(kind, (tried.get(kind) ?? 0) + count);
}

export function reportTried(file: string): void {
  process.stdout.write(`security inputs tried (${file}): ${JSON.stringify(Object.fromEntries(tried))}\n`);
}

/** A loopback address no other test uses: the gateway sees it as the client IP, so its per-IP buckets start empty. */
export const freshClient = (): string => `127.${1 + randomInt(254)}.${randomInt(256)}.${1 + randomInt(254)}`;

export interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  /** Parsed when JSON, else the text. */
  body: unknown;
}

/** One request from `localAddress` (a loopback address: the client IP the gateway sees). */
export function requestFrom(baseUrl: string, localAddress: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<RawAnswer> {
  const target = new URL(path, baseUrl);
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: target.hostname, port: target.port, path: `${target.pathname}${target.search}`, method, localAddress, headers }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: (response.headers['content-type'] ?? '').includes('json') ? (JSON.parse(text) as unknown) : text }),
      );
    });
    request.on('error', reject);
    request.end(body);
  });
}

/**
 * Waits until a gateway just added to a stack counts its limits in Redis: it answers before its
 * Redis connection is up, and until then counts per replica (a share of the limit, which the
 * X-RateLimit-Limit header shows). Each probe comes from an address of its own.
 */
export async function countingInRedis(gateway: string, method: string, path: string, limit: number, headers: Record<string, string> = {}, body?: string): Promise<void> {
  await eventually(
    `${gateway} counting in Redis`,
    async () => (await requestFrom(gateway, freshClient(), method, path, headers, body)).headers['x-ratelimit-limit'],
    (shown) => shown === String(limit),
  );
}
