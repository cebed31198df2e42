import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Flow, Run, StepInput } from '@herald/proto/herald/flow/v1/flow';
import { Type, type Static } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { ErrorResponse, Nullable, orNull, PageOf, PageQuery, withErrors } from '../schemas/common.js';
import { Name } from '../schemas/content.js';

/** /flows: event-triggered automations and their runs (dashboard keys). docs/flows.md has the states and the rules of runs. */

/** One of `values`: a plain string enum, so a wrong value is named as one (a union of literals would say "anyOf"). */
const oneOf = <T extends string>(values: readonly T[], description: string) => Type.Unsafe<T>({ type: 'string', enum: [...values], description });

const TriggerType = oneOf(
  ['subscription', 'unsubscription', 'notification_click', 'notification_impression', 'notification_dismiss'] as const,
  'What starts a run for a subscriber: subscribing, unsubscribing, or an impression, click or dismiss of a push',
);
const Status = oneOf(['draft', 'active', 'paused', 'archived'] as const, 'Only an active flow starts runs');
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
const Steps = Type.Array(StepInputSchema, { maxItems: 50, description: 'In order; at most 50' });

const StepRecord = Type.Object({
  id: Type.String(),
  flowId: Type.String(),
  stepOrder: Type.Integer({ description: 'Zero-based position' }),
  stepType: Type.String({ description: 'send_notification | delay | exit' }),
  config: StepConfig,
});

const FlowRecord = Type.Object({
  id: Type.String(),
  siteId: Type.String(),
  name: Type.String(),
  description: Type.String(),
  triggerType: TriggerType,
  triggerCampaignId: Nullable(Type.String()),
  status: Status,
  executionCount: Type.Integer({ description: 'Runs started, ever' }),
  steps: Type.Array(StepRecord),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});

const RunRecord = Type.Object({
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
    steps: Type.Optional(Steps),
  },
  { additionalProperties: false },
);

const PatchBody = Type.Object(
  {
    name: Type.Optional(Name),
    description: Type.Optional(Type.String({ maxLength: 1_000 })),
    triggerType: Type.Optional(TriggerType),
    triggerCampaignId: Type.Optional(Nullable(TriggerCampaignId)),
    status: Type.Optional(Status),
    steps: Type.Optional({ ...Steps, description: 'Replaces the whole step list; runs in flight keep the steps they started with' }),
  },
  { additionalProperties: false, minProperties: 1 },
);

const Params = Type.Object({ flowId: Type.String({ minLength: 1, maxLength: 64 }) });

function toRecord(flow: Flow | undefined) {
  if (!flow) throw new Error('flow service returned no flow');
  return {
    id: flow.id,
    siteId: flow.siteId,
    name: flow.name,
    description: flow.description,
    triggerType: flow.triggerType as Static<typeof TriggerType>,
    triggerCampaignId: orNull(flow.triggerCampaignId),
    status: flow.status as Static<typeof Status>,
    executionCount: Number(flow.executionCount),
    steps: flow.steps.map((step) => ({
      id: step.id,
      flowId: step.flowId,
      stepOrder: step.stepOrder,
      stepType: step.stepType,
      config: JSON.parse(step.configJson) as Record<string, unknown>,
    })),
    createdAt: flow.createdAt,
    updatedAt: flow.updatedAt,
  };
}

function toRunRecord(run: Run) {
  return {
    id: run.id,
    flowId: run.flowId,
    subscriberId: run.subscriberId,
    triggerType: run.triggerType as Static<typeof TriggerType>,
    triggerEventId: run.triggerEventId,
    state: run.state as Static<typeof RunRecord>['state'],
    currentStep: run.currentStep < 0 ? null : run.currentStep,
    nextWakeUpAt: orNull(run.nextWakeUpAt),
    endReason: orNull(run.endReason),
    notificationIds: run.notificationIds,
    createdAt: run.createdAt,
    updatedAt: run.updatedAt,
    finishedAt: orNull(run.finishedAt),
  };
}

const stepInputs = (steps: Static<typeof Steps>): StepInput[] => steps.map((step) => ({ stepType: step.stepType, configJson: JSON.stringify(step.config) }));

