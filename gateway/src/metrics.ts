import type { HeraldError } from '@herald/errors';
import { meter, secondsHistogram } from '@herald/telemetry';
import type { FastifyRequest } from 'fastify';

/** The gateway's own metrics: the edge's refusals and the callers held for an answer. */
const gatewayMeter = meter('gateway');

const rateLimited = gatewayMeter.createCounter('herald.rate_limit.rejections', {
  description: "Requests refused over a per-minute limit, by the caller's plan (public: a per-IP or per-page limit)",
  unit: '{request}',
});
const authFailures = gatewayMeter.createCounter('herald.authentication.failures', {
  description: 'Requests refused for their credential: missing (none sent), rejected (malformed, unknown, revoked or expired), forbidden (not allowed this)',
  unit: '{request}',
});

/** Counts a refusal of the edge as it leaves (the one place every error passes). */
export function countRefusal(request: FastifyRequest, error: HeraldError): void {
  if (error.code === 'rate_limited') {
    rateLimited.add(1, { plan: request.principal?.plan?.name || 'public' });
  } else if (error.status === 401) {
    const sent = request.headers.authorization !== undefined || request.headers.cookie !== undefined;
    authFailures.add(1, { reason: sent ? 'rejected' : 'missing' });
  } else if (error.code === 'forbidden') {
    authFailures.add(1, { reason: 'forbidden' });
  }
}

const wakeUp = secondsHistogram('gateway', 'herald.approvals.wakeup.latency', 'From the decision service publishing an answer (or cancellation) to a waiting caller here being woken');

/**
 * A wake-up arrived for `waiters` callers; `message` is what the decision service published, the
 * time (ms since the epoch) it did. Clocks of both hosts count: keep them synchronised (NTP).
 */
export function recordWakeUp(message: string, waiters: number): void {
  const publishedAt = Number(message);
  // Older decision services published "1": no time to measure from.
  if (!Number.isFinite(publishedAt) || publishedAt < 1e12) return;
  const seconds = Math.max(0, Date.now() - publishedAt) / 1000;
  for (let index = 0; index < waiters; index += 1) wakeUp.record(seconds);
}

/** The callers held open here for an answer, read at each collection. */
export function observeWaiters(count: () => number): void {
  gatewayMeter
    .createObservableGauge('herald.approvals.waiters', { description: 'Callers held open on this gateway for an answer', unit: '{caller}' })
    .addCallback((result) => result.observe(count()));
}

const redisDuration = secondsHistogram('gateway', 'herald.redis.command.duration', "Duration of the gateway's Redis commands (rate_limit: the sliding-log script every limited request runs), by outcome");

/** Times one Redis command of the request path. */
export async function timeRedis<T>(command: string, run: () => Promise<T>): Promise<T> {
  const startedAt = performance.now();
  let outcome = 'error';
  try {
    const result = await run();
    outcome = 'ok';
    return result;
  } finally {
    redisDuration.record((performance.now() - startedAt) / 1000, { command, outcome });
  }
}
