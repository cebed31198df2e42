/**
 * The plan catalogue. `none` is a workspace without an active plan: every server endpoint
 * answers 403 subscription_required, and its requests are still rate limited as Free.
 */

export const PLAN_NAMES = ['none', 'free', 'starter', 'growth', 'enterprise', 'partner'] as const;
export type PlanName = (typeof PLAN_NAMES)[number];

export interface PlanFacts {
  name: PlanName;
  active: boolean;
  /** "A paid plan with API access": required by POST /send. */
  apiAccess: boolean;
  /** Bound keys, enrollment; /ask is replaced by /decisions. */
  partner: boolean;
  rateLimitPerMinute: number;
  monthlyNotificationAllowance: number;
}

const catalogue: Record<PlanName, PlanFacts> = {
  none: { name: 'none', active: false, apiAccess: false, partner: false, rateLimitPerMinute: 100, monthlyNotificationAllowance: 0 },
  free: { name: 'free', active: true, apiAccess: false, partner: false, rateLimitPerMinute: 100, monthlyNotificationAllowance: 1_000 },
  starter: { name: 'starter', active: true, apiAccess: true, partner: false, rateLimitPerMinute: 200, monthlyNotificationAllowance: 50_000 },
  growth: { name: 'growth', active: true, apiAccess: true, partner: false, rateLimitPerMinute: 500, monthlyNotificationAllowance: 500_000 },
  enterprise: {
    name: 'enterprise',
    active: true,
    apiAccess: true,
    partner: false,
    rateLimitPerMinute: 1_000,
    monthlyNotificationAllowance: 10_000_000,
  },
  // Partner runtimes act for many end-users, each through its own bound key with its own bucket,
  // so a key's limit matches Enterprise.
  partner: { name: 'partner', active: true, apiAccess: true, partner: true, rateLimitPerMinute: 1_000, monthlyNotificationAllowance: 10_000_000 },
};

export function isPlanName(value: string): value is PlanName {
  return (PLAN_NAMES as readonly string[]).includes(value);
}

export function planFacts(name: PlanName): PlanFacts {
  return catalogue[name];
}
