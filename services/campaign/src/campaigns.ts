import { pageRequest } from '@herald/db';
import { fillPlaceholders, randomId } from '@herald/domain';
import { HeraldError, invalidFields, type FieldProblem } from '@herald/errors';
import type { PromiseClient } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import { Targeting } from '@herald/proto/herald/audience/v1/audience';
import type { SegmentServiceClient } from '@herald/proto/herald/audience/v1/segments';
import type {
  Campaign,
  CreateCampaignRequest,
  DeleteCampaignRequest,
  GetCampaignRequest,
  GetCampaignStatsRequest,
  GetCampaignStatsResponse,
  GetCampaignStatsSeriesRequest,
  GetCampaignStatsSeriesResponse,
  ListCampaignsRequest,
  PauseCampaignRequest,
  ResumeCampaignRequest,
  SendCampaignRequest,
  UpdateCampaignRequest,
} from '@herald/proto/herald/campaign/v1/campaign';

import { assertFits } from './payload.js';
import { contentOf, startCampaign, targetingOf, type StartDeps } from './starts.js';
import { ACTIONS, EDITABLE, notAllowed, patchMove, type CampaignAction } from './states.js';
import * as store from './store.js';
import { orNull } from './templates.js';

/** /campaigns: create, read, change, delete, and the send/pause/resume moves of the state machine (states.ts). */

export interface CampaignDeps extends StartDeps {
  /** The audience service's segments: a campaign's segmentId must name one of the workspace's. */
  segments: PromiseClient<SegmentServiceClient>;
  logger: Logger;
}

/** A schedule this far in the past is refused as a mistake rather than started at once. */
const PAST_SCHEDULE_TOLERANCE_MS = 60_000;

const iso = (date: Date | null): string => date?.toISOString() ?? '';

function toCampaign(row: store.CampaignRow): Campaign {
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    title: row.title,
    body: row.body,
    iconUrl: row.icon_url ?? '',
    imageUrl: row.image_url ?? '',
    actionUrl: row.url ?? '',
    scheduledAt: iso(row.scheduled_at),
    throttlePerMinute: String(row.throttle_per_minute ?? 0),
    templateId: row.template_id ?? '',
    segmentId: targetingOf(row).segmentId,
    // Counted at start; subscribers who join during the fan-out are sent to and counted too.
    totalTargeted: String(Math.max(Number(row.targeted), Number(row.queued))),
    totalSent: row.delivered,
    totalDelivered: row.impressions,
    totalClicked: row.clicks,
    totalFailed: String(Number(row.failed) + Number(row.expired)),
    totalQueued: row.queued,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    startedAt: iso(row.started_at),
    completedAt: iso(row.completed_at),
    startError: row.start_error ?? '',
  };
}

/** `part` of `whole` in percent, two decimals; 0 when `whole` is 0. */
function percent(part: number, whole: number): number {
  return whole === 0 ? 0 : Math.round((part / whole) * 10_000) / 100;
}

/** Seconds in each bucket size of stats/series. */
const BUCKET_SECONDS: Record<string, number> = { minute: 60, hour: 3_600, day: 86_400 };
/** The most buckets one stats/series answer holds (a day of minutes). */
export const MAX_SERIES_BUCKETS = 1_440;

