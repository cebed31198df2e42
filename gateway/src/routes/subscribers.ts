import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { SUBSCRIBER_LIMITS, SUBSCRIBER_STATUSES, type SubscriberStatus } from '@herald/domain';
import type { Subscriber } from '@herald/proto/herald/audience/v1/audience';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { Nullable, orNull, PageOf, PageQuery, withErrors } from '../schemas/common.js';
import { ExternalId, TagList } from '../schemas/subscribers.js';

/** GET /subscribers, /subscribers/count, GET, PATCH and DELETE /subscribers/{id}. */

const Status = Type.Unsafe<SubscriberStatus>({ type: 'string', enum: [...SUBSCRIBER_STATUSES] });

const SubscriberRecord = Type.Object({
  id: Type.String(),
  siteId: Type.String(),
  status: Status,
  externalId: Nullable(Type.String()),
  externalIdVerified: Type.Boolean({
    description:
      'true when externalId was proven (an identity-verification proof or a pairing/enrollment link): only such subscribers are approver devices, counted for reachability and sent questions. Changing externalId without a proof (PATCH) makes it false.',
  }),
  tags: Type.Array(Type.String()),
  customData: Type.Object({}, { additionalProperties: true }),
  browser: Nullable(Type.String()),
  os: Nullable(Type.String()),
  country: Nullable(Type.String()),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});

/** A single read: the Subscriber plus its delivery status and device metadata. */
const SubscriberDetail = Type.Object({
  ...SubscriberRecord.properties,
  delivery: Type.Object({
    pushService: Nullable(Type.String({ description: 'Origin of the push service, e.g. https://fcm.googleapis.com' })),
    reachable: Type.Boolean({ description: 'true while the status is active: notifications are sent to it' }),
    unsubscribedAt: Nullable(Type.String({ description: 'When it stopped being active (unsubscribed, expired or bounced)' })),
  }),
  device: Type.Object({
    browser: Nullable(Type.String()),
    os: Nullable(Type.String()),
    language: Nullable(Type.String()),
    timezone: Nullable(Type.String()),
  }),
});

const SubscriberParams = Type.Object({ subscriberId: Type.String({ minLength: 1, maxLength: 128 }) });

function toRecord(subscriber: Subscriber) {
  return {
    id: subscriber.id,
    siteId: subscriber.siteId,
    status: subscriber.status as SubscriberStatus,
    externalId: orNull(subscriber.externalId),
    externalIdVerified: subscriber.externalIdVerified,
    tags: subscriber.tags,
    customData: JSON.parse(subscriber.customDataJson || '{}') as Record<string, unknown>,
    browser: orNull(subscriber.browser),
    os: orNull(subscriber.os),
    country: orNull(subscriber.country),
    createdAt: subscriber.createdAt,
    updatedAt: subscriber.updatedAt,
  };
}

function toDetail(subscriber: Subscriber | undefined) {
  if (!subscriber) throw new Error('audience service returned no subscriber');
  return {
    ...toRecord(subscriber),
    delivery: {
      pushService: orNull(subscriber.pushService),
      reachable: subscriber.status === 'active',
      unsubscribedAt: orNull(subscriber.unsubscribedAt),
    },
    device: {
      browser: orNull(subscriber.browser),
      os: orNull(subscriber.os),
      language: orNull(subscriber.language),
      timezone: orNull(subscriber.timezone),
    },
  };
}

