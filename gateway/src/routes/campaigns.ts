import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Campaign } from '@herald/proto/herald/campaign/v1/campaign';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { ErrorResponse, orNull, PageOf, PageQuery, withErrors } from '../schemas/common.js';
import { CampaignParams, CampaignRecord, CampaignStats, CampaignStatsSeries, CreateCampaignBody, PatchCampaignBody, SeriesQuery } from '../schemas/campaigns.js';

/** /campaigns: scheduled or on-demand sends to the site's audience (dashboard keys). docs/campaigns.md has the states. */

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
      { config, schema: { tags, operationId: 'getCampaign', summary: 'Read a campaign with its lifetime counters', params: CampaignParams, response: withErrors({ 200: CampaignRecord }) } },
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
          params: CampaignParams,
          body: PatchCampaignBody,
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
          params: CampaignParams,
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
        { config, schema: { tags, operationId, summary, params: CampaignParams, response: withErrors({ 200: CampaignRecord, 409: ErrorResponse }) } },
        async (request) => toRecord((await clients.campaign[operationId](ref(request))).campaign),
      );
    }

    app.get(
      '/campaigns/:campaignId/stats',
      { config, schema: { tags, operationId: 'getCampaignStats', summary: "A campaign's counts and rates", params: CampaignParams, response: withErrors({ 200: CampaignStats }) } },
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
          params: CampaignParams,
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
