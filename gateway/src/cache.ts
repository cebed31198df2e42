import { HeraldError } from '@herald/errors';

interface CacheEntry<T> {
  /** The verified value, or the rejection to repeat. */
  outcome: T | HeraldError;
  expiresAt: number;
}

const MAX_ENTRIES = 50_000;

/**
 * Remembers what the account service said about a credential for a short TTL, so a busy
 * credential costs one gRPC call per TTL per replica. Concurrent misses for one cache key share a
 * single call. Rejections (`unauthorized`) are remembered too, so a flood of bad credentials is
 * not a flood of gRPC calls; an outage is never remembered and is retried on the next request.
 */
export class VerifiedCache<T> {
  private readonly entries = new Map<string, CacheEntry<T>>();
  private readonly inFlight = new Map<string, Promise<T>>();

  constructor(private readonly ttlMs: number) {}

  /**
   * The cached outcome for `cacheKey`, or `load`'s: the value and, optionally, a time after which
   * it must not be trusted even within the TTL (e.g. a key's own expiry).
   */
  async get(cacheKey: string, load: () => Promise<{ value: T; validUntil?: number }>): Promise<T> {
    const cached = this.entries.get(cacheKey);
    if (cached && cached.expiresAt > Date.now()) {
      if (cached.outcome instanceof HeraldError) throw cached.outcome;
      return cached.outcome;
    }
    const pending = this.inFlight.get(cacheKey);
    if (pending) return pending;
    const lookup = this.lookup(cacheKey, load).finally(() => this.inFlight.delete(cacheKey));
    this.inFlight.set(cacheKey, lookup);
    return lookup;
  }

  private async lookup(cacheKey: string, load: () => Promise<{ value: T; validUntil?: number }>): Promise<T> {
    try {
      const { value, validUntil = Number.POSITIVE_INFINITY } = await load();
      this.remember(cacheKey, value, Math.min(Date.now() + this.ttlMs, validUntil));
      return value;
    } catch (err) {
      if (err instanceof HeraldError && err.code === 'unauthorized') this.remember(cacheKey, err, Date.now() + this.ttlMs);
      throw err;
    }
  }

  /** Drops what is remembered for `cacheKey`, so the next get asks again. */
  forget(cacheKey: string): void {
    this.entries.delete(cacheKey);
  }

  private remember(cacheKey: string, outcome: CacheEntry<T>['outcome'], expiresAt: number): void {
    if (this.entries.size >= MAX_ENTRIES) {
      // Maps iterate in insertion order: drop the oldest tenth.
      let drop = MAX_ENTRIES / 10;
      for (const key of this.entries.keys()) {
        this.entries.delete(key);
        if ((drop -= 1) <= 0) break;
      }
    }
    this.entries.delete(cacheKey);
    this.entries.set(cacheKey, { outcome, expiresAt });
  }
}
