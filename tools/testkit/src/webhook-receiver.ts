/**
 * A local HTTPS webhook receiver (certificate from push-peer's throwaway test CA) that checks every
 * request strictly against the Standard Webhooks protocol as Herald sends it, records it, and
 * answers from a script (default 204).
 */
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';

import { testTlsMaterial } from '@herald/push-peer';

export interface ReceivedWebhook {
  path: string;
  headers: Record<string, string>;
  body: string;
  at: number;
}

export interface ScriptedResponse {
  status: number;
  headers?: Record<string, string>;
  /** Waits this long before answering. */
  delayMs?: number;
}

export interface Receiver {
  /** https://127.0.0.1:<port> */
  origin: string;
  port: number;
  /** The CA that issued the receiver's certificate. */
  ca: string;
  received: ReceivedWebhook[];
  /** Protocol violations seen; a test asserts this stays empty. */
  violations: string[];
  /** Answers to give, in order; once used up, `fallback`. */
  script: ScriptedResponse[];
  fallback: ScriptedResponse;
  close(): Promise<void>;
}

const SIGNATURES = /^v1,[A-Za-z0-9+/]{43}=( v1,[A-Za-z0-9+/]{43}=)*$/;

function check(method: string | undefined, headers: Record<string, string>, body: string, expectedHost: RegExp): string[] {
  const problems: string[] = [];
  if (method !== 'POST') problems.push(`method ${method}`);
  if (headers['content-type'] !== 'application/json') problems.push(`content-type ${headers['content-type']}`);
  if (!expectedHost.test(headers.host ?? '')) problems.push(`host ${headers.host}`);
  if (!/^msg_[a-z2-7]{24}$/.test(headers['webhook-id'] ?? '')) problems.push(`webhook-id ${headers['webhook-id']}`);
  const timestamp = Number(headers['webhook-timestamp']);
  if (!/^\d+$/.test(headers['webhook-timestamp'] ?? '') || Math.abs(Date.now() / 1000 - timestamp) > 5) {
    problems.push(`webhook-timestamp ${headers['webhook-timestamp']}`);
  }
  if (!SIGNATURES.test(headers['webhook-signature'] ?? '')) problems.push(`webhook-signature ${headers['webhook-signature']}`);
  if (Number(headers['content-length']) !== Buffer.byteLength(body)) problems.push('content-length does not match the body');
  try {
    const parsed = JSON.parse(body) as Record<string, unknown>;
    if (Object.keys(parsed).join() !== 'type,timestamp,data') problems.push(`body keys ${Object.keys(parsed).join()}`);
    if (typeof parsed.type !== 'string' || typeof parsed.timestamp !== 'string' || Number.isNaN(Date.parse(parsed.timestamp))) {
      problems.push('body type/timestamp');
    }
  } catch {
    problems.push('body is not JSON');
  }
  return problems;
}

/** `expectedHost`: what the Host header must be (the URL's host, not the address connected to). */
export async function startReceiver(expectedHost?: RegExp): Promise<Receiver> {
  const tls = await testTlsMaterial();
  const received: ReceivedWebhook[] = [];
  const violations: string[] = [];
  let port = 0;
  const receiver: Receiver = {
    origin: '',
    port: 0,
    ca: tls.ca,
    received,
    violations,
    script: [],
    fallback: { status: 204 },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server: Server = createServer({ key: tls.key, cert: tls.cert }, (request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, String(value)]));
      const problems = check(request.method, headers, body, expectedHost ?? new RegExp(`^127\\.0\\.0\\.1:${port}$`));
      violations.push(...problems);
      received.push({ path: request.url ?? '', headers, body, at: Date.now() });
      const answer = problems.length > 0 ? { status: 400 } : (receiver.script.shift() ?? receiver.fallback);
      setTimeout(() => {
        response.writeHead(answer.status, answer.headers ?? {});
        response.end();
      }, answer.delayMs ?? 0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  receiver.port = port;
  receiver.origin = `https://127.0.0.1:${port}`;
  return receiver;
}
