import { Type, type Static } from '@sinclair/typebox';

import { Nullable } from './common.js';
import { Name } from './content.js';

/** The requests and records of /flows (the create_flow MCP tool takes CreateFlowBody's fields too). */

/** One of `values`: a plain string enum, so a wrong value is named as one (a union of literals would say "anyOf"). */
const oneOf = <T extends string>(values: readonly T[], description: string) => Type.Unsafe<T>({ type: 'string', enum: [...values], description });

export const TriggerType = oneOf(
  ['subscription', 'unsubscription', 'notification_click', 'notification_impression', 'notification_dismiss'] as const,
  'What starts a run for a subscriber: subscribing, unsubscribing, or an impression, click or dismiss of a push',
);
export const FlowStatus = oneOf(['draft', 'active', 'paused', 'archived'] as const, 'Only an active flow starts runs');
const TriggerCampaignId = Type.String({ minLength: 1, maxLength: 64, description: 'Notification triggers only: only events about this campaign start runs' });

const STEP_CONFIGS =
  'send_notification: {"notification": {"title", "body", "iconUrl"?, "imageUrl"?, "actionUrl"?}} (title up to 256 characters, body up to 2048, URLs http(s)), ' +
  'or {"templateId", "variables"?} (the notification is copied from the template when the flow is saved, its placeholders filled from variables); ' +
  'delay: {"delay": {"value": > 0, "unit": "seconds" | "minutes" | "hours" | "days"}} (at most 365 days); exit: {}. ' +
  'A bad config is a 400 naming steps[i].config...';
const StepConfig = Type.Record(Type.String(), Type.Unknown(), { description: STEP_CONFIGS });

const StepInputSchema = Type.Object(
  {
    stepType: Type.String({ minLength: 1, maxLength: 64, description: 'send_notification | delay | exit' }),
    config: StepConfig,
  },
  { additionalProperties: false },
);
/** A flow's steps, in order. */
const steps = (description: string) => Type.Array(StepInputSchema, { maxItems: 50, description });
export type Steps = Static<ReturnType<typeof steps>>;

const StepRecord = Type.Object({
  id: Type.String(),
  flowId: Type.String(),
  stepOrder: Type.Integer({ description: 'Zero-based position' }),
  stepType: Type.String({ description: 'send_notification | delay | exit' }),
  config: StepConfig,
});

export const FlowRecord = Type.Object({
  id: Type.String(),
  siteId: Type.String(),
  name: Type.String(),
  description: Type.String(),
  triggerType: TriggerType,
  triggerCampaignId: Nullable(Type.String()),
  status: FlowStatus,
  executionCount: Type.Integer({ description: 'Runs started, ever' }),
  steps: Type.Array(StepRecord),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});

export const RunRecord = Type.Object({
  id: Type.String(),
  flowId: Type.String(),
  subscriberId: Type.String(),
  triggerType: TriggerType,
  triggerEventId: Type.String({ description: 'The event that started it (one run per flow, subscriber and event)' }),
  state: oneOf(
    ['running', 'waiting', 'completed', 'exited', 'cancelled', 'failed'] as const,
    'running: a step is due now; waiting: parked on a delay; completed: past the last step; exited: an exit step; cancelled: the subscriber left; failed: a send was refused for good',
  ),
  currentStep: Nullable(Type.Integer({ description: 'The stepOrder it runs next; null once it ended' })),
  nextWakeUpAt: Nullable(Type.String({ description: 'When it is worked next; null once it ended' })),
  endReason: Nullable(Type.String()),
  notificationIds: Type.Array(Type.String(), { description: 'What its send steps queued (GET /notifications/{id} shows each delivery state)' }),
  createdAt: Type.String(),
  updatedAt: Type.String(),
  finishedAt: Nullable(Type.String()),
});

export const CreateFlowBody = Type.Object(
  {
    name: Name,
    description: Type.Optional(Type.String({ maxLength: 1_000 })),
    triggerType: TriggerType,
    triggerCampaignId: Type.Optional(Nullable(TriggerCampaignId)),
    steps: Type.Optional(steps('In order; at most 50')),
  },
  { additionalProperties: false },
);

export const PatchFlowBody = Type.Object(
  {
    name: Type.Optional(Name),
    description: Type.Optional(Type.String({ maxLength: 1_000 })),
    triggerType: Type.Optional(TriggerType),
    triggerCampaignId: Type.Optional(Nullable(TriggerCampaignId)),
    status: Type.Optional(FlowStatus),
    steps: Type.Optional(steps('Replaces the whole step list; runs in flight keep the steps they started with')),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const FlowParams = Type.Object({ flowId: Type.String({ minLength: 1, maxLength: 64 }) });
