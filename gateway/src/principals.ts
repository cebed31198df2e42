import { createHash } from 'node:crypto';

import { HeraldError } from '@herald/errors';
import type { Principal } from '@herald/proto/herald/account/v1/account';

import type { ServiceClients } from './clients.js';

interface CacheEntry {
  /** The verified principal, or the rejection to repeat. */
  outcome: Principal | HeraldError;
  expiresAt: number;
}

const MAX_ENTRIES = 50_000;

/**
 * Verifies full keys with the account service and remembers the answer briefly, so a busy key
 * costs one gRPC call per TTL per replica. Concurrent misses for one key share a single call.
 * A revoked key keeps working on a replica for at most the TTL.
 */
export class PrincipalCache {
  private readonly entries = new Map<string, CacheEntry>();
  private readonly inFlight = new Map<string, Promise<Principal>>();

  constructor(
    private readonly account: ServiceClients['account'],
    private readonly ttlMs: number,
  ) {}

  async resolve(keyId: string, secret: string): Promise<Principal> {
    // Keyed by a digest so the map never holds secrets.
    const cacheKey = createHash('sha256').update(keyId).update('.').update(secret).digest('base64');
    const now = Date.now();
    const cached = this.entries.get(cacheKey);
    if (cached && cached.expiresAt > now) {
      if (cached.outcome instanceof HeraldError) throw cached.outcome;
      return cached.outcome;
    }
    const pending = this.inFlight.get(cacheKey);
    if (pending) return pending;
    const lookup = this.lookup(keyId, secret, cacheKey).finally(() => this.inFlight.delete(cacheKey));
    this.inFlight.set(cacheKey, lookup);
    return lookup;
  }

  private async lookup(keyId: string, secret: string, cacheKey: string): Promise<Principal> {
    try {
      const { principal } = await this.account.authenticateKey({ keyId, secret });
      if (!principal) throw new Error('account service returned no principal');
      const keyExpiry = principal.keyExpiresAt ? Date.parse(principal.keyExpiresAt) : Number.POSITIVE_INFINITY;
      this.remember(cacheKey, principal, Math.min(Date.now() + this.ttlMs, keyExpiry));
      return principal;
    } catch (err) {
      // Remember rejections too (a flood of bad keys must not become a flood of gRPC calls),
      // but never an outage: that is retried on the next request.
      if (err instanceof HeraldError && err.code === 'unauthorized') this.remember(cacheKey, err, Date.now() + this.ttlMs);
      throw err;
    }
  }

  private remember(cacheKey: string, outcome: CacheEntry['outcome'], expiresAt: number): void {
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
