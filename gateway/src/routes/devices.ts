import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { SUBSCRIBER_STATUSES, type SubscriberStatus } from '@herald/domain';
import type { Subscriber } from '@herald/proto/herald/audience/v1/audience';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import type { GatewayConfig } from '../config.js';
import { Nullable, orNull, withErrors } from '../schemas/common.js';
import { DeviceFields, PushSubscription } from '../schemas/subscribers.js';
import { sessionOf } from '../sessions.js';
import { checkPushSubscription, storeSubscription } from '../subscriptions.js';

/**
 * A signed-in member's own devices (sessions only, CSRF-checked like every change):
 *   POST   {base}/me/devices            this browser's push subscription becomes the member's device
 *   GET    {base}/me/devices            the member's devices
 *   DELETE {base}/me/devices/{deviceId} removes one (another member's: 404)
 * A device is a subscriber of the workspace's site owned by the member (the session is the proof,
 * so no request can name another member): a question addressed to {kind: member, id} is pushed
 * to it, and nothing else is (no campaign, send or question not addressed to the member).
 */

export interface DeviceRouteOptions {
  clients: ServiceClients;
  config: GatewayConfig;
}

const DeviceRecord = Type.Object({
  id: Type.String(),
  status: Type.Unsafe<SubscriberStatus>({ type: 'string', enum: [...SUBSCRIBER_STATUSES] }),
  browser: Nullable(Type.String()),
  os: Nullable(Type.String()),
  pushService: Nullable(Type.String({ description: 'Origin of the push service, e.g. https://updates.push.services.mozilla.com' })),
  createdAt: Type.String(),
});

function deviceRecord(subscriber: Subscriber) {
  return {
    id: subscriber.id,
    status: subscriber.status as SubscriberStatus,
    browser: orNull(subscriber.browser),
    os: orNull(subscriber.os),
    pushService: orNull(subscriber.pushService),
    createdAt: subscriber.createdAt,
  };
}

/** A member has a handful of browsers; the list is one page. */
const MAX_DEVICES = 100;

export const deviceRoutes =
  ({ clients, config }: DeviceRouteOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    const access = { scope: 'me' } as const;
    const tags = ['Members'];

    app.post(
      '/me/devices',
      {
        config: { access },
        schema: {
          tags,
          operationId: 'addMyDevice',
          summary: "Make this browser's push subscription one of your devices: questions addressed to you are pushed to it (sessions only)",
          body: Type.Object({ ...PushSubscription, browser: DeviceFields.browser, os: DeviceFields.os }, { additionalProperties: false }),
          response: withErrors({
            200: Type.Object({ deviceId: Type.String(), created: Type.Literal(false) }),
            201: Type.Object({ deviceId: Type.String(), created: Type.Literal(true) }),
          }),
        },
      },
      async (request, reply) => {
        const subscription = checkPushSubscription(request.body, '', config);
        const principal = principalOf(request);
        const site = { workspaceId: principal.workspaceId, siteId: principal.siteId };
        const { subscriberId, created } = await storeSubscription(clients, site, subscription, request.body, false, sessionOf(request).member.id);
        return reply.code(created ? 201 : 200).send({ deviceId: subscriberId, created });
      },
    );

    app.get(
      '/me/devices',
      { config: { access }, schema: { tags, operationId: 'listMyDevices', summary: 'Your devices, newest first (sessions only)', response: withErrors({ 200: Type.Object({ devices: Type.Array(DeviceRecord) }) }) } },
      async (request) => {
        const { subscribers } = await clients.audience.listSubscribers({
          workspaceId: principalOf(request).workspaceId,
          memberId: sessionOf(request).member.id,
          limit: MAX_DEVICES,
          cursor: '',
          status: '',
          tags: [],
          externalId: '',
        });
        return { devices: subscribers.map(deviceRecord) };
      },
    );

    app.delete(
      '/me/devices/:deviceId',
      {
        config: { access },
        schema: {
          tags,
          operationId: 'removeMyDevice',
          summary: 'Remove one of your devices: nothing is pushed to it any more (sessions only)',
          params: Type.Object({ deviceId: Type.String({ minLength: 1, maxLength: 128 }) }),
          response: withErrors({ 204: Type.Null({ description: 'No content' }) }),
        },
      },
      async (request, reply) => {
        await clients.audience.deleteSubscriber({ workspaceId: principalOf(request).workspaceId, subscriberId: request.params.deviceId, memberId: sessionOf(request).member.id });
        return reply.code(204).send(null);
      },
    );
  };
