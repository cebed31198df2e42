import { Type } from '@sinclair/typebox';

import { IdempotencyKey, Nullable, Targeting } from './common.js';
import { Body, HttpUrl, Title } from './content.js';

/** The requests and records of /send and /notifications (the send_notification MCP tool takes SendBody's bounds). */

export const SendBody = Type.Object(
  {
    title: Title,
    body: Body,
    url: Type.Optional(HttpUrl('Opened when the notification is clicked')),
    iconUrl: Type.Optional(HttpUrl('Small icon')),
    imageUrl: Type.Optional(HttpUrl('Large image')),
    ...Targeting,
    idempotencyKey: Type.Optional(IdempotencyKey),
  },
  { additionalProperties: false },
);

export const SendResult = Type.Object({
  success: Type.Boolean(),
  status: Type.Literal('queued'),
  campaignId: Type.String(),
  sent: Type.Integer(),
  limits: Type.Object({ remaining: Type.Integer(), limit: Type.Integer() }),
  duplicate: Type.Boolean(),
});

export const NotificationRecord = Type.Object({
  id: Type.String(),
  status: Type.String({ description: 'queued | sending | completed' }),
  title: Type.String(),
  body: Type.String(),
  url: Nullable(Type.String()),
  iconUrl: Nullable(Type.String()),
  imageUrl: Nullable(Type.String()),
  createdAt: Type.String(),
  completedAt: Nullable(Type.String()),
  counts: Type.Object({
    targeted: Type.Integer(),
    queued: Type.Integer(),
    delivered: Type.Integer(),
    failed: Type.Integer(),
    expired: Type.Integer(),
    pending: Type.Integer(),
  }),
  lastDelivery: Nullable(Type.Object({ statusCode: Type.Integer(), outcome: Type.String(), reportedAt: Type.String() })),
});

export const RecipientRecord = Type.Object({
  subscriberId: Type.String(),
  status: Type.String({ description: 'sending | retrying | delivered | failed | expired' }),
  attempts: Type.Integer(),
  lastStatusCode: Nullable(Type.Integer()),
  updatedAt: Type.String(),
});