/** The window of a stats/series request: bucket starts from `first` to `last`, or the problems with it. */
function seriesWindow(row: store.CampaignRow, request: GetCampaignStatsSeriesRequest, now: Date) {
  const problems: FieldProblem[] = [];
  const seconds = BUCKET_SECONDS[request.bucket];
  if (seconds === undefined) problems.push({ field: 'bucket', in: 'querystring', problem: 'must be minute, hour or day' });
  const parse = (field: 'from' | 'to'): Date | undefined => {
    if (request[field] === '') return undefined;
    const at = new Date(request[field]);
    if (Number.isNaN(at.getTime())) problems.push({ field, in: 'querystring', problem: 'must be an ISO 8601 date-time' });
    return at;
  };
  const givenFrom = parse('from');
  const to = parse('to') ?? now;
  if (problems.length > 0 || seconds === undefined) throw invalidFields('querystring', problems);
  const size = seconds * 1_000;
  const floor = (at: Date) => new Date(Math.floor(at.getTime() / size) * size);
  const from = floor(givenFrom ?? new Date(Math.max(row.created_at.getTime(), to.getTime() - MAX_SERIES_BUCKETS * size)));
  const count = Math.ceil((to.getTime() - from.getTime()) / size);
  if (count < 1) throw invalidFields('querystring', [{ field: 'to', in: 'querystring', problem: 'must be after from' }]);
  if (count > MAX_SERIES_BUCKETS) {
    throw invalidFields('querystring', [{ field: 'from', in: 'querystring', problem: `is ${count} ${request.bucket}s before to; at most ${MAX_SERIES_BUCKETS} buckets are answered` }]);
  }
  return { seconds, from, to, last: new Date(from.getTime() + (count - 1) * size) };
}

export function campaignStats(row: store.CampaignRow): GetCampaignStatsResponse {
  const sent = Number(row.delivered);
  const delivered = Number(row.impressions);
  const clicked = Number(row.clicks);
  return {
    totalSent: String(sent),
    totalDelivered: String(delivered),
    totalClicked: String(clicked),
    totalFailed: String(Number(row.failed) + Number(row.expired)),
    deliveryRate: percent(delivered, sent),
    clickRate: percent(clicked, delivered),
  };
}

const notFound = (id: string): HeraldError => new HeraldError('not_found', `No campaign ${id}.`, { title: 'Not found' });

/** A schedule: RFC 3339, not in the past. */
function parseSchedule(value: string, problems: FieldProblem[]): Date | null {
  if (value === '') return null;
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) problems.push({ field: 'scheduledAt', in: 'body', problem: 'must be an ISO 8601 date-time' });
  else if (at.getTime() < Date.now() - PAST_SCHEDULE_TOLERANCE_MS) problems.push({ field: 'scheduledAt', in: 'body', problem: 'is in the past' });
  return at;
}

