import { parseKey } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import type { ResolveSiteKeyResponse } from '@herald/proto/herald/account/v1/account';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';

import { assertActivePlan } from './access.js';
import { VerifiedCache } from './cache.js';
import type { ServiceClients } from './clients.js';
import { enforceRateLimit, type RateLimiter } from './rate-limit.js';
import { withErrors } from './schemas/common.js';

/**
 * Site-key authentication for the browser SDK's endpoints (routes declaring `access: {siteKey:
 * true}`): `Authorization: Bearer pk_<id>`, resolved with the account service and cached like
 * full keys; rate limited per site key by the site's plan; and the request's Origin must be the
 * site's registered domain. The site key is public, so the Origin check is what keeps other
 * sites' pages from subscribing browsers to this site; it binds browsers, not scripts that can
 * forge the header.
 */

export interface SiteCaller {
  workspaceId: string;
  siteId: string;
  /** The exact Origin of the page, matched against the site's domain. */
  origin: string;
  /** The workspace's identity-verification secrets, newest first, for checking externalId proofs (as cached). */
  identitySecrets: string[];
  /** The secrets as the account service has them now (after a first read or a rotation the cache has not seen). */
  freshIdentitySecrets: () => Promise<string[]>;
}

declare module 'fastify' {
  interface FastifyRequest {
    site?: SiteCaller;
  }
}

/** The site behind the site key of a route that declared `access: {siteKey: true}`. */
export function siteOf(request: FastifyRequest): SiteCaller {
  if (!request.site) throw new Error(`route ${request.routeOptions.url} is not a site-key route`);
  return request.site;
}

/**
 * Resolves `pk_<id>` site keys to their site with the account service, remembered briefly like
 * full keys (VerifiedCache); 401 unauthorized for an unknown key. `fresh` asks again whatever is
 * remembered (and remembers the answer).
 */
export function siteKeyResolver(account: ServiceClients['account'], ttlMs: number): (siteKey: string, fresh?: boolean) => Promise<ResolveSiteKeyResponse> {
  const cache = new VerifiedCache<ResolveSiteKeyResponse>(ttlMs);
  const load = async (siteKey: string) => {
    try {
      return { value: await account.resolveSiteKey({ siteKey }) };
    } catch (err) {
      if (err instanceof HeraldError && err.code === 'unauthorized') throw unauthorized('Unknown site key.');
      throw err;
    }
  };
  return (siteKey, fresh = false) => {
    if (fresh) cache.forget(siteKey);
    return cache.get(siteKey, () => load(siteKey));
  };
}

function unauthorized(message: string): HeraldError {
  return new HeraldError('unauthorized', message, { title: 'Unauthorized', hint: 'Send the site key (pk_<id>) shown by GET /api/v1/server/site.' });
}

// ---- origins --------------------------------------------------------------------------------

/** localhost, *.localhost and loopback addresses: development sites, served over http too. */
function isLocalHostname(hostname: string): boolean {
  return hostname === 'localhost' || hostname.endsWith('.localhost') || /^127(\.\d{1,3}){3}$/.test(hostname) || hostname === '[::1]';
}

