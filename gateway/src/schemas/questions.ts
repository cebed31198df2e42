import { APPROVER_KINDS, DELIVERY_CHANNELS, MAX_APPROVER_ID_LENGTH, MAX_APPROVERS, MAX_ESCALATION_STEPS } from '@herald/domain';
import { Type } from '@sinclair/typebox';

import { Nullable } from './common.js';

/** The question fields /ask and /decisions take (and the ask_user MCP tool), and the records they answer with (also shown by the answer page's API). */

/** The longest a request is held open for an answer (the spec's 55 s). */
export const MAX_WAIT_SECONDS = 55;

export const QuestionType = Type.Union([Type.Literal('confirm'), Type.Literal('select'), Type.Literal('input')]);

const ApproverInput = Type.Object(
  {
    kind: Type.Union(
      APPROVER_KINDS.map((kind) => Type.Literal(kind)),
      { description: 'slack (a Slack user id) | email (an address) | subscriber (an externalId) | key (an API key id) | member (a console member id)' },
    ),
    id: Type.String({ minLength: 1, maxLength: MAX_APPROVER_ID_LENGTH }),
  },
  { additionalProperties: false },
);

const Approvers = Type.Array(ApproverInput, {
  maxItems: MAX_APPROVERS,
  description: 'Who may answer. When named, an answer from anyone else is refused (403); each is delivered the question on their channel.',
});

const EscalationSchema = Type.Array(
  Type.Object(
    {
      afterSeconds: Type.Integer({ minimum: 1, maximum: 86_400, description: 'Seconds after the question opened' }),
      channels: Type.Optional(Type.Array(Type.Union(DELIVERY_CHANNELS.map((channel) => Type.Literal(channel))), { maxItems: DELIVERY_CHANNELS.length, uniqueItems: true })),
      approvers: Type.Optional(Approvers),
    },
    { additionalProperties: false },
  ),
  { maxItems: MAX_ESCALATION_STEPS, description: 'While the question stays unanswered, deliver it at each step to more channels and approvers (never extends its lifetime)' },
);

export const QuestionFields = {
  approvers: Type.Optional(Approvers),
  escalation: Type.Optional(EscalationSchema),
  question: Type.String({ minLength: 1, maxLength: 500, description: 'What the person is asked' }),
  type: Type.Optional(QuestionType),
  options: Type.Optional(
    Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { minItems: 2, maxItems: 20, uniqueItems: true, description: 'The choices (select only)' }),
  ),
  context: Type.Optional(Type.String({ maxLength: 2_000, description: 'Background shown with the question' })),
  placeholder: Type.Optional(Type.String({ maxLength: 200, description: 'Hint inside the text field (input)' })),
  agentName: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Who is asking, shown to the person' })),
  callbackUrl: Type.Optional(Type.String({ minLength: 1, maxLength: 2_048, description: 'HTTPS URL that receives the answer (a public address)' })),
  timeoutSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_WAIT_SECONDS, default: 30, description: 'How long this call waits' })),
};

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
