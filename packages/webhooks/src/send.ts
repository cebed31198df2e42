import { request, type RequestOptions } from 'node:https';
import { isIP } from 'node:net';
import { createSecureContext, rootCertificates, type ConnectionOptions, type SecureContext } from 'node:tls';

import type { WebhookTarget } from './address.js';

export interface PostOptions {
  timeoutMs: number;
  /** From trustingCa; the system's CAs when absent. */
  secureContext?: SecureContext;
}

/** The system's CAs plus `ca` (PEM), built once: parsing every root CA per request would cost more than the request. */
export function trustingCa(ca: string): SecureContext {
  return createSecureContext({ ca: [...rootCertificates, ca] });
}

/** What one attempt got: a status code, or the error that prevented one. */
export interface PostOutcome {
  statusCode?: number;
  /** From a Retry-After header (seconds or an HTTP date). */
  retryAfterMs?: number;
  error?: string;
}

function retryAfterMs(header: string | undefined, now: number): number | undefined {
  if (header === undefined) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * POSTs `body` to the checked address of `target`, with the URL's host as Host header, TLS server
 * name and certificate identity. Redirects are not followed (a 3xx is a failed attempt).
 */
export function postWebhook(target: WebhookTarget, body: string, headers: Record<string, string>, { timeoutMs, secureContext }: PostOptions): Promise<PostOutcome> {
  return new Promise((resolve) => {
    // tls.connect takes secureContext; @types/node leaves it out of https.RequestOptions.
    const options: RequestOptions & Pick<ConnectionOptions, 'secureContext'> = {
      host: target.address,
      family: target.family,
      port: target.url.port === '' ? 443 : Number(target.url.port),
      path: `${target.url.pathname}${target.url.search}`,
      method: 'POST',
      // An IP literal is never sent as SNI (RFC 6066); the certificate is then checked against the IP.
      servername: isIP(target.hostname) === 0 ? target.hostname : '',
      secureContext,
      agent: false,
      signal: AbortSignal.timeout(timeoutMs),
      headers: {
        ...headers,
        host: target.url.host,
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(body)),
        'user-agent': 'Herald-Webhooks/1.0',
      },
    };
    const req = request(options);
    req.on('response', (response) => {
      const header = response.headers['retry-after'];
      resolve({ statusCode: response.statusCode ?? 0, retryAfterMs: retryAfterMs(header, Date.now()) });
      // The body means nothing to us; dropping the connection bounds what a receiver can make us read.
      response.destroy();
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      resolve({ error: err.name === 'AbortError' || err.name === 'TimeoutError' ? `timed out after ${timeoutMs} ms` : (err.code ?? err.message) });
    });
    req.end(body);
  });
}
