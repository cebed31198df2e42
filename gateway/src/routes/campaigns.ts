import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { CONTENT_LIMITS, VARIABLE_NAME_PATTERN } from '@herald/domain';
import type { Campaign } from '@herald/proto/herald/campaign/v1/campaign';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { ErrorResponse, Nullable, orNull, PageOf, PageQuery, withErrors } from '../schemas/common.js';
import { ActionUrl, Body, BodyAs, HttpUrl, Name, PLACEHOLDERS, Title, TitleAs } from '../schemas/content.js';

/** /campaigns: scheduled or on-demand sends to the site's audience (dashboard keys). docs/campaigns.md has the states. */

const Status = Type.Union(
  ['draft', 'scheduled', 'sending', 'active', 'paused', 'completed'].map((status) => Type.Literal(status)),
  { description: 'draft | scheduled | sending | active (resumed) | paused | completed' },
);
const ThrottlePerMinute = Type.Integer({ minimum: 1, maximum: 10_000_000, description: 'At most this many recipients queued per minute' });
const ScheduledAt = Type.String({ format: 'date-time', description: 'ISO 8601; the campaign starts then by itself' });
const SegmentId = Type.String({ minLength: 1, maxLength: 64, description: 'A segment of the workspace (/segments); null: every active subscriber' });

const CampaignRecord = Type.Object({
  id: Type.String(),
  name: Type.String(),
  status: Status,
  title: Type.String(),
  body: Type.String(),
  iconUrl: Nullable(Type.String()),
  imageUrl: Nullable(Type.String()),
  actionUrl: Nullable(Type.String()),
  scheduledAt: Nullable(Type.String()),
  segmentId: Nullable(Type.String({ description: 'null: every active subscriber' })),
  templateId: Nullable(Type.String({ description: 'The template its content was copied from' })),
  throttlePerMinute: Nullable(Type.Integer()),
  totalTargeted: Type.Integer({ description: 'Subscribers it was aimed at' }),
  totalSent: Type.Integer({ description: 'Pushes the push service accepted' }),
  totalDelivered: Type.Integer({ description: 'Impressions the service worker confirmed' }),
  totalClicked: Type.Integer({ description: 'Clicks reported' }),
  totalFailed: Type.Integer({ description: 'Refused for good, or the subscription is gone' }),
  totalQueued: Type.Integer({ description: 'Recipients handed to the delivery fleet so far' }),
  startError: Nullable(Type.String({ description: 'Why its scheduled start did not happen (it went back to draft)' })),
  createdAt: Type.String(),
  updatedAt: Type.String(),
  startedAt: Nullable(Type.String()),
  completedAt: Nullable(Type.String()),
});

const CampaignStats = Type.Object({
  totalSent: Type.Integer(),
  totalDelivered: Type.Integer(),
  totalClicked: Type.Integer(),
  totalFailed: Type.Integer(),
  deliveryRate: Type.Number({ description: 'totalDelivered / totalSent, percent (0 when nothing was sent)' }),
  clickRate: Type.Number({ description: 'totalClicked / totalDelivered, percent (0 when nothing was delivered)' }),
});

const SeriesQuery = Type.Object(
  {
    bucket: Type.Optional(Type.Unsafe<'minute' | 'hour' | 'day'>({ type: 'string', enum: ['minute', 'hour', 'day'], default: 'hour', description: 'The bucket size (UTC); default hour' })),
    from: Type.Optional(Type.String({ format: 'date-time', description: "Start (rounded down to its bucket); default: the campaign's creation, or as far back as 1,440 buckets reach" })),
    to: Type.Optional(Type.String({ format: 'date-time', description: 'End, exclusive; default: now' })),
  },
  { additionalProperties: false },
);

const CampaignStatsSeries = Type.Object({
  bucket: Type.String({ description: 'minute | hour | day' }),
  start: Type.String({ description: "The first bucket's start (from, rounded down to its bucket)" }),
  end: Type.String({ description: 'The exclusive end (to)' }),
  data: Type.Array(
    Type.Object({
      at: Type.String({ description: "The bucket's start (UTC)" }),
      sent: Type.Integer({ description: 'Pushes the push service accepted (totalSent)' }),
      delivered: Type.Integer({ description: 'Impressions the service worker confirmed (totalDelivered)' }),
      clicked: Type.Integer({ description: 'Clicks reported' }),
      dismissed: Type.Integer({ description: 'Dismissals reported' }),
    }),
    { description: 'Every bucket of the window, oldest first, zeros included (at most 1,440)' },
  ),
});

const Variables = Type.Record(Type.String({ pattern: VARIABLE_NAME_PATTERN }), Type.String({ maxLength: CONTENT_LIMITS.variable }), {
  maxProperties: CONTENT_LIMITS.variables,
  description: "Values for the template's (or the content's) {{placeholders}}",
});