export const subscriberRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    const access = { scope: 'subscribers' } as const;

    app.get(
      '/subscribers',
      {
        config: { access },
        schema: {
          tags: ['Subscribers'],
          operationId: 'listSubscribers',
          summary: 'List subscribers, newest first',
          querystring: Type.Object(
            {
              ...PageQuery,
              status: Type.Optional(Status),
              tags: Type.Optional(Type.String({ minLength: 1, maxLength: 4_000, description: 'Comma-separated; the subscriber must hold every tag' })),
              externalId: Type.Optional(ExternalId),
            },
            { additionalProperties: false },
          ),
          response: withErrors({
            200: PageOf(SubscriberRecord),
          }),
        },
      },
      async (request) => {
        const { limit, cursor = '', status = '', tags = '', externalId = '' } = request.query;
        const { subscribers, nextCursor } = await clients.audience.listSubscribers({
          workspaceId: principalOf(request).workspaceId,
          limit,
          cursor,
          status,
          tags: tags
            .split(',')
            .map((tag) => tag.trim())
            .filter((tag) => tag !== ''),
          externalId,
          memberId: '',
        });
        return { data: subscribers.map(toRecord), hasMore: nextCursor !== '', nextCursor: orNull(nextCursor) };
      },
    );

    app.get(
      '/subscribers/count',
      {
        config: { access },
        schema: { tags: ['Subscribers'], operationId: 'countSubscribers', summary: 'Count subscribers', response: withErrors({ 200: Type.Object({ total: Type.Integer(), active: Type.Integer(), unsubscribed: Type.Integer() }) }) },
      },
      async (request) => {
        const counts = await clients.audience.countSubscribers({ workspaceId: principalOf(request).workspaceId });
        return { total: Number(counts.total), active: Number(counts.active), unsubscribed: Number(counts.unsubscribed) };
      },
    );

    app.get(
      '/subscribers/:subscriberId',
      { config: { access }, schema: { tags: ['Subscribers'], operationId: 'getSubscriber', summary: 'Read a subscriber with its delivery status and device', params: SubscriberParams, response: withErrors({ 200: SubscriberDetail }) } },
      async (request) => {
        const workspaceId = principalOf(request).workspaceId;
        const { subscriber } = await clients.audience.getSubscriber({ workspaceId, subscriberId: request.params.subscriberId });
        return toDetail(subscriber);
      },
    );

    app.patch(
      '/subscribers/:subscriberId',
      {
        config: { access },
        schema: {
          tags: ['Subscribers'],
          operationId: 'updateSubscriber',
          summary: "Change a subscriber's tags, externalId or customData",
          params: SubscriberParams,
          body: Type.Object(
            {
              tags: Type.Optional(TagList),
              externalId: Type.Optional(
                Type.Unsafe<string | null>({ ...ExternalId, type: ['string', 'null'], description: "The caller's own user id; null clears it. A new value is stored unverified (see externalIdVerified)" }),
              ),
              customData: Type.Optional(
                Type.Object({}, { additionalProperties: true, description: `Replaces the whole object; at most ${SUBSCRIBER_LIMITS.customDataBytes} bytes as JSON` }),
              ),
            },
            { additionalProperties: false },
          ),
          response: withErrors({ 200: SubscriberDetail }),
        },
      },
      async (request) => {
        const { tags, externalId, customData } = request.body;
        const { subscriber } = await clients.audience.updateSubscriber({
          workspaceId: principalOf(request).workspaceId,
          subscriberId: request.params.subscriberId,
          setTags: tags !== undefined,
          tags: tags ?? [],
          setExternalId: externalId !== undefined,
          externalId: externalId ?? '',
          setCustomData: customData !== undefined,
          customDataJson: JSON.stringify(customData ?? {}),
        });
        return toDetail(subscriber);
      },
    );

    app.delete(
      '/subscribers/:subscriberId',
      { config: { access }, schema: { tags: ['Subscribers'], operationId: 'deleteSubscriber', summary: 'Delete a subscriber and its push subscription', params: SubscriberParams, response: withErrors({ 204: Type.Null({ description: 'No content' }) }) } },
      async (request, reply) => {
        const workspaceId = principalOf(request).workspaceId;
        await clients.audience.deleteSubscriber({ workspaceId, subscriberId: request.params.subscriberId, memberId: '' });
        return reply.code(204).send(null);
      },
    );
  };
