import type { PromiseClient } from '@herald/grpc';
import type { AccountServiceClient } from '@herald/proto/herald/account/v1/account';

import type { VapidKeys } from '@herald/webpush';

const TTL_MS = 10 * 60_000;

/** Sites' VAPID keys from the account service, kept for a few minutes per replica. */
export class VapidKeyCache {
  private readonly entries = new Map<string, { keys: Promise<VapidKeys>; expiresAt: number }>();

  constructor(private readonly account: PromiseClient<AccountServiceClient>) {}

  get(siteId: string): Promise<VapidKeys> {
    const cached = this.entries.get(siteId);
    if (cached && cached.expiresAt > Date.now()) return cached.keys;
    const keys = this.account.getVapidKeys({ siteId });
    this.entries.set(siteId, { keys, expiresAt: Date.now() + TTL_MS });
    keys.catch(() => this.entries.delete(siteId));
    return keys;
  }
}
