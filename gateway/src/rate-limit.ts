import { randomBytes } from 'node:crypto';

import { HeraldError } from '@herald/errors';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Redis, Result } from 'ioredis';

import { timeRedis } from './metrics.js';

/**
 * Per-key, per-minute rate limit: a sliding log in one Redis sorted set per key, updated by one
 * atomic Lua script per request with Redis's own clock, so any number of gateway replicas admit
 * at most `limit` requests per key in every 60-second window, not just per calendar minute.
 *
 * While Redis is unreachable each replica falls back to the same algorithm in its own memory
 * with `limit / fallbackReplicas`: never unlimited, never a total outage.
 */

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Epoch ms at which the oldest admitted request leaves the window (a slot frees). */
  resetAtMs: number;
  /** Milliseconds until a request would be admitted again (0 when allowed). */
  retryAfterMs: number;
}

const slidingLogScript = `
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local cost = tonumber(ARGV[4])
local allowed = 0
if count + cost <= limit then
  for i = 1, cost do redis.call('ZADD', KEYS[1], now, ARGV[3] .. ':' .. i) end
  count = count + cost
  allowed = 1
end
redis.call('PEXPIRE', KEYS[1], window)
local reset = now + window
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if oldest[2] then reset = tonumber(oldest[2]) + window end
return {allowed, limit - count, reset, now}
`;

type Reply = [number, number, number, number];

declare module 'ioredis' {
  interface RedisCommander<Context> {
    heraldSlidingLog(key: string, limit: number, windowMs: number, member: string, cost: number): Result<Reply, Context>;
  }
}

export class RateLimiter {
  private readonly instance = randomBytes(6).toString('base64url');
  private sequence = 0;
  private readonly local = new Map<string, number[]>();
  private lastFallbackWarning = 0;

  constructor(
    private readonly redis: Redis,
    private readonly windowMs: number,
    private readonly fallbackReplicas: number,
    private readonly onFallback: (err: unknown) => void,
    /** Put before every bucket's Redis key: deployments (or test stacks) sharing a Redis keep their own counts. */
    private readonly keyPrefix = '',
  ) {
    redis.defineCommand('heraldSlidingLog', { numberOfKeys: 1, lua: slidingLogScript });
  }

  /** `cost`: how many requests this one counts as (an MCP batch counts its messages); all or none are admitted. */
  async check(keyId: string, limit: number, cost = 1): Promise<RateDecision> {
    this.sequence = (this.sequence + 1) % Number.MAX_SAFE_INTEGER;
    try {
      const [allowed, remaining, resetAtMs, nowMs] = await timeRedis('rate_limit', () =>
        this.redis.heraldSlidingLog(`herald:rl:${this.keyPrefix}${keyId}`, limit, this.windowMs, `${this.instance}:${this.sequence}`, cost),
      );
      return {
        allowed: allowed === 1,
        limit,
        remaining: Math.max(0, remaining),
        resetAtMs,
        retryAfterMs: allowed === 1 ? 0 : Math.max(0, resetAtMs - nowMs),
      };
    } catch (err) {
      const now = Date.now();
      if (now - this.lastFallbackWarning > 10_000) {
        this.lastFallbackWarning = now;
        this.onFallback(err);
      }
      return this.checkLocally(keyId, limit, now, cost);
    }
  }

  private checkLocally(keyId: string, limit: number, now: number, cost: number): RateDecision {
    const share = Math.max(1, Math.floor(limit / this.fallbackReplicas));
    if (this.local.size > 10_000) this.sweep(now);
    const log = (this.local.get(keyId) ?? []).filter((at) => at > now - this.windowMs);
    const allowed = log.length + cost <= share;
    if (allowed) log.push(...new Array<number>(cost).fill(now));
    this.local.set(keyId, log);
    const resetAtMs = (log[0] ?? now) + this.windowMs;
    return { allowed, limit: share, remaining: share - log.length, resetAtMs, retryAfterMs: allowed ? 0 : resetAtMs - now };
  }

  private sweep(now: number): void {
    for (const [keyId, log] of this.local) {
      if ((log.at(-1) ?? 0) <= now - this.windowMs) this.local.delete(keyId);
    }
  }
}

/**
 * Counts one request of `bucket` (as `cost` requests) against `limit`: sets X-RateLimit-Limit, -Remaining and -Reset
 * (epoch seconds) on the reply, and throws 429 rate_limited (with Retry-After) when it is over.
 */
export async function enforceRateLimit(limiter: RateLimiter, reply: FastifyReply, bucket: string, limit: number, cost = 1): Promise<void> {
  const decision = await limiter.check(bucket, limit, cost);
  reply.header('x-ratelimit-limit', String(decision.limit));
  reply.header('x-ratelimit-remaining', String(decision.remaining));
  reply.header('x-ratelimit-reset', String(Math.ceil(decision.resetAtMs / 1_000)));
  if (!decision.allowed) {
    const retryAfter = Math.max(1, Math.ceil(decision.retryAfterMs / 1_000));
    throw new HeraldError('rate_limited', `Rate limit of ${decision.limit} requests per minute exceeded; retry in ${retryAfter} s.`, {
      title: 'Rate limit exceeded',
      extra: { resetIn: retryAfter, retryAfter, limit: decision.limit },
    });
  }
}

/**
 * The per-minute limit of a public page or endpoint (no key): one bucket per client IP and per
 * tenant object the path names (a site's slug, a question's or an enrollment's token), so one
 * tenant's traffic never starves another tenant's pages, even from one address. The client IP is
 * `request.ip`, which honours TRUST_PROXY.
 */
export function perClientLimit(limiter: RateLimiter, limit: number, tenantOf: (params: Record<string, string>) => string) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    // Runs before the params are validated: the bucket name is cut, whatever was sent.
    const tenant = tenantOf(request.params as Record<string, string>).slice(0, 100);
    await enforceRateLimit(limiter, reply, `ip:${tenant}:${request.ip}`, limit);
  };
}

/** A token's id (what comes before its MAC), which names one object of one tenant. */
export const tokenId = (token: string | undefined): string => (token ?? '').split('.')[0] ?? '';
