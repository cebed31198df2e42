import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { COUNTRY_CODE_PATTERN, INSTANT_PATTERN, SEGMENT_LIMITS, SUBSCRIBER_LIMITS, SUBSCRIBER_STATUSES, type SubscriberStatus } from '@herald/domain';
import type { Segment, SegmentFilter } from '@herald/proto/herald/audience/v1/segments';
import { Type, type Static } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { orNull, PageOf, PageQuery, withErrors } from '../schemas/common.js';
import { Tag } from '../schemas/subscribers.js';

/** /segments: saved audiences, a named filter over what subscribers hold (dashboard keys). */

const Name = Type.String({ minLength: 1, maxLength: SEGMENT_LIMITS.nameLength });
const Status = Type.Unsafe<SubscriberStatus>({ type: 'string', enum: [...SUBSCRIBER_STATUSES] });
const Tags = (description: string) => Type.Array(Tag, { maxItems: SEGMENT_LIMITS.tagsPerList, description });
const Values = <T extends Parameters<typeof Type.Array>[0]>(item: T, description: string) => Type.Array(item, { maxItems: SEGMENT_LIMITS.valuesPerList, description });
const DeviceName = Type.String({ minLength: 1, maxLength: SUBSCRIBER_LIMITS.deviceFieldLength });
/** RFC 3339 / ISO 8601 with a time and an offset; the audience service also checks it names a real instant. */
const Instant = (description: string) => Type.String({ pattern: INSTANT_PATTERN, maxLength: 40, description });
const CustomDataValue = Type.Union([Type.String({ maxLength: SEGMENT_LIMITS.customDataValueLength }), Type.Number(), Type.Boolean()]);

const Filter = Type.Object(
  {
    tags: Type.Optional(
      Type.Object(
        {
          all: Type.Optional(Tags('The subscriber holds every one of these tags')),
          any: Type.Optional(Tags('... at least one of these')),
          none: Type.Optional(Tags('... and none of these')),
        },
        { additionalProperties: false },
      ),
    ),
    hasExternalId: Type.Optional(Type.Boolean({ description: 'true: subscribers with an externalId; false: those without' })),
    status: Type.Optional(Values(Status, 'Subscribers in one of these states (a campaign still reaches only active ones)')),
    browser: Type.Optional(Values(DeviceName, 'Case-insensitive; "Firefox" matches "Firefox" and "Firefox 128"')),
    os: Type.Optional(Values(DeviceName, 'Case-insensitive; "Windows" matches "Windows" and "Windows 11"')),
    country: Type.Optional(Values(Type.String({ pattern: COUNTRY_CODE_PATTERN }), 'ISO 3166-1 alpha-2 codes, upper case')),
    customData: Type.Optional(
      Type.Record(Type.String(), CustomDataValue, {
        maxProperties: SEGMENT_LIMITS.customDataKeys,
        propertyNames: { minLength: 1, maxLength: SEGMENT_LIMITS.customDataKeyLength },
        description: 'Top-level customData keys the subscriber holds with these exact values',
      }),
    ),
    createdAfter: Type.Optional(Instant('Subscribed at or after this instant')),
    createdBefore: Type.Optional(Instant('Subscribed before this instant')),
  },
  { additionalProperties: false, description: 'Every dimension given must hold; an empty filter matches every subscriber' },
);
type FilterBody = Static<typeof Filter>;

const SegmentRecord = Type.Object({
  id: Type.String(),
  name: Type.String(),
  filter: Filter,
  createdAt: Type.String(),
  updatedAt: Type.String(),
});

const CreateBody = Type.Object({ name: Name, filter: Filter }, { additionalProperties: false });
const PatchBody = Type.Partial(CreateBody, { additionalProperties: false, minProperties: 1 });
const Params = Type.Object({ segmentId: Type.String({ minLength: 1, maxLength: 64 }) });

function toFilterMessage(filter: FilterBody): SegmentFilter {
  return {
    tagsAll: filter.tags?.all ?? [],
    tagsAny: filter.tags?.any ?? [],
    tagsNone: filter.tags?.none ?? [],
    ...(filter.hasExternalId !== undefined ? { hasExternalId: filter.hasExternalId } : {}),
    statuses: filter.status ?? [],
    browsers: filter.browser ?? [],
    oses: filter.os ?? [],
    countries: filter.country ?? [],
    customDataJson: filter.customData && Object.keys(filter.customData).length > 0 ? JSON.stringify(filter.customData) : '',
    createdAfter: filter.createdAfter ?? '',
    createdBefore: filter.createdBefore ?? '',
  };
}

