import { createPublicKey } from 'node:crypto';

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { SUBSCRIBER_LIMITS } from '@herald/domain';
import { invalidFields, type FieldProblem } from '@herald/errors';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';

import type { ServiceClients } from '../clients.js';
import type { GatewayConfig } from '../config.js';
import { enforceRateLimit, type RateLimiter } from '../rate-limit.js';
import { Nullable, orNull, withErrors } from '../schemas.js';
import { allowOrigin, originForbidden, siteOf } from '../site-keys.js';
import { ExternalId, TagList } from './subscribers.js';

/**
 * The browser SDK's endpoints under {origin}/api/v1 (not /api/v1/server): subscribe,
 * subscription-change and unsubscribe (site key + Origin, see site-keys.ts), the public site
 * record, and their CORS preflights.
 */

export const PUBLIC_PREFIX = '/api/v1';

type PushOptions = Pick<GatewayConfig, 'allowAnyPushService' | 'pushServiceHosts'>;

const Base64Url = Type.String({ minLength: 1, maxLength: 200, description: 'base64url' });
/** A PushSubscription.toJSON(), as properties to build body schemas from. */
export const PushSubscription = {
  endpoint: Type.String({ minLength: 1, maxLength: SUBSCRIBER_LIMITS.endpointLength, description: "The push service's https endpoint" }),
  keys: Type.Object({ p256dh: Base64Url, auth: Base64Url }, { additionalProperties: false }),
  // PushSubscription.toJSON() carries it; accepted and ignored.
  expirationTime: Type.Optional(Nullable(Type.Number())),
};
const DeviceField = Type.Optional(Type.String({ maxLength: SUBSCRIBER_LIMITS.deviceFieldLength }));
/** What the page may say about the browser, kept with the subscriber. */
export const DeviceFields = { browser: DeviceField, os: DeviceField, language: DeviceField, timezone: DeviceField };

const SubscribeBody = Type.Object(
  {
    ...PushSubscription,
    externalId: Type.Optional(ExternalId),
    tags: Type.Optional(TagList),
    ...DeviceFields,
  },
  { additionalProperties: false },
);
type SubscribeInput = Static<typeof SubscribeBody>;

/** Stores a subscription checkPushSubscription accepted, with the page's metadata, for the site. */
export async function storeSubscription(
  clients: ServiceClients,
  site: { workspaceId: string; siteId: string },
  subscription: PushSubscriptionInput,
  body: Omit<SubscribeInput, 'endpoint' | 'keys'>,
): Promise<{ subscriberId: string; created: boolean }> {
  return clients.audience.subscribe({
    workspaceId: site.workspaceId,
    siteId: site.siteId,
    endpoint: subscription.endpoint,
    keys: subscription.keys,
    externalId: body.externalId ?? '',
    tags: body.tags ?? [],
    browser: body.browser ?? '',
    os: body.os ?? '',
    language: body.language ?? '',
    timezone: body.timezone ?? '',
    country: '',
  });
}

const base64UrlPattern = /^[A-Za-z0-9_-]+={0,2}$/;

function decodeBase64Url(value: string): Buffer | undefined {
  return base64UrlPattern.test(value) ? Buffer.from(value.replace(/=+$/, ''), 'base64url') : undefined;
}

/** Whether an uncompressed point (0x04 ‖ x ‖ y, 65 bytes) is on the P-256 curve. */
function isOnP256(point: Buffer): boolean {
  try {
    createPublicKey({
      key: { kty: 'EC', crv: 'P-256', x: point.subarray(1, 33).toString('base64url'), y: point.subarray(33).toString('base64url') },
      format: 'jwk',
    });
    return true;
  } catch {
    return false;
  }
}

function endpointProblem(endpoint: string, options: PushOptions): string | undefined {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return 'must be an https URL';
  }
  if (url.protocol !== 'https:') return 'must be an https URL';
  if (url.username || url.password) return 'must not carry credentials';
  if (options.allowAnyPushService) return undefined;
  const host = url.hostname.toLowerCase();
  const known = options.pushServiceHosts.some((suffix) => host === suffix.toLowerCase() || host.endsWith(`.${suffix.toLowerCase()}`));
  return known ? undefined : `is not on a known push service (${options.pushServiceHosts.join(', ')})`;
}

