import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { batchingPublisher, EVENT_ID_HEADER, topics, type Bus } from '@herald/bus';
import { ENGAGEMENT_KINDS, engagementEventId, EngagementTokens, MAX_ENGAGEMENT_TOKEN_LENGTH } from '@herald/domain';
import { backingServiceUnavailable, HeraldError } from '@herald/errors';
import { EngagementEvent } from '@herald/proto/herald/engagement/v1/events';
import { Type } from '@sinclair/typebox';

import type { GatewayConfig } from '../config.js';
import { enforceRateLimit, type RateLimiter } from '../rate-limit.js';
import { withErrors } from '../schemas/common.js';
import { allowOrigin, corsPreflight, preflightOptions } from '../site-keys.js';

/**
 * POST {origin}/api/v1/events: what a site's service worker reports about a push it received
 * (impression, click, dismiss). The credential is the push's engagement token (no key): it names
 * the notification and the subscriber and cannot be forged or moved to another (see
 * @herald/domain engagement.ts). An accepted report is published to herald.engagement.events and
 * answered only once Kafka acknowledged it; while Kafka is down the answer is 503, so the browser
 * SDK keeps the report in its retry queue. A repeated report is accepted again and counted once
 * downstream (its event id is the same).
 */

export interface EngagementRouteOptions {
  config: GatewayConfig;
  limiter: RateLimiter;
  bus: Bus;
}

const EventBody = Type.Object(
  {
    type: Type.Union(
      ENGAGEMENT_KINDS.map((kind) => Type.Literal(kind)),
      { description: 'impression (shown), click (on the notification or one of its actions), dismiss (closed)' },
    ),
    token: Type.String({ minLength: 1, maxLength: MAX_ENGAGEMENT_TOKEN_LENGTH, description: "The push payload's `token`" }),
    action: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.:-]+$', description: 'The action button a click came from' })),
  },
  { additionalProperties: false },
);

/** One answer for every token that is not good, so a forger learns nothing from it. */
const invalidToken = (): HeraldError =>
  new HeraldError('invalid_request', 'The event token is not valid.', {
    title: 'Invalid event token',
    hint: "Send the `token` of the push payload the report is about, unchanged, within 30 days of the push.",
  });

export const engagementRoutes =
  ({ config, limiter, bus }: EngagementRouteOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    const tokens = new EngagementTokens(config.engagementTokenSecret);
    const publish = batchingPublisher(bus);

    app.options('/events', preflightOptions, corsPreflight(config, 'POST, OPTIONS', false));

    app.post(
      '/events',
      {
        config: { access: { public: true } },
        schema: {
          tags: ['Browser SDK'],
          operationId: 'reportEngagement',
          summary: "Report a push's impression, click or dismiss (service worker; the payload's token, no key)",
          body: EventBody,
          response: withErrors({ 202: Type.Object({ success: Type.Literal(true) }) }),
        },
        // Before the body is read: a flood from one address is refused cheaply.
        onRequest: async (request, reply) => {
          allowOrigin(request, reply, config.allowLocalhostSites);
          await enforceRateLimit(limiter, reply, `events:ip:${request.ip}`, config.engagementIpRateLimitPerMinute);
        },
      },
      async (request, reply) => {
        const { type, token, action } = request.body;
        const subject = tokens.verify(token);
        if (!subject) throw invalidToken();
        await enforceRateLimit(limiter, reply, `events:site:${subject.siteId}`, config.engagementSiteRateLimitPerMinute);
        const eventId = engagementEventId(subject.notificationId, subject.subscriberId, type);
        const value = EngagementEvent.encode({ eventId, occurredAt: new Date().toISOString(), ...subject, kind: type, action: action ?? '' }).finish();
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('Kafka did not acknowledge in time')), config.engagementPublishTimeoutMs);
        });
        try {
          await Promise.race([
            publish({ topic: topics.engagementEvents.name, key: subject.subscriberId, value: Buffer.from(value), headers: { [EVENT_ID_HEADER]: eventId } }),
            timeout,
          ]);
        } catch (err) {
          request.log.warn({ err }, 'engagement report not published');
          throw backingServiceUnavailable();
        } finally {
          clearTimeout(timer);
        }
        return reply.code(202).send({ success: true as const });
      },
    );
  };
