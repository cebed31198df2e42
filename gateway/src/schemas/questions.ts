import { Type } from '@sinclair/typebox';

import { Nullable } from './common.js';

/** The records of /ask and /decisions (also shown by the answer page's API). */

const Approver = Type.Object({ kind: Type.String(), id: Type.String() });

/** Who answered: on both records and in the answer webhooks. */
export const AnsweredBy = Nullable(
  Type.Object(
    {
      kind: Type.String({ description: 'slack | email | subscriber | key | member | link (the holder of a link that names nobody)' }),
      id: Type.String({ description: 'A stable id: the Slack user id, the email address, the externalId, the key id, the member id' }),
      displayName: Type.String(),
      channel: Type.String({ description: 'slack | email | web_push | answer_page | api | console' }),
      at: Type.String({ description: 'When (ISO 8601)' }),
    },
    { description: 'Who answered; null until answered' },
  ),
);

/** Who may answer, who did, and the escalation steps: on both records. */
const People = {
  approvers: Type.Array(Approver, { description: 'Who may answer; empty: the holder of an answer link (and the key that opened it)' }),
  answeredBy: AnsweredBy,
  escalation: Type.Array(Type.Object({ afterSeconds: Type.Integer(), channels: Type.Array(Type.String()), approvers: Type.Array(Approver) })),
};

export const AskRecord = Type.Object({
  correlationId: Type.String(),
  question: Type.String(),
  type: Type.String({ description: 'confirm | select | input' }),
  status: Type.Union([Type.Literal('pending'), Type.Literal('answered'), Type.Literal('timeout'), Type.Literal('withdrawn')]),
  answered: Type.Boolean(),
  value: Type.Optional(Type.String({ description: 'The answer (confirm: yes | no); present when answered' })),
  options: Type.Array(Type.String(), { description: 'The choices (select only)' }),
  context: Nullable(Type.String()),
  placeholder: Nullable(Type.String()),
  agentName: Nullable(Type.String()),
  liveUrl: Type.String({ description: 'The answer page' }),
  pollUrl: Type.String(),
  expiresInSeconds: Type.Integer({ description: 'Seconds the question stays open (600 when asked)' }),
  expiresAt: Type.String(),
  createdAt: Type.String(),
  mode: Type.String({ description: 'The workspace approval mode: browser | terminal' }),
  hint: Type.Optional(Type.String({ description: 'Present on timeout' })),
  ...People,
});

export const ReachabilityCounts = Type.Object({ reachable: Type.Boolean(), browserSubscriptions: Type.Integer(), nativeAppDevices: Type.Integer() });

export const DecisionRecord = Type.Object({
  decisionId: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('answered'), Type.Literal('expired'), Type.Literal('cancelled')]),
  approved: Type.Boolean({ description: 'True only for a yes to a confirm decision' }),
  answer: Nullable(Type.String()),
  question: Type.String(),
  type: Type.String(),
  options: Type.Array(Type.String()),
  context: Nullable(Type.String()),
  placeholder: Nullable(Type.String()),
  agentName: Nullable(Type.String()),
  audience: Type.String({ description: 'user | owner | team' }),
  externalId: Nullable(Type.String()),
  toolName: Nullable(Type.String()),
  toolTarget: Nullable(Type.String()),
  parameters: Nullable(Type.Record(Type.String(), Type.Union([Type.String(), Type.Number(), Type.Boolean(), Type.Null()]))),
  mode: Type.String(),
  pollUrl: Type.String(),
  decisionPageUrl: Type.String(),
  expiresInSeconds: Type.Integer(),
  expiresAt: Type.String(),
  createdAt: Type.String(),
  answeredAt: Nullable(Type.String()),
  cancelledAt: Nullable(Type.String()),
  reachability: ReachabilityCounts,
  idempotencyKey: Nullable(Type.String()),
  ...People,
  duplicate: Type.Boolean({ description: 'True when an idempotent replay returned the first decision' }),
});


/** An entry of a question's record (GET /decisions/{id}/events, GET /ask/{id}/events). */
export const QuestionEventRecord = Type.Object({
  seq: Type.Integer({ minimum: 1, description: '1, 2, ... per question' }),
  kind: Type.Union(
    ['opened', 'delivered', 'viewed', 'answered', 'refused', 'escalated', 'cancelled', 'expired'].map((kind) => Type.Literal(kind)),
    { description: 'What happened' },
  ),
  at: Type.String({ description: 'When it was written (ISO 8601, milliseconds; as hashed)' }),
  actor: Nullable(Type.Record(Type.String(), Type.String(), { description: 'Who acted (answered, refused, viewed): kind, id, displayName, channel; null for what Herald did' })),
  detail: Type.Record(Type.String(), Type.Unknown(), { description: 'What happened (delivered: channel, target, result; escalated: the step and the deliveries it added)' }),
  prevHash: Type.String({ description: "The previous entry's hash (empty for the first)" }),
  hash: Type.String({ description: "Hex SHA-256 of prevHash and the entry's canonical JSON" }),
});
