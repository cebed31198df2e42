import { createHash } from 'node:crypto';

import type { Principal } from '@herald/proto/herald/account/v1/account';

import { VerifiedCache } from './cache.js';
import type { ServiceClients } from './clients.js';

/**
 * Verifies full keys with the account service and remembers the answer briefly (see
 * VerifiedCache). A revoked key keeps working on a replica for at most the TTL, and never past
 * the key's own expiry.
 */
export class PrincipalCache {
  private readonly cache: VerifiedCache<Principal>;

  constructor(
    private readonly account: ServiceClients['account'],
    ttlMs: number,
  ) {
    this.cache = new VerifiedCache(ttlMs);
  }

  async resolve(keyId: string, secret: string): Promise<Principal> {
    // Keyed by a digest so the map never holds secrets.
    const cacheKey = createHash('sha256').update(keyId).update('.').update(secret).digest('base64');
    return this.cache.get(cacheKey, async () => {
      const { principal } = await this.account.authenticateKey({ keyId, secret });
      if (!principal) throw new Error('account service returned no principal');
      const keyExpiry = principal.keyExpiresAt ? Date.parse(principal.keyExpiresAt) : Number.POSITIVE_INFINITY;
      return { value: principal, validUntil: keyExpiry };
    });
  }
}
