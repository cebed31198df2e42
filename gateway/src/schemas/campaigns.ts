import { CONTENT_LIMITS, VARIABLE_NAME_PATTERN } from '@herald/domain';
import { Type } from '@sinclair/typebox';

import { Nullable } from './common.js';
import { ActionUrl, Body, BodyAs, HttpUrl, Name, PLACEHOLDERS, Title, TitleAs } from './content.js';

/** The requests and records of /campaigns (the create_campaign MCP tool takes CreateCampaignBody's fields too). */

const Status = Type.Union(
  ['draft', 'scheduled', 'sending', 'active', 'paused', 'completed'].map((status) => Type.Literal(status)),
  { description: 'draft | scheduled | sending | active (resumed) | paused | completed' },
);
const ThrottlePerMinute = Type.Integer({ minimum: 1, maximum: 10_000_000, description: 'At most this many recipients queued per minute' });
const ScheduledAt = Type.String({ format: 'date-time', description: 'ISO 8601; the campaign starts then by itself' });
const SegmentId = Type.String({ minLength: 1, maxLength: 64, description: 'A segment of the workspace (/segments); null: every active subscriber' });

export const CampaignRecord = Type.Object({
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

export const CampaignStats = Type.Object({
  totalSent: Type.Integer(),
  totalDelivered: Type.Integer(),
  totalClicked: Type.Integer(),
  totalFailed: Type.Integer(),
  deliveryRate: Type.Number({ description: 'totalDelivered / totalSent, percent (0 when nothing was sent)' }),
  clickRate: Type.Number({ description: 'totalClicked / totalDelivered, percent (0 when nothing was delivered)' }),
});

export const SeriesQuery = Type.Object(
  {
    bucket: Type.Optional(Type.Unsafe<'minute' | 'hour' | 'day'>({ type: 'string', enum: ['minute', 'hour', 'day'], default: 'hour', description: 'The bucket size (UTC); default hour' })),
    from: Type.Optional(Type.String({ format: 'date-time', description: "Start (rounded down to its bucket); default: the campaign's creation, or as far back as 1,440 buckets reach" })),
    to: Type.Optional(Type.String({ format: 'date-time', description: 'End, exclusive; default: now' })),
  },
  { additionalProperties: false },
);

export const CampaignStatsSeries = Type.Object({
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

export const PatchCampaignBody = Type.Object(
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

export const CampaignParams = Type.Object({ campaignId: Type.String({ minLength: 1, maxLength: 64 }) });