/** The filter as the API shows it: only the dimensions set. */
function toFilterBody(filter: SegmentFilter | undefined): FilterBody {
  if (!filter) return {};
  const tags = {
    ...(filter.tagsAll.length > 0 ? { all: filter.tagsAll } : {}),
    ...(filter.tagsAny.length > 0 ? { any: filter.tagsAny } : {}),
    ...(filter.tagsNone.length > 0 ? { none: filter.tagsNone } : {}),
  };
  return {
    ...(Object.keys(tags).length > 0 ? { tags } : {}),
    ...(filter.hasExternalId !== undefined ? { hasExternalId: filter.hasExternalId } : {}),
    ...(filter.statuses.length > 0 ? { status: filter.statuses as SubscriberStatus[] } : {}),
    ...(filter.browsers.length > 0 ? { browser: filter.browsers } : {}),
    ...(filter.oses.length > 0 ? { os: filter.oses } : {}),
    ...(filter.countries.length > 0 ? { country: filter.countries } : {}),
    ...(filter.customDataJson ? { customData: JSON.parse(filter.customDataJson) as Record<string, string | number | boolean> } : {}),
    ...(filter.createdAfter ? { createdAfter: filter.createdAfter } : {}),
    ...(filter.createdBefore ? { createdBefore: filter.createdBefore } : {}),
  };
}

function toRecord(segment: Segment | undefined) {
  if (!segment) throw new Error('audience service returned no segment');
  return { id: segment.id, name: segment.name, filter: toFilterBody(segment.filter), createdAt: segment.createdAt, updatedAt: segment.updatedAt };
}

export const segmentRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    // Segments read the audience: the subscribers scope (dashboard keys only).
    const config = { access: { scope: 'subscribers' as const } };
    const ref = (request: { params: { segmentId: string } } & Parameters<typeof principalOf>[0]) => ({
      workspaceId: principalOf(request).workspaceId,
      segmentId: request.params.segmentId,
    });

    app.get(
      '/segments',
      {
        config,
        schema: {
          tags: ['Segments'],
          operationId: 'listSegments',
          summary: 'List segments, newest first',
          querystring: Type.Object(PageQuery, { additionalProperties: false }),
          response: withErrors({ 200: PageOf(SegmentRecord) }),
        },
      },
      async (request) => {
        const { segments, nextCursor } = await clients.segments.listSegments({
          workspaceId: principalOf(request).workspaceId,
          limit: request.query.limit,
          cursor: request.query.cursor ?? '',
        });
        return { data: segments.map(toRecord), hasMore: nextCursor !== '', nextCursor: orNull(nextCursor) };
      },
    );

    app.post(
      '/segments',
      { config, schema: { tags: ['Segments'], operationId: 'createSegment', summary: 'Create a segment', body: CreateBody, response: withErrors({ 201: SegmentRecord }) } },
      async (request, reply) => {
        const { segment } = await clients.segments.createSegment({
          workspaceId: principalOf(request).workspaceId,
          name: request.body.name,
          filter: toFilterMessage(request.body.filter),
        });
        return reply.code(201).send(toRecord(segment));
      },
    );

    app.get(
      '/segments/:segmentId',
      { config, schema: { tags: ['Segments'], operationId: 'getSegment', summary: 'Read a segment', params: Params, response: withErrors({ 200: SegmentRecord }) } },
      async (request) => toRecord((await clients.segments.getSegment(ref(request))).segment),
    );

    app.patch(
      '/segments/:segmentId',
      {
        config,
        schema: {
          tags: ['Segments'],
          operationId: 'updateSegment',
          summary: 'Rename a segment or replace its filter',
          params: Params,
          body: PatchBody,
          response: withErrors({ 200: SegmentRecord }),
        },
      },
      async (request) => {
        const { name, filter } = request.body;
        const { segment } = await clients.segments.updateSegment({
          ...ref(request),
          ...(name !== undefined ? { name } : {}),
          ...(filter !== undefined ? { filter: toFilterMessage(filter) } : {}),
        });
        return toRecord(segment);
      },
    );

    app.delete(
      '/segments/:segmentId',
      { config, schema: { tags: ['Segments'], operationId: 'deleteSegment', summary: 'Delete a segment', params: Params, response: withErrors({ 204: Type.Null({ description: 'No content' }) }) } },
      async (request, reply) => {
        await clients.segments.deleteSegment(ref(request));
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/segments/:segmentId/count',
      {
        config,
        schema: {
          tags: ['Segments'],
          operationId: 'countSegment',
          summary: 'Count the subscribers a segment matches now',
          params: Params,
          response: withErrors({
            200: Type.Object({
              active: Type.Integer({ description: 'Active subscribers matching: whom a campaign to this segment reaches now' }),
              total: Type.Integer({ description: 'Subscribers matching in any status the filter allows' }),
            }),
          }),
        },
      },
      async (request) => {
        const { active, total } = await clients.segments.countSegment(ref(request));
        return { active: Number(active), total: Number(total) };
      },
    );
  };
