import { decodeCursor, encodeCursor, withTransaction, type PagePosition, type Pool } from '@herald/db';
import { pushServiceOrigin, SUBSCRIBER_LIMITS, SUBSCRIBER_STATUSES } from '@herald/domain';
import { HeraldError, invalidFields } from '@herald/errors';
import { implementService } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import { AudienceServiceService, type PushKeys, type Subscriber, type Targeting } from '@herald/proto/herald/audience/v1/audience';

import { segmentFilter } from './segments.js';
import * as store from './store.js';

const DEFAULT_PAGE = 100;
const MAX_PAGE = 100;
const DEFAULT_BATCH = 500;
const MAX_BATCH = 1_000;

const invalid = (field: string, location: string, problem: string): HeraldError => invalidFields(location, [{ field, in: location, problem }]);

const toIso = (value: Date | null): string => (value ? value.toISOString() : '');

function toSubscriber(row: store.SubscriberRow): Subscriber {
  return {
    id: row.id,
    siteId: row.site_id,
    status: row.status,
    externalId: row.external_id ?? '',
    externalIdVerified: row.external_id_verified,
    memberId: row.member_id ?? '',
    tags: row.tags,
    customDataJson: JSON.stringify(row.custom_data),
    browser: row.browser ?? '',
    os: row.os ?? '',
    country: row.country ?? '',
    language: row.language ?? '',
    timezone: row.timezone ?? '',
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    pushService: pushServiceOrigin(row.endpoint),
    unsubscribedAt: toIso(row.unsubscribed_at),
  };
}

function encodeSubscriberCursor(row: store.SubscriberRow): string {
  return encodeCursor({ createdUs: row.created_us, id: row.id });
}

function decodeSubscriberCursor(cursor: string): PagePosition {
  const position = decodeCursor(cursor);
  if (!position) throw invalid('cursor', 'querystring', 'is not a cursor returned by this endpoint');
  return position;
}

function checkTags(tags: string[], field: string, location: string): string[] {
  const unique = [...new Set(tags)];
  if (unique.length > SUBSCRIBER_LIMITS.tags) throw invalid(field, location, `holds more than ${SUBSCRIBER_LIMITS.tags} tags`);
  for (const tag of unique) {
    if (tag.length === 0 || tag.length > SUBSCRIBER_LIMITS.tagLength || tag.includes(',')) {
      throw invalid(field, location, `holds a tag that is not 1-${SUBSCRIBER_LIMITS.tagLength} characters without commas`);
    }
  }
  return unique;
}

function checkExternalId(externalId: string, location: string): string {
  if (externalId.length > SUBSCRIBER_LIMITS.externalIdLength) {
    throw invalid('externalId', location, `is longer than ${SUBSCRIBER_LIMITS.externalIdLength} characters`);
  }
  return externalId;
}