/** An Origin header as browsers send it (`scheme://host[:port]`, nothing else), parsed. */
function parseOrigin(origin: string | undefined): URL | undefined {
  if (!origin) return undefined;
  try {
    const url = new URL(origin);
    return url.origin === origin ? url : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether a page at `origin` could belong to some site: https, or http on a local host while
 * localhost sites are allowed. A CORS preflight carries no site key, so this is all it can check;
 * the request itself is then held to its site's domain.
 */
function isCandidateOrigin(origin: string | undefined, allowLocalhostSites: boolean): origin is string {
  const url = parseOrigin(origin);
  if (!url) return false;
  if (url.protocol === 'https:') return true;
  return url.protocol === 'http:' && allowLocalhostSites && isLocalHostname(url.hostname);
}

/** Whether `origin` is the site registered as `domain` (a host with an optional port). */
function originMatchesDomain(origin: string, domain: string): boolean {
  const url = parseOrigin(origin);
  if (!url) return false;
  const local = isLocalHostname(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && local)) return false;
  try {
    // Parsed with the page's scheme, so an explicit default port in the domain compares equal.
    return new URL(`${url.protocol}//${domain}`).host === url.host;
  } catch {
    return false;
  }
}

/** 403 for a page that is not (or cannot be) on the site's domain. */
export function originForbidden(message: string): HeraldError {
  return new HeraldError('forbidden', message, {
    title: 'Forbidden',
    hint: "Call this endpoint from a page on the site's registered domain, over https (http only for localhost sites).",
  });
}

function assertOrigin(origin: string | undefined, domain: string, allowLocalhostSites: boolean, hostedOrigin: string): string {
  // Herald's own origin serves each site's hosted subscribe page (/s/<slug>) and nothing a
  // stranger controls, so its pages may use any site's key.
  if (origin !== undefined && origin === hostedOrigin) return origin;
  if (!origin) {
    throw originForbidden(`The Origin header is missing: the site key works only from pages on the site's registered domain (${domain}).`);
  }
  if (!allowLocalhostSites && isLocalHostname(domain.replace(/:\d+$/, ''))) {
    throw originForbidden(`Localhost sites are disabled on this deployment; register the site's public domain instead of ${domain}.`);
  }
  if (!originMatchesDomain(origin, domain)) {
    throw originForbidden(`Origin ${origin} is not the site's registered domain (${domain}); the site key works only from pages on that domain.`);
  }
  return origin;
}

/**
 * CORS preflights of the browser SDK's endpoints carry no key: any origin that could be a site's
 * may ask; the request itself is then held to its own site's domain (or, for engagement reports,
 * to its token). With `anyOrigin` (the public site record) every page may ask.
 */
export const corsPreflight =
  (config: { allowLocalhostSites: boolean }, methods: string, anyOrigin: boolean) => async (request: FastifyRequest, reply: FastifyReply) => {
    const origin = request.headers.origin;
    if (anyOrigin) reply.header('access-control-allow-origin', '*');
    else if (allowOrigin(request, reply, config.allowLocalhostSites) === undefined) {
      throw originForbidden(
        origin ? `Origin ${origin} cannot be a site's: pages must be served over https (http only on localhost).` : 'A CORS preflight needs an Origin header.',
      );
    }
    return reply
      .code(204)
      .header('access-control-allow-methods', methods)
      .header('access-control-allow-headers', 'authorization, content-type')
      .header('access-control-max-age', '600')
      .send(null);
  };

/** The route options of a preflight: no key, and its one answer documented. */
export const preflightOptions = { config: { access: { public: true } }, schema: { response: withErrors({ 204: Type.Null({ description: 'No content' }) }) } } as const;

// ---- the hook -------------------------------------------------------------------------------

/** CORS for a browser-facing response: the exact Origin when it could be a site's, and Vary. */
export function allowOrigin(request: FastifyRequest, reply: FastifyReply, allowLocalhostSites: boolean): string | undefined {
  reply.header('vary', 'Origin');
  const origin = request.headers.origin;
  if (!isCandidateOrigin(origin, allowLocalhostSites)) return undefined;
  reply.header('access-control-allow-origin', origin);
  return origin;
}

export interface SiteKeyOptions {
  resolveSite: ReturnType<typeof siteKeyResolver>;
  limiter: RateLimiter;
  allowLocalhostSites: boolean;
  upgradeUrl: string;
  /** Herald's public origin, where the hosted subscribe pages are. */
  hostedOrigin: string;
}

const bearerToken = /^Bearer\s+(\S+)$/i;

/**
 * Browsers send no Origin with a same-origin GET, so the hosted page's GET /api/v1/sdk-config
 * arrives without one; its Fetch metadata (Sec-Fetch-Site, which pages cannot set) says it came
 * from a page of the origin it was sent to. Sent to Herald's own origin, that is the hosted page.
 */
function hostedPageOrigin(request: FastifyRequest, hostedOrigin: string): string | undefined {
  return request.headers['sec-fetch-site'] === 'same-origin' && request.headers.host === new URL(hostedOrigin).host ? hostedOrigin : undefined;
}

export function siteKeyAuthentication({ resolveSite, limiter, allowLocalhostSites, upgradeUrl, hostedOrigin }: SiteKeyOptions) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const access = request.routeOptions.config.access;
    if (!access || !('siteKey' in access)) return;
    // Set before any check, so the SDK can read the error of a refused request.
    allowOrigin(request, reply, allowLocalhostSites);

    const token = bearerToken.exec(request.headers.authorization ?? '')?.[1];
    if (!token) throw unauthorized('Missing site key. Send it as a Bearer token: "Authorization: Bearer pk_<id>".');
    const parsed = parseKey(token);
    if (parsed.kind === 'full') {
      throw unauthorized(
        'A full API key is secret and must never reach a browser; these endpoints take the site key (pk_<id>). Rotate the key if it was exposed.',
      );
    }
    if (parsed.kind === 'malformed') throw unauthorized('Malformed site key. Use a Bearer key of the form pk_<id>.');
    const site = await resolveSite(token);
    await enforceRateLimit(limiter, reply, `site:${parsed.id}`, site.plan?.rateLimitPerMinute ?? 0);
    assertActivePlan(site.plan, upgradeUrl);
    const origin = assertOrigin(request.headers.origin ?? hostedPageOrigin(request, hostedOrigin), site.domain, allowLocalhostSites, hostedOrigin);
    request.site = {
      workspaceId: site.workspaceId,
      siteId: site.siteId,
      origin,
      identitySecrets: site.identitySecrets,
      freshIdentitySecrets: async () => (await resolveSite(token, true)).identitySecrets,
    };
  };
}
