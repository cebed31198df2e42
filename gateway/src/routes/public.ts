import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { SUBSCRIBER_LIMITS } from '@herald/domain';
import { Type, type Static } from '@sinclair/typebox';

import type { ServiceClients } from '../clients.js';
import type { GatewayConfig } from '../config.js';
import { perClientLimit, type RateLimiter } from '../rate-limit.js';
import { Nullable, orNull, withErrors } from '../schemas/common.js';
import { corsPreflight, preflightOptions, siteOf } from '../site-keys.js';
import { DeviceFields, ExternalId, PushSubscription, TagList } from '../schemas/subscribers.js';
import { checkExternalIdProof, checkPushSubscription, storeSubscription } from '../subscriptions.js';

/**
 * The browser SDK's endpoints under {origin}/api/v1 (not /api/v1/server): subscribe,
 * subscription-change, unsubscribe and the SDK's config (site key + Origin, see site-keys.ts), the
 * public site record, and their CORS preflights.
 */


const SubscribeBody = Type.Object(
  {
    ...PushSubscription,
    externalId: Type.Optional(ExternalId),
    externalIdProof: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 128,
        description:
          "HMAC-SHA256 (hex) of externalId under the workspace's identity-verification secret, computed by the site's backend. With it the external id is verified (an approver device); without it, stored unverified. A wrong or malformed proof is a 400.",
      }),
    ),
    tags: Type.Optional(TagList),
    ...DeviceFields,
  },
  { additionalProperties: false },
);
type SubscribeInput = Static<typeof SubscribeBody>;

export interface PublicRouteOptions {
  clients: ServiceClients;
  config: GatewayConfig;
  limiter: RateLimiter;
}

export const publicRoutes =
  ({ clients, config, limiter }: PublicRouteOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    const perSite = perClientLimit(limiter, config.ipRateLimitPerMinute, (params) => `site:${(params.siteSlug ?? '').toLowerCase()}`);
    const access = { siteKey: true } as const;

    for (const path of ['/subscribe', '/subscription-change', '/unsubscribe']) app.options(path, preflightOptions, corsPreflight(config, 'POST, OPTIONS', false));
    app.options('/site/:siteSlug', preflightOptions, corsPreflight(config, 'GET, OPTIONS', true));
    app.options('/sdk-config', preflightOptions, corsPreflight(config, 'GET, OPTIONS', false));

    app.get(
      '/sdk-config',
      {
        config: { access },
        schema: {
          tags: ['Browser SDK'],
          operationId: 'getSdkConfig',
          summary: "What the browser SDK needs to subscribe: the site's VAPID public key (site key)",
          response: withErrors({
            200: Type.Object({
              vapidPublicKey: Type.String({ description: 'applicationServerKey for PushManager.subscribe, base64url' }),
            }),
          }),
        },
      },
      async (request) => {
        const { site } = await clients.account.getSite({ workspaceId: siteOf(request).workspaceId });
        if (!site) throw new Error('account service returned no site');
        return { vapidPublicKey: site.vapidPublicKey };
      },
    );

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
        const site = siteOf(request);
        const verified = await checkExternalIdProof(site, request.body.externalId, request.body.externalIdProof);
        const { subscriberId, created } = await storeSubscription(clients, site, subscription, request.body, verified);
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
        // Needs no key: limited per client IP and site, readable from any page.
        onRequest: async (request, reply) => {
          reply.header('access-control-allow-origin', '*');
          await perSite(request, reply);
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
