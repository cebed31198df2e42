import { isRole, roleAllows, type Scope } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import type { Plan, Principal } from '@herald/proto/herald/account/v1/account';
import type { FastifyRequest } from 'fastify';

/**
 * Who may call a route, in one place: the key's scopes (fixed from its origin, as the spec's
 * table says) and the plan rules. Every route declares its RouteAccess; nothing else decides.
 */
export type RouteAccess =
  | { public: true }
  /** The browser SDK's endpoints: the public site key and the page's Origin (see site-keys.ts). */
  | { siteKey: true }
  | ScopedAccess;

/** A full API key with this scope (and plan). */
export interface ScopedAccess {
  scope: Scope;
  /** 'api': a paid plan with API access (POST /send). 'partner': the Partner plan. */
  plan?: 'api' | 'partner';
}

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: RouteAccess;
  }
  interface FastifyRequest {
    principal?: Principal;
  }
}

/** The authenticated caller of a route that declared an access rule (set by the auth hook). */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error(`route ${request.routeOptions.url} has no access rule`);
  return request.principal;
}

/**
 * The end-user a request acts for. A bound key acts for its own only: `requested` omitted means
 * that one, another is 403. Other keys act for the one they name (undefined: none).
 */
export function endUserOf(principal: Principal, requested: string | undefined, action: string): string | undefined {
  if (!principal.boundExternalId) return requested;
  if (requested !== undefined && requested !== principal.boundExternalId) {
    throw new HeraldError('forbidden', `This key may only ${action} for its own end-user.`, {
      title: 'Permission denied',
      hint: 'Omit externalId, or send the externalId the key was issued for.',
    });
  }
  return principal.boundExternalId;
}

/** 403 subscription_required unless the workspace has an active plan. */
export function assertActivePlan(plan: Plan | undefined, upgradeUrl: string): asserts plan is Plan {
  if (!plan?.active) {
    throw new HeraldError('subscription_required', 'This workspace has no active plan.', {
      title: 'Subscription required',
      extra: { upgradeUrl },
    });
  }
}

/**
 * `viaToken`: the principal came from an OAuth access token, whose scope narrowed the key's.
 * A member's session (principal.role set) is held to the role table of @herald/domain instead of
 * key scopes: what the role may read (GET, HEAD) and change (`method`, every other).
 */
export function assertAccess(principal: Principal, access: ScopedAccess, upgradeUrl: string, viaToken: boolean, method: string): void {
  const plan = principal.plan;
  assertActivePlan(plan, upgradeUrl);
  // Bound keys exist on the Partner plan only; a downgrade disables them.
  const needsPartner = access.plan === 'partner' || principal.keyOrigin === 'bound';
  if (needsPartner && !plan.partner) {
    throw new HeraldError('plan_upgrade_required', 'This endpoint requires the Partner plan.', {
      title: 'Plan upgrade required',
      extra: { upgradeUrl },
    });
  }
  if (principal.role) {
    if (!isRole(principal.role) || !roleAllows(principal.role, access.scope, method)) {
      throw new HeraldError('forbidden', 'Your role cannot access this endpoint', {
        title: 'Permission denied',
        hint: `Members with the role "${principal.role}" cannot ${method === 'GET' || method === 'HEAD' ? 'read' : 'change'} "${access.scope}"; ask an owner or admin.`,
      });
    }
  } else if (!principal.scopes.includes(access.scope)) {
    throw new HeraldError('forbidden', 'This key cannot access this endpoint', {
      hint: viaToken
        ? `The access token's scope does not allow "${access.scope}" (or its key of origin "${principal.keyOrigin}" cannot call this endpoint).`
        : `Keys of origin "${principal.keyOrigin}" cannot call this endpoint; use a key created in the dashboard.`,
    });
  }
  if (access.plan === 'api' && !plan.apiAccess) {
    throw new HeraldError('plan_upgrade_required', 'This endpoint requires a paid plan with API access.', {
      title: 'Plan upgrade required',
      extra: { upgradeUrl },
    });
  }
}
