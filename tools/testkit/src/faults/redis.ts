import { SERVER_API } from '../http.js';
import type { Fault } from './drill.js';
import { bounceServer } from './inject.js';
import type { Load } from './load.js';

/** The X-RateLimit-Limit a keyed read gets now (the plan's, or a gateway's own share of it while Redis is gone). */
async function rateLimitSeen(load: Load): Promise<string | null> {
  const { response } = await load.request('rate-limit probe', `${SERVER_API}/identity`, { key: load.audience.workspace.apiKey });
  return response?.headers.get('x-ratelimit-limit') ?? null;
}

/**
 * Redis stopped or crashed (`kill -9`: it starts empty, losing rate-limit windows and wake-ups)
 * and started. Nothing fails while it is gone, by design: the gateways limit on their own share,
 * which a keyed read during the hold shows. Reconciled with the questions: a waiter whose wake-up
 * was lost reads the answer afterwards.
 */
function redisFault(name: 'redis-restart' | 'redis-crash', how: 'restart' | 'crash'): Fault {
  return {
    name,
    async inject(load) {
      const usualLimit = await rateLimitSeen(load);
      return bounceServer(load, 'redis', how, async () => {
        const limit = await rateLimitSeen(load);
        load.probed.set(load.rowAt(Date.now()), limit !== null && limit !== usualLimit ? `rate limited per replica (limit ${limit} instead of ${usualLimit})` : `rate limit ${limit} as usual`);
      });
    },
    bit(load, row) {
      const seen = load.probed.get(row);
      return seen?.startsWith('rate limited per replica') ? seen : undefined;
    },
  };
}

export const redisRestart = redisFault('redis-restart', 'restart');
export const redisCrash = redisFault('redis-crash', 'crash');