export function campaignManagement(deps: CampaignDeps) {
  const { pool, segments, logger } = deps;

  /** `segmentId` as given when empty or a segment of the workspace; else a problem naming it. */
  const checkSegment = async (workspaceId: string, segmentId: string, problems: FieldProblem[]): Promise<string> => {
    if (segmentId === '') return '';
    try {
      await segments.getSegment({ workspaceId, segmentId });
    } catch (err) {
      if (!(err instanceof HeraldError && err.code === 'not_found')) throw err;
      problems.push({ field: 'segmentId', in: 'body', problem: 'names no segment of this workspace' });
    }
    return segmentId;
  };

  const load = async (workspaceId: string, id: string): Promise<store.CampaignRow> => {
    const row = await store.findCampaign(pool, workspaceId, id);
    if (!row) throw notFound(id);
    return row;
  };

  /** A compare-and-set that changed nothing: someone else moved or deleted the campaign first. */
  const lostRace = async (workspaceId: string, id: string, what: string, from: readonly store.CampaignStatus[]): Promise<never> => {
    const now = await load(workspaceId, id);
    throw notAllowed(id, now.status, what, from);
  };

  async function act(workspaceId: string, id: string, action: CampaignAction): Promise<store.CampaignRow> {
    const { from, to } = ACTIONS[action];
    const row = await load(workspaceId, id);
    if (!from.includes(row.status)) throw notAllowed(id, row.status, action, from);
    let moved: store.CampaignRow | undefined;
    if (action === 'send') moved = await startCampaign(deps, row);
    // A resumed fan-out goes on from its cursor through the timer loop (at once, or at the
    // throttled step it was waiting for).
    else if (action === 'resume') moved = await store.updateCampaign(pool, workspaceId, id, from, { status: to }, ['due_at = coalesce(due_at, clock_timestamp())']);
    else moved = await store.updateCampaign(pool, workspaceId, id, from, { status: to });
    if (!moved) return lostRace(workspaceId, id, action, from);
    if (action === 'resume') await store.wakeTimers(pool);
    logger.info({ workspaceId, campaignId: id, action, status: moved.status }, 'campaign moved');
    return moved;
  }

  return {
    async listCampaigns({ workspaceId, limit, cursor }: ListCampaignsRequest) {
      const request = pageRequest(limit, cursor);
      const { rows, nextCursor } = request.page(await store.listCampaigns(pool, workspaceId, request.after, request.fetch));
      return { campaigns: rows.map(toCampaign), nextCursor };
    },

    async createCampaign(request: CreateCampaignRequest) {
      const given = request.content;
      const problems: FieldProblem[] = [];
      let template: store.TemplateRow | undefined;
      if (request.templateId) {
        template = await store.findTemplate(pool, request.workspaceId, request.templateId);
        if (!template) throw invalidFields('body', [{ field: 'templateId', in: 'body', problem: 'names no template of this workspace' }]);
      } else {
        if (!given?.title) problems.push({ field: 'title', in: 'body', problem: 'is required without a templateId' });
        if (!given?.body) problems.push({ field: 'body', in: 'body', problem: 'is required without a templateId' });
      }
      // The content is copied now: later template edits do not change the campaign.
      const pick = (own: string | undefined, fromTemplate: string | null | undefined): string => own || fromTemplate || '';
      const fill = (text: string, field: string): string => fillPlaceholders(text, request.variables, field, problems);
      const title = fill(pick(given?.title, template?.title), 'title');
      const body = fill(pick(given?.body, template?.body), 'body');
      const actionUrl = fill(pick(given?.actionUrl, template?.action_url), 'actionUrl');
      const scheduledAt = parseSchedule(request.scheduledAt, problems);
      const segmentId = await checkSegment(request.workspaceId, request.segmentId, problems);
      if (actionUrl && !/^https?:\/\/\S+$/.test(actionUrl)) problems.push({ field: 'actionUrl', in: 'body', problem: 'must be an http(s) URL once its placeholders are filled' });
      if (problems.length > 0) throw invalidFields('body', problems);
      const id = `cmp_${randomId(24)}`;
      const campaign: store.NewCampaign = {
        id,
        workspaceId: request.workspaceId,
        siteId: request.siteId,
        name: request.name,
        title,
        body,
        actionUrl: orNull(actionUrl),
        iconUrl: orNull(pick(given?.iconUrl, template?.icon_url)),
        imageUrl: orNull(pick(given?.imageUrl, template?.image_url)),
        templateId: template?.id ?? null,
        scheduledAt,
        throttlePerMinute: Number(request.throttlePerMinute) || null,
        targeting: Targeting.fromPartial({ segmentId }),
      };
      assertFits(id, { title, body, url: actionUrl, iconUrl: campaign.iconUrl ?? '', imageUrl: campaign.imageUrl ?? '', actions: [], answerUrl: '' });
      const row = await store.insertCampaign(pool, campaign);
      if (scheduledAt) await store.wakeTimers(pool);
      logger.info({ workspaceId: row.workspace_id, campaignId: id, status: row.status }, 'campaign created');
      return { campaign: toCampaign(row) };
    },

    async getCampaign({ workspaceId, campaignId }: GetCampaignRequest) {
      return { campaign: toCampaign(await load(workspaceId, campaignId)) };
    },

    async updateCampaign(request: UpdateCampaignRequest) {
      const { workspaceId, campaignId: id } = request;
      const row = await load(workspaceId, id);
      const problems: FieldProblem[] = [];
      const segmentId = request.segmentId === undefined ? undefined : await checkSegment(workspaceId, request.segmentId, problems);
      const changes: store.CampaignChanges = {
        ...(request.name !== undefined ? { name: request.name } : {}),
        ...(request.title !== undefined ? { title: request.title } : {}),
        ...(request.body !== undefined ? { body: request.body } : {}),
        ...(request.actionUrl !== undefined ? { url: orNull(request.actionUrl) } : {}),
        ...(request.iconUrl !== undefined ? { icon_url: orNull(request.iconUrl) } : {}),
        ...(request.imageUrl !== undefined ? { image_url: orNull(request.imageUrl) } : {}),
        ...(request.scheduledAt !== undefined ? { scheduled_at: parseSchedule(request.scheduledAt, problems) } : {}),
        ...(request.throttlePerMinute !== undefined ? { throttle_per_minute: Number(request.throttlePerMinute) || null } : {}),
        ...(segmentId !== undefined ? { targeting: { ...targetingOf(row), segmentId } } : {}),
      };
      if (row.status === 'completed') throw notAllowed(id, row.status, 'a change', ['not completed']);
      const edits = ['title', 'body', 'url', 'icon_url', 'image_url', 'scheduled_at', 'targeting'].filter((column) => column in changes);
      if (edits.length > 0 && !EDITABLE.includes(row.status)) {
        throw notAllowed(id, row.status, edits.length === 1 && edits[0] === 'targeting' ? 'changing its segment' : 'changing its content or schedule', EDITABLE);
      }

      // The status a schedule change implies, then the one asked for.
      let action: CampaignAction | undefined;
      if (changes.scheduled_at !== undefined) changes.status = changes.scheduled_at ? 'scheduled' : 'draft';
      if (request.status !== undefined) {
        const to = request.status as store.CampaignStatus;
        const move = patchMove(row.status, to);
        if (move === undefined) throw notAllowed(id, row.status, `status ${to}`, (Object.values(ACTIONS).find((a) => a.to === to)?.from ?? ['draft', 'scheduled']));
        if (move !== 'unchanged' && 'action' in move) action = move.action;
        else if (move !== 'unchanged' && move.schedule === 'draft') Object.assign(changes, { status: 'draft', scheduled_at: null });
        else if (move !== 'unchanged') {
          const at = changes.scheduled_at ?? row.scheduled_at;
          if (!at) problems.push({ field: 'scheduledAt', in: 'body', problem: 'is required to schedule the campaign' });
          Object.assign(changes, { status: 'scheduled', scheduled_at: at });
        }
      }
      if (problems.length > 0) throw invalidFields('body', problems);
      const next = { ...row, ...changes };
      assertFits(id, { ...contentOf(next) });

      let updated = row;
      if (Object.keys(changes).length > 0) {
        updated = (await store.updateCampaign(pool, workspaceId, id, [row.status], changes)) ?? (await lostRace(workspaceId, id, 'this change', [row.status]));
        if (changes.scheduled_at) await store.wakeTimers(pool);
      }
      if (action) updated = await act(workspaceId, id, action);
      return { campaign: toCampaign(updated) };
    },

    async deleteCampaign({ workspaceId, campaignId }: DeleteCampaignRequest) {
      if (!(await store.markDeleted(pool, workspaceId, campaignId))) throw notFound(campaignId);
      logger.info({ workspaceId, campaignId }, 'campaign deleted');
      return {};
    },

    async sendCampaign({ workspaceId, campaignId }: SendCampaignRequest) {
      return { campaign: toCampaign(await act(workspaceId, campaignId, 'send')) };
    },

    async pauseCampaign({ workspaceId, campaignId }: PauseCampaignRequest) {
      return { campaign: toCampaign(await act(workspaceId, campaignId, 'pause')) };
    },

    async resumeCampaign({ workspaceId, campaignId }: ResumeCampaignRequest) {
      return { campaign: toCampaign(await act(workspaceId, campaignId, 'resume')) };
    },

    async getCampaignStats({ workspaceId, campaignId }: GetCampaignStatsRequest) {
      return campaignStats(await load(workspaceId, campaignId));
    },

    async getCampaignStatsSeries(request: GetCampaignStatsSeriesRequest): Promise<GetCampaignStatsSeriesResponse> {
      const row = await load(request.workspaceId, request.campaignId);
      const { seconds, from, to, last } = seriesWindow(row, request, new Date());
      const rows = await store.statsSeries(pool, request.workspaceId, request.campaignId, from, last, seconds);
      return {
        bucket: request.bucket,
        from: from.toISOString(),
        to: to.toISOString(),
        buckets: rows.map((bucket) => ({ at: bucket.at.toISOString(), sent: bucket.sent, delivered: bucket.delivered, clicked: bucket.clicked, dismissed: bucket.dismissed })),
      };
    },
  };
}