interface PushSubscriptionInput {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

/**
 * What the schema cannot say about a push subscription: an https endpoint on a push service, a
 * p256dh that is a P-256 point, an auth secret of 16 bytes. All problems in one 400; the keys come
 * back as unpadded base64url.
 */
export function checkPushSubscription(subscription: PushSubscriptionInput, prefix: string, options: PushOptions): PushSubscriptionInput {
  const problems: FieldProblem[] = [];
  const problem = (field: string, text: string) => problems.push({ field: `${prefix}${field}`, in: 'body', problem: text });
  const endpoint = endpointProblem(subscription.endpoint, options);
  if (endpoint) problem('endpoint', endpoint);
  const p256dh = decodeBase64Url(subscription.keys.p256dh);
  if (p256dh?.length !== 65 || p256dh[0] !== 4) problem('keys.p256dh', 'must be base64url of a 65-byte uncompressed P-256 point');
  else if (!isOnP256(p256dh)) problem('keys.p256dh', 'is not a point on the P-256 curve');
  const auth = decodeBase64Url(subscription.keys.auth);
  if (auth?.length !== 16) problem('keys.auth', 'must be base64url of exactly 16 bytes');
  if (problems.length > 0 || !p256dh || !auth) throw invalidFields('body', problems);
  return { endpoint: subscription.endpoint, keys: { p256dh: p256dh.toString('base64url'), auth: auth.toString('base64url') } };
}

export interface PublicRouteOptions {
  clients: ServiceClients;
  config: GatewayConfig;
  limiter: RateLimiter;
}

export const publicRoutes =
  ({ clients, config, limiter }: PublicRouteOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    const access = { siteKey: true } as const;

    // CORS preflights carry no key: any origin that could be a site's may ask; the request
    // itself is then held to its own site's domain. The public site record is readable anywhere.
    const preflight = (methods: string, anyOrigin: boolean) => async (request: FastifyRequest, reply: FastifyReply) => {
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
    const preflightOptions = { config: { access: { public: true } }, schema: { response: withErrors({ 204: Type.Null({ description: 'No content' }) }) } } as const;
    for (const path of ['/subscribe', '/subscription-change', '/unsubscribe']) app.options(path, preflightOptions, preflight('POST, OPTIONS', false));
    app.options('/site/:siteSlug', preflightOptions, preflight('GET, OPTIONS', true));

    app.post(
      '/subscribe',
      {
        config: { access },
        schema: {
          tags: ['Browser SDK'],
          operationId: 'subscribe',
          summary: 'Store a browser push subscription (site key)',
          body: SubscribeBody,
          response: withErrors({
            200: Type.Object({ success: Type.Literal(true), subscriberId: Type.String(), created: Type.Literal(false) }),
            201: Type.Object({ success: Type.Literal(true), subscriberId: Type.String(), created: Type.Literal(true) }),
          }),
        },
      },
      async (request, reply) => {
        const subscription = checkPushSubscription(request.body, '', config);
        const { subscriberId, created } = await storeSubscription(clients, siteOf(request), subscription, request.body);
        return reply.code(created ? 201 : 200).send({ success: true, subscriberId, created });
      },
    );

    app.post(
      '/subscription-change',
      {
        config: { access },
        schema: {
          tags: ['Browser SDK'],
          operationId: 'changeSubscription',
          summary: "Move a subscriber to its browser's new push subscription (site key)",
          body: Type.Object(
            {
              oldEndpoint: Type.String({ minLength: 1, maxLength: SUBSCRIBER_LIMITS.endpointLength }),
              newSubscription: Type.Object(PushSubscription, { additionalProperties: false }),
            },
            { additionalProperties: false },
          ),
          response: withErrors({ 200: Type.Object({ success: Type.Literal(true), subscriberId: Type.String() }) }),
        },
      },
      async (request) => {
        const site = siteOf(request);
        const { endpoint, keys } = checkPushSubscription(request.body.newSubscription, 'newSubscription.', config);
        const { subscriberId } = await clients.audience.changeSubscription({
          workspaceId: site.workspaceId,
          siteId: site.siteId,
          oldEndpoint: request.body.oldEndpoint,
          endpoint,
          keys,
        });
        return { success: true as const, subscriberId };
      },
    );

    app.post(
      '/unsubscribe',
      {
        config: { access },
        schema: {
          tags: ['Browser SDK'],
          operationId: 'unsubscribe',
          summary: 'Unsubscribe a browser (site key)',
          body: Type.Object({ endpoint: Type.String({ minLength: 1, maxLength: SUBSCRIBER_LIMITS.endpointLength }) }, { additionalProperties: false }),
          response: withErrors({ 200: Type.Object({ success: Type.Literal(true) }) }),
        },
      },
      async (request) => {
        await clients.audience.unsubscribe({ workspaceId: siteOf(request).workspaceId, endpoint: request.body.endpoint });
        return { success: true as const };
      },
    );

    app.get(
      '/site/:siteSlug',
      {
        config: { access: { public: true } },
        schema: {
          tags: ['Browser SDK'],
          operationId: 'getPublicSite',
          summary: "Read a site's public record (no key)",
          params: Type.Object({ siteSlug: Type.String({ pattern: '^[a-z0-9-]{1,100}$' }) }),
          response: withErrors({
            200: Type.Object({
              name: Type.String(),
              logoUrl: Nullable(Type.String()),
              domain: Type.String(),
              siteKey: Type.String(),
              branding: Type.Object({ primaryColor: Type.String(), buttonText: Type.String() }),
              vapidPublicKey: Type.String({ description: 'applicationServerKey for PushManager.subscribe, base64url' }),
            }),
          }),
        },
        // Needs no key: limited per client IP, readable from any page.
        onRequest: async (request, reply) => {
          reply.header('access-control-allow-origin', '*');
          await enforceRateLimit(limiter, reply, `ip:${request.ip}`, config.ipRateLimitPerMinute);
        },
      },
      async (request) => {
        const { site } = await clients.account.getPublicSite({ slug: request.params.siteSlug });
        if (!site) throw new Error('account service returned no site');
        return {
          name: site.name,
          logoUrl: orNull(site.logoUrl),
          domain: site.domain,
          siteKey: site.siteKey,
          branding: { primaryColor: site.primaryColor, buttonText: site.buttonText },
          vapidPublicKey: site.vapidPublicKey,
        };
      },
    );
  };