export const CreateCampaignBody = Type.Object(
  {
    name: Name,
    title: Type.Optional(TitleAs(`Required without templateId. ${PLACEHOLDERS}`)),
    body: Type.Optional(BodyAs(`Required without templateId. ${PLACEHOLDERS}`)),
    iconUrl: Type.Optional(Nullable(HttpUrl('Small icon'))),
    imageUrl: Type.Optional(Nullable(HttpUrl('Large image'))),
    actionUrl: Type.Optional(Nullable(ActionUrl)),
    scheduledAt: Type.Optional(Nullable(ScheduledAt)),
    templateId: Type.Optional(Type.String({ minLength: 1, maxLength: CONTENT_LIMITS.templateId, description: 'Copy the content of this template (fields given here override it)' })),
    variables: Type.Optional(Variables),
    throttlePerMinute: Type.Optional(Nullable(ThrottlePerMinute)),
    segmentId: Type.Optional(Nullable(SegmentId)),
  },
  {
    additionalProperties: false,
    // Checked with the other fields, so an empty body names every missing one.
    if: { not: { required: ['templateId'] } },
    then: { required: ['title', 'body'], description: 'without a templateId' },
  },
);

const PatchBody = Type.Object(
  {
    name: Type.Optional(Name),
    title: Type.Optional(Title),
    body: Type.Optional(Body),
    iconUrl: Type.Optional(Nullable(HttpUrl('Small icon'))),
    imageUrl: Type.Optional(Nullable(HttpUrl('Large image'))),
    actionUrl: Type.Optional(Nullable(HttpUrl('Opened on click'))),
    scheduledAt: Type.Optional(Nullable(ScheduledAt)),
    status: Type.Optional(
      Type.Union(
        ['draft', 'scheduled', 'sending', 'active', 'paused'].map((status) => Type.Literal(status)),
        { description: 'Moves the campaign as send, pause and resume do; draft and scheduled move between each other' },
      ),
    ),
    throttlePerMinute: Type.Optional(Nullable(ThrottlePerMinute)),
    segmentId: Type.Optional(Nullable(SegmentId)),
  },
  { additionalProperties: false, minProperties: 1 },
);

const Params = Type.Object({ campaignId: Type.String({ minLength: 1, maxLength: 64 }) });

function toRecord(campaign: Campaign | undefined) {
  if (!campaign) throw new Error('campaign service returned no campaign');
  return {
    id: campaign.id,
    name: campaign.name,
    status: campaign.status,
    title: campaign.title,
    body: campaign.body,
    iconUrl: orNull(campaign.iconUrl),
    imageUrl: orNull(campaign.imageUrl),
    actionUrl: orNull(campaign.actionUrl),
    scheduledAt: orNull(campaign.scheduledAt),
    segmentId: orNull(campaign.segmentId),
    templateId: orNull(campaign.templateId),
    throttlePerMinute: Number(campaign.throttlePerMinute) || null,
    totalTargeted: Number(campaign.totalTargeted),
    totalSent: Number(campaign.totalSent),
    totalDelivered: Number(campaign.totalDelivered),
    totalClicked: Number(campaign.totalClicked),
    totalFailed: Number(campaign.totalFailed),
    totalQueued: Number(campaign.totalQueued),
    startError: orNull(campaign.startError),
    createdAt: campaign.createdAt,
    updatedAt: campaign.updatedAt,
    startedAt: orNull(campaign.startedAt),
    completedAt: orNull(campaign.completedAt),
  };
}

/** A field given as null clears it: the service takes an empty string (or 0) for that. */
const given = <K extends string, V>(key: K, value: V | null | undefined, cleared: V) =>
  value === undefined ? {} : ({ [key]: value ?? cleared } as Record<K, V>);