function parseCustomData(json: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw invalid('customData', 'body', 'is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid('customData', 'body', 'is not an object');
  if (Buffer.byteLength(json) > SUBSCRIBER_LIMITS.customDataBytes) {
    throw invalid('customData', 'body', `is larger than ${SUBSCRIBER_LIMITS.customDataBytes} bytes serialized`);
  }
  return value as Record<string, unknown>;
}

/** The gateway validates push subscriptions fully (curve points, push-service hosts); this is the floor. */
function checkPushSubscription(endpoint: string, keys: PushKeys | undefined, endpointField: string, keysField: string) {
  let url: URL | undefined;
  try {
    url = new URL(endpoint);
  } catch {
    url = undefined;
  }
  if (url?.protocol !== 'https:' || endpoint.length > SUBSCRIBER_LIMITS.endpointLength) {
    throw invalid(endpointField, 'body', `is not an https URL of at most ${SUBSCRIBER_LIMITS.endpointLength} characters`);
  }
  if (!keys?.p256dh || !keys.auth) throw invalid(keysField, 'body', 'must hold p256dh and auth');
  return { endpoint, p256dh: keys.p256dh, auth: keys.auth };
}

function requireWorkspace(workspaceId: string, siteId?: string): void {
  if (!workspaceId || siteId === '') throw new HeraldError('invalid_request', 'workspace_id and site_id are required.');
}

/** The targeting as the store applies it: a named segment becomes its filter (NOT_FOUND when it is not the workspace's). */
async function targetingOf(pool: Pool, workspaceId: string, targeting: Targeting | undefined): Promise<store.Targeting> {
  return {
    subscriberIds: targeting?.subscriberIds ?? [],
    externalIds: targeting?.externalIds ?? [],
    tags: targeting?.tags ?? [],
    verifiedOnly: targeting?.verifiedOnly ?? false,
    // A targeting stored before members' devices (a campaign's JSON) has none.
    memberIds: targeting?.memberIds ?? [],
    ...(targeting?.segmentId ? { segment: await segmentFilter(pool, workspaceId, targeting.segmentId) } : {}),
  };
}

const notFound = (what: string): HeraldError => new HeraldError('not_found', `No ${what}.`, { title: 'Not found' });

export function audienceHandlers(pool: Pool, logger: Logger) {
  return implementService(
    AudienceServiceService,
    {
      async countSubscriptions({ workspaceId, externalId }) {
        const counts = await store.countActive(pool, workspaceId, externalId);
        return { siteActive: String(counts.site), externalIdActive: String(counts.externalId), siteVerified: String(counts.siteVerified) };
      },

      async listSubscribers({ workspaceId, limit, cursor, status, tags, externalId, memberId }) {
        const pageSize = limit <= 0 ? DEFAULT_PAGE : Math.min(limit, MAX_PAGE);
        if (status && !(SUBSCRIBER_STATUSES as readonly string[]).includes(status)) {
          throw invalid('status', 'querystring', `is not one of ${SUBSCRIBER_STATUSES.join(', ')}`);
        }
        const rows = await store.listSubscribers(pool, {
          workspaceId,
          // One more than shown tells whether there is a next page.
          limit: pageSize + 1,
          ...(cursor ? { after: decodeSubscriberCursor(cursor) } : {}),
          ...(status ? { status } : {}),
          tags: checkTags(tags, 'tags', 'querystring'),
          ...(externalId ? { externalId } : {}),
          ...(memberId ? { memberId } : {}),
        });
        const page = rows.slice(0, pageSize);
        const last = page.at(-1);
        return { subscribers: page.map(toSubscriber), nextCursor: rows.length > pageSize && last ? encodeSubscriberCursor(last) : '' };
      },

      async countSubscribers({ workspaceId }) {
        return store.countSubscribers(pool, workspaceId);
      },

      async getSubscriber({ workspaceId, subscriberId }) {
        const row = await store.findSubscriber(pool, workspaceId, subscriberId);
        if (!row) throw notFound(`subscriber ${subscriberId}`);
        return { subscriber: toSubscriber(row) };
      },

      async updateSubscriber(request) {
        const { workspaceId, subscriberId } = request;
        const patch: store.SubscriberPatch = {};
        if (request.setTags) patch.tags = checkTags(request.tags, 'tags', 'body');
        if (request.setExternalId) patch.externalId = checkExternalId(request.externalId, 'body') || null;
        if (request.setCustomData) patch.customData = parseCustomData(request.customDataJson);
        const row =
          Object.keys(patch).length > 0
            ? await store.updateSubscriber(pool, workspaceId, subscriberId, patch)
            : await store.findSubscriber(pool, workspaceId, subscriberId);
        if (!row) throw notFound(`subscriber ${subscriberId}`);
        return { subscriber: toSubscriber(row) };
      },

      async deleteSubscriber({ workspaceId, subscriberId, memberId }) {
        if (!(await store.deleteSubscriber(pool, workspaceId, subscriberId, memberId))) throw notFound(`subscriber ${subscriberId}`);
        return {};
      },

      async subscribe(request) {
        requireWorkspace(request.workspaceId, request.siteId);
        const subscription = checkPushSubscription(request.endpoint, request.keys, 'endpoint', 'keys');
        const { id, created } = await store.subscribe(pool, {
          workspaceId: request.workspaceId,
          siteId: request.siteId,
          ...subscription,
          externalId: checkExternalId(request.externalId, 'body'),
          externalIdVerified: request.externalIdVerified,
          memberId: request.memberId,
          tags: checkTags(request.tags, 'tags', 'body'),
          browser: request.browser,
          os: request.os,
          language: request.language,
          timezone: request.timezone,
          country: request.country,
        });
        return { subscriberId: id, created };
      },

      async changeSubscription(request) {
        requireWorkspace(request.workspaceId, request.siteId);
        const subscription = checkPushSubscription(request.endpoint, request.keys, 'newSubscription.endpoint', 'newSubscription.keys');
        const id = await store.changeSubscription(pool, {
          workspaceId: request.workspaceId,
          siteId: request.siteId,
          oldEndpoint: request.oldEndpoint,
          ...subscription,
        });
        if (!id) throw notFound('subscriber with this oldEndpoint');
        return { subscriberId: id };
      },

      async unsubscribe({ workspaceId, endpoint }) {
        requireWorkspace(workspaceId);
        const id = await store.unsubscribe(pool, workspaceId, endpoint);
        if (!id) throw notFound('subscriber with this endpoint');
        return { subscriberId: id };
      },

      async countTargets({ workspaceId, targeting }) {
        return { count: await store.countTargets(pool, workspaceId, await targetingOf(pool, workspaceId, targeting)) };
      },

      // One page query per batch, each awaited by the transport before the next: memory stays
      // flat however many subscribers match, and no connection is held while the client reads.
      async *streamTargets({ workspaceId, targeting, batchSize, after, withProfile }) {
        const size = batchSize <= 0 ? DEFAULT_BATCH : Math.min(batchSize, MAX_BATCH);
        const filter = await targetingOf(pool, workspaceId, targeting);
        let cursor = after;
        for (;;) {
          const page = await store.targetPage(pool, workspaceId, filter, cursor, size, withProfile);
          const last = page.at(-1);
          if (!last) return;
          cursor = last.subscriber_id;
          yield {
            targets: page.map((row) => ({
              subscriberId: row.subscriber_id,
              endpoint: row.endpoint,
              p256dh: row.p256dh,
              auth: row.auth,
              externalId: row.external_id ?? '',
              customDataJson: row.custom_data ?? '',
            })),
            cursor,
          };
          if (page.length < size) return;
        }
      },

      async expireSubscriptions({ workspaceId, subscriberIds, status }) {
        if (status !== 'expired' && status !== 'bounced') throw invalid('status', 'body', 'is not expired or bounced');
        const changed = await withTransaction(pool, (tx) => store.expireSubscribers(tx, workspaceId, subscriberIds, status));
        return { changed };
      },
    },
    logger,
  );
}
