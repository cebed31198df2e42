import { HeraldError } from '@herald/errors';
import type { PromiseClient } from '@herald/grpc';
import type { AccountServiceClient } from '@herald/proto/herald/account/v1/account';

/** How long a workspace's allowance is reused before asking the account service again. */
const FACTS_TTL_MS = 5_000;
/** Workspaces remembered before the cache starts over (an allowance is cheap to read again). */
const CACHE_LIMIT = 10_000;

/**
 * The plan's monthly notification allowance of a workspace, read from its owner (the account
 * service) for every send, whoever the caller: an API key through the gateway or a flow run. A
 * burst of sends of one workspace asks once per few seconds. A workspace without an active plan
 * is refused (subscription_required).
 */
export function allowances(account: PromiseClient<AccountServiceClient>): (workspaceId: string) => Promise<number> {
  const cache = new Map<string, { limit: Promise<number>; at: number }>();
  return (workspaceId) => {
    const cached = cache.get(workspaceId);
    if (cached && Date.now() - cached.at < FACTS_TTL_MS) return cached.limit;
    const limit = account.getSendingFacts({ workspaceId }).then((facts) => {
      if (!facts.plan?.active) throw new HeraldError('subscription_required', 'This workspace has no active plan.');
      return Number(facts.plan.monthlyNotificationAllowance);
    });
    if (cache.size >= CACHE_LIMIT) cache.clear();
    cache.set(workspaceId, { limit, at: Date.now() });
    limit.catch(() => cache.delete(workspaceId));
    return limit;
  };
}
