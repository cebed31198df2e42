import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Flow, Run, StepInput } from '@herald/proto/herald/flow/v1/flow';
import { Type, type Static } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { ErrorResponse, orNull, PageOf, PageQuery, withErrors } from '../schemas/common.js';
import { CreateFlowBody, FlowParams, FlowRecord, FlowStatus, PatchFlowBody, RunRecord, type Steps, TriggerType } from '../schemas/flows.js';

/** /flows: event-triggered automations and their runs (dashboard keys). docs/flows.md has the states and the rules of runs. */

function toRecord(flow: Flow | undefined) {
  if (!flow) throw new Error('flow service returned no flow');
  return {
    id: flow.id,
    siteId: flow.siteId,
    name: flow.name,
    description: flow.description,
    triggerType: flow.triggerType as Static<typeof TriggerType>,
    triggerCampaignId: orNull(flow.triggerCampaignId),
    status: flow.status as Static<typeof FlowStatus>,
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

const stepInputs = (steps: Steps): StepInput[] => steps.map((step) => ({ stepType: step.stepType, configJson: JSON.stringify(step.config) }));

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
          querystring: Type.Object({ ...PageQuery, status: Type.Optional(FlowStatus) }, { additionalProperties: false }),
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
      { config, schema: { tags, operationId: 'getFlow', summary: 'Read a flow: trigger, status, executionCount, steps in order', params: FlowParams, response: withErrors({ 200: FlowRecord }) } },
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
          params: FlowParams,
          body: PatchFlowBody,
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
          params: FlowParams,
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
        { config, schema: { tags, operationId, summary, params: FlowParams, response: withErrors({ 200: FlowRecord, 409: ErrorResponse }) } },
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
          params: FlowParams,
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