export const flowRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    const config = { access: { scope: 'flows' as const } };
    const tags = ['Flows'];
    const ref = (request: { params: { flowId: string } } & Parameters<typeof principalOf>[0]) => ({
      workspaceId: principalOf(request).workspaceId,
      flowId: request.params.flowId,
    });

    app.get(
      '/flows',
      {
        config,
        schema: {
          tags,
          operationId: 'listFlows',
          summary: 'List flows with their steps, newest first',
          querystring: Type.Object({ ...PageQuery, status: Type.Optional(Status) }, { additionalProperties: false }),
          response: withErrors({ 200: PageOf(FlowRecord) }),
        },
      },
      async (request) => {
        const { flows, nextCursor } = await clients.flow.listFlows({
          workspaceId: principalOf(request).workspaceId,
          limit: request.query.limit,
          cursor: request.query.cursor ?? '',
          status: request.query.status ?? '',
        });
        return { data: flows.map(toRecord), hasMore: nextCursor !== '', nextCursor: orNull(nextCursor) };
      },
    );

    app.post(
      '/flows',
      { config, schema: { tags, operationId: 'createFlow', summary: 'Create a flow (in draft: it starts no runs until activated)', body: CreateFlowBody, response: withErrors({ 201: FlowRecord }) } },
      async (request, reply) => {
        const principal = principalOf(request);
        const body = request.body;
        const { flow } = await clients.flow.createFlow({
          workspaceId: principal.workspaceId,
          siteId: principal.siteId,
          name: body.name,
          description: body.description ?? '',
          triggerType: body.triggerType,
          triggerCampaignId: body.triggerCampaignId ?? '',
          steps: stepInputs(body.steps ?? []),
        });
        return reply.code(201).send(toRecord(flow));
      },
    );

    app.get(
      '/flows/:flowId',
      { config, schema: { tags, operationId: 'getFlow', summary: 'Read a flow: trigger, status, executionCount, steps in order', params: Params, response: withErrors({ 200: FlowRecord }) } },
      async (request) => toRecord((await clients.flow.getFlow(ref(request))).flow),
    );

    app.patch(
      '/flows/:flowId',
      {
        config,
        schema: {
          tags,
          operationId: 'updateFlow',
          summary: 'Change a flow: only the fields given; steps replaces the whole list; status moves it (to active only with steps)',
          params: Params,
          body: PatchBody,
          response: withErrors({ 200: FlowRecord, 409: ErrorResponse }),
        },
      },
      async (request) => {
        const body = request.body;
        const { flow } = await clients.flow.updateFlow({
          ...ref(request),
          ...(body.name !== undefined ? { name: body.name } : {}),
          ...(body.description !== undefined ? { description: body.description } : {}),
          ...(body.triggerType !== undefined ? { triggerType: body.triggerType } : {}),
          // null clears it: the service takes an empty string for that.
          ...(body.triggerCampaignId !== undefined ? { triggerCampaignId: body.triggerCampaignId ?? '' } : {}),
          ...(body.status !== undefined ? { status: body.status } : {}),
          setSteps: body.steps !== undefined,
          steps: stepInputs(body.steps ?? []),
        });
        return toRecord(flow);
      },
    );

    app.delete(
      '/flows/:flowId',
      {
        config,
        schema: {
          tags,
          operationId: 'deleteFlow',
          summary: 'Delete a flow and its steps: its runs in flight stop at their next step',
          params: Params,
          response: withErrors({ 204: Type.Null({ description: 'No content' }) }),
        },
      },
      async (request, reply) => {
        await clients.flow.deleteFlow(ref(request));
        return reply.code(204).send(null);
      },
    );

    const moves = [
      ['activate', 'activateFlow', 'Activate a draft, paused or archived flow with at least one step (409 otherwise): its trigger starts runs'],
      ['pause', 'pauseFlow', 'Pause an active flow: no new runs; runs in flight finish'],
    ] as const;
    for (const [action, operationId, summary] of moves) {
      app.post(
        `/flows/:flowId/${action}`,
        { config, schema: { tags, operationId, summary, params: Params, response: withErrors({ 200: FlowRecord, 409: ErrorResponse }) } },
        async (request) => toRecord((await clients.flow[operationId](ref(request))).flow),
      );
    }

    app.get(
      '/flows/:flowId/runs',
      {
        config,
        schema: {
          tags,
          operationId: 'listFlowRuns',
          summary: "A flow's runs, newest first: subscriber, state, current step, next wake-up (for debugging)",
          params: Params,
          querystring: Type.Object(PageQuery, { additionalProperties: false }),
          response: withErrors({ 200: PageOf(RunRecord) }),
        },
      },
      async (request) => {
        const { runs, nextCursor } = await clients.flow.listRuns({ ...ref(request), limit: request.query.limit, cursor: request.query.cursor ?? '' });
        return { data: runs.map(toRunRecord), hasMore: nextCursor !== '', nextCursor: orNull(nextCursor) };
      },
    );
  };