export const campaignRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    const config = { access: { scope: 'campaigns' as const } };
    const tags = ['Campaigns'];
    const ref = (request: { params: { campaignId: string } } & Parameters<typeof principalOf>[0]) => ({
      workspaceId: principalOf(request).workspaceId,
      campaignId: request.params.campaignId,
    });

    app.get(
      '/campaigns',
      {
        config,
        schema: {
          tags,
          operationId: 'listCampaigns',
          summary: 'List campaigns (sends included), newest first',
          querystring: Type.Object(PageQuery, { additionalProperties: false }),
          response: withErrors({ 200: PageOf(CampaignRecord) }),
        },
      },
      async (request) => {
        const { campaigns, nextCursor } = await clients.campaign.listCampaigns({
          workspaceId: principalOf(request).workspaceId,
          limit: request.query.limit,
          cursor: request.query.cursor ?? '',
        });
        return { data: campaigns.map(toRecord), hasMore: nextCursor !== '', nextCursor: orNull(nextCursor) };
      },
    );

    app.post(
      '/campaigns',
      {
        config,
        schema: {
          tags,
          operationId: 'createCampaign',
          summary: 'Create a campaign: a draft, or scheduled when scheduledAt is given (creating never sends)',
          body: CreateCampaignBody,
          response: withErrors({ 201: CampaignRecord }),
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const body = request.body;
        const { campaign } = await clients.campaign.createCampaign({
          workspaceId: principal.workspaceId,
          siteId: principal.siteId,
          name: body.name,
          content: {
            title: body.title ?? '',
            body: body.body ?? '',
            iconUrl: body.iconUrl ?? '',
            imageUrl: body.imageUrl ?? '',
            actionUrl: body.actionUrl ?? '',
          },
          templateId: body.templateId ?? '',
          variables: body.variables ?? {},
          scheduledAt: body.scheduledAt ?? '',
          throttlePerMinute: String(body.throttlePerMinute ?? 0),
          segmentId: body.segmentId ?? '',
        });
        return reply.code(201).send(toRecord(campaign));
      },
    );

    app.get(
      '/campaigns/:campaignId',
      { config, schema: { tags, operationId: 'getCampaign', summary: 'Read a campaign with its lifetime counters', params: Params, response: withErrors({ 200: CampaignRecord }) } },
      async (request) => toRecord((await clients.campaign.getCampaign(ref(request))).campaign),
    );

    app.patch(
      '/campaigns/:campaignId',
      {
        config,
        schema: {
          tags,
          operationId: 'updateCampaign',
          summary: 'Change a campaign: only the fields given; status moves it when the state machine allows',
          params: Params,
          body: PatchBody,
          response: withErrors({ 200: CampaignRecord, 409: ErrorResponse }),
        },
      },
      async (request) => {
        const body = request.body;
        const { campaign } = await clients.campaign.updateCampaign({
          ...ref(request),
          ...given('name', body.name, ''),
          ...given('title', body.title, ''),
          ...given('body', body.body, ''),
          ...given('iconUrl', body.iconUrl, ''),
          ...given('imageUrl', body.imageUrl, ''),
          ...given('actionUrl', body.actionUrl, ''),
          ...given('scheduledAt', body.scheduledAt, ''),
          ...given('status', body.status, ''),
          ...given('throttlePerMinute', body.throttlePerMinute === undefined ? undefined : String(body.throttlePerMinute ?? 0), '0'),
          ...given('segmentId', body.segmentId, ''),
        });
        return toRecord(campaign);
      },
    );

    app.delete(
      '/campaigns/:campaignId',
      {
        config,
        schema: {
          tags,
          operationId: 'deleteCampaign',
          summary: 'Delete a campaign: nothing more is sent; deliveries already made are unaffected',
          params: Params,
          response: withErrors({ 204: Type.Null({ description: 'No content' }) }),
        },
      },
      async (request, reply) => {
        await clients.campaign.deleteCampaign(ref(request));
        return reply.code(204).send(null);
      },
    );

    const moves = [
      ['send', 'sendCampaign', 'Start a draft or scheduled campaign now (ignores its schedule); answers the campaign, now sending'],
      ['pause', 'pauseCampaign', 'Pause a sending or active campaign: nothing more is queued; queued deliveries still land'],
      ['resume', 'resumeCampaign', 'Resume a paused campaign (status active): the fan-out continues where it stopped'],
    ] as const;
    for (const [action, operationId, summary] of moves) {
      app.post(
        `/campaigns/:campaignId/${action}`,
        { config, schema: { tags, operationId, summary, params: Params, response: withErrors({ 200: CampaignRecord, 409: ErrorResponse }) } },
        async (request) => toRecord((await clients.campaign[operationId](ref(request))).campaign),
      );
    }

    app.get(
      '/campaigns/:campaignId/stats',
      { config, schema: { tags, operationId: 'getCampaignStats', summary: "A campaign's counts and rates", params: Params, response: withErrors({ 200: CampaignStats }) } },
      async (request) => {
        const stats = await clients.campaign.getCampaignStats(ref(request));
        return {
          totalSent: Number(stats.totalSent),
          totalDelivered: Number(stats.totalDelivered),
          totalClicked: Number(stats.totalClicked),
          totalFailed: Number(stats.totalFailed),
          deliveryRate: stats.deliveryRate,
          clickRate: stats.clickRate,
        };
      },
    );

    app.get(
      '/campaigns/:campaignId/stats/series',
      {
        config,
        schema: {
          tags,
          operationId: 'getCampaignStatsSeries',
          summary: "A campaign's sent, delivered, clicked and dismissed counts per minute, hour or day",
          params: Params,
          querystring: SeriesQuery,
          response: withErrors({ 200: CampaignStatsSeries }),
        },
      },
      async (request) => {
        const series = await clients.campaign.getCampaignStatsSeries({
          ...ref(request),
          bucket: request.query.bucket ?? 'hour',
          from: request.query.from ?? '',
          to: request.query.to ?? '',
        });
        return {
          bucket: series.bucket,
          start: series.from,
          end: series.to,
          data: series.buckets.map((bucket) => ({
            at: bucket.at,
            sent: Number(bucket.sent),
            delivered: Number(bucket.delivered),
            clicked: Number(bucket.clicked),
            dismissed: Number(bucket.dismissed),
          })),
        };
      },
    );
  };
