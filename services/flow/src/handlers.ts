import { pageRequest, withTransaction, type Pool } from '@herald/db';
import { randomId } from '@herald/domain';
import { HeraldError, invalidFields } from '@herald/errors';
import { implementService, type PromiseClient } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import type { CampaignServiceClient } from '@herald/proto/herald/campaign/v1/campaign';
import type { Template, TemplateServiceClient } from '@herald/proto/herald/campaign/v1/templates';
import { FlowServiceService, type Flow, type Run, type StepInput } from '@herald/proto/herald/flow/v1/flow';

import { fillTemplates, parseSteps, type Step } from './steps.js';
import * as store from './store.js';

/**
 * /flows: create, read, change, delete, activate and pause, and the run history. The states
 * (docs/flows.md):
 *
 *   draft | paused | archived ──activate (at least one step)──▶ active ──pause──▶ paused
 *   any ──PATCH status──▶ the status given (to active only with at least one step)
 */

export interface FlowDeps {
  pool: Pool;
  logger: Logger;
  campaign: PromiseClient<CampaignServiceClient>;
  /** Served by the campaign service. */
  templates: PromiseClient<TemplateServiceClient>;
}

const ACTIVATABLE: readonly store.FlowStatus[] = ['draft', 'paused', 'archived'];
const NOTIFICATION_TRIGGERS: readonly store.TriggerType[] = ['notification_click', 'notification_impression', 'notification_dismiss'];

const notFound = (id: string): HeraldError => new HeraldError('not_found', `No flow ${id}.`, { title: 'Not found' });

function notAllowed(row: store.FlowRow, what: string, allowedFrom: readonly string[]): HeraldError {
  return new HeraldError('conflict', `Flow ${row.id} is ${row.status}; ${what} needs it ${allowedFrom.join(' or ')}.`, {
    title: `Flow is ${row.status}`,
    hint: 'Read the flow for its current status; docs/flows lists the moves each status allows.',
    extra: { flowStatus: row.status },
  });
}

function withoutSteps(row: store.FlowRow): HeraldError {
  return new HeraldError('conflict', `Flow ${row.id} has no steps; a flow is activated with at least one step.`, {
    title: 'Flow has no steps',
    hint: 'Give the flow its steps (PATCH /flows/{flowId} with steps), then activate it.',
  });
}

const newStepId = (): string => `stp_${randomId(24)}`;

function toFlow(row: store.FlowRow): Flow {
  return {
    id: row.id,
    siteId: row.site_id,
    name: row.name,
    description: row.description,
    triggerType: row.trigger_type,
    triggerCampaignId: row.trigger_campaign_id ?? '',
    status: row.status,
    executionCount: row.execution_count,
    steps: row.steps.map((step, index) => ({ id: step.id, flowId: row.id, stepOrder: index, stepType: step.stepType, configJson: JSON.stringify(step.config) })),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

function toRun(row: store.RunRow): Run {
  const inFlight = row.state === 'running' || row.state === 'waiting';
  return {
    id: row.id,
    flowId: row.flow_id,
    subscriberId: row.subscriber_id,
    triggerType: row.trigger_type,
    triggerEventId: row.trigger_event_id,
    state: row.state,
    currentStep: inFlight ? row.step_index : -1,
    nextWakeUpAt: row.due_at?.toISOString() ?? '',
    endReason: row.end_reason ?? '',
    notificationIds: row.notification_ids,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    finishedAt: row.finished_at?.toISOString() ?? '',
  };
}

function triggerTypeOf(value: string): store.TriggerType {
  if (!(store.TRIGGER_TYPES as readonly string[]).includes(value)) {
    throw invalidFields('body', [{ field: 'triggerType', in: 'body', problem: `must be one of ${store.TRIGGER_TYPES.join(', ')}` }]);
  }
  return value as store.TriggerType;
}

function statusOf(value: string, field: string, location: string): store.FlowStatus {
  if (!(store.FLOW_STATUSES as readonly string[]).includes(value)) {
    throw invalidFields(location, [{ field, in: location, problem: `must be one of ${store.FLOW_STATUSES.join(', ')}` }]);
  }
  return value as store.FlowStatus;
}

export function flowHandlers({ pool, logger, campaign, templates }: FlowDeps) {
  /** The steps as written, checked, with the sends that name a template filled from it. */
  async function stepsOf(workspaceId: string, inputs: readonly StepInput[]): Promise<Step[]> {
    const templateOf = async (templateId: string): Promise<Template | undefined> => {
      try {
        return (await templates.getTemplate({ workspaceId, templateId })).template;
      } catch (err) {
        if (err instanceof HeraldError && err.code === 'not_found') return undefined;
        throw err;
      }
    };
    return fillTemplates(parseSteps(inputs, newStepId), templateOf);
  }

  /** A trigger campaign only limits a notification trigger, and must be one of the workspace's campaigns. */
  async function checkTriggerCampaign(workspaceId: string, triggerType: store.TriggerType, campaignId: string | null): Promise<void> {
    if (campaignId === null) return;
    if (!NOTIFICATION_TRIGGERS.includes(triggerType)) {
      throw invalidFields('body', [{ field: 'triggerCampaignId', in: 'body', problem: `is only for the triggers ${NOTIFICATION_TRIGGERS.join(', ')}` }]);
    }
    try {
      await campaign.getCampaign({ workspaceId, campaignId });
    } catch (err) {
      if (err instanceof HeraldError && err.code === 'not_found') {
        throw invalidFields('body', [{ field: 'triggerCampaignId', in: 'body', problem: 'is not a campaign of this workspace' }]);
      }
      throw err;
    }
  }

  /** Moves the flow to `to` under its row lock; activating needs steps. */
  async function move(workspaceId: string, flowId: string, to: store.FlowStatus, allowedFrom: readonly store.FlowStatus[], what: string): Promise<Flow> {
    const row = await withTransaction(pool, async (tx) => {
      const current = await store.findFlow(tx, workspaceId, flowId, true);
      if (!current) throw notFound(flowId);
      if (!allowedFrom.includes(current.status)) throw notAllowed(current, what, allowedFrom);
      if (to === 'active' && current.steps.length === 0) throw withoutSteps(current);
      await store.updateFlow(tx, flowId, { status: to });
      return store.findFlow(tx, workspaceId, flowId);
    });
    if (!row) throw notFound(flowId);
    logger.info({ workspaceId, flowId, status: to }, 'flow moved');
    return toFlow(row);
  }

  return implementService(
    FlowServiceService,
    {
      async listFlows({ workspaceId, limit, cursor, status }) {
        const wanted = status ? statusOf(status, 'status', 'querystring') : undefined;
        const request = pageRequest(limit, cursor);
        const { rows, nextCursor } = request.page(await store.listFlows(pool, workspaceId, wanted, request.after, request.fetch));
        return { flows: rows.map(toFlow), nextCursor };
      },

      async createFlow(request) {
        const triggerType = triggerTypeOf(request.triggerType);
        const steps = await stepsOf(request.workspaceId, request.steps);
        const triggerCampaignId = request.triggerCampaignId || null;
        await checkTriggerCampaign(request.workspaceId, triggerType, triggerCampaignId);
        const id = `flw_${randomId(24)}`;
        const row = await withTransaction(pool, async (tx) => {
          await store.insertFlow(tx, { id, workspaceId: request.workspaceId, siteId: request.siteId, name: request.name, description: request.description, triggerType, triggerCampaignId, steps });
          return store.findFlow(tx, request.workspaceId, id);
        });
        if (!row) throw new Error('a flow vanished as it was created');
        logger.info({ workspaceId: row.workspace_id, flowId: id, triggerType }, 'flow created');
        return { flow: toFlow(row) };
      },

      async getFlow({ workspaceId, flowId }) {
        const row = await store.findFlow(pool, workspaceId, flowId);
        if (!row) throw notFound(flowId);
        return { flow: toFlow(row) };
      },

      async updateFlow(request) {
        const { workspaceId, flowId } = request;
        const triggerType = request.triggerType !== undefined ? triggerTypeOf(request.triggerType) : undefined;
        const status = request.status !== undefined ? statusOf(request.status, 'status', 'body') : undefined;
        const steps = request.setSteps ? await stepsOf(workspaceId, request.steps) : undefined;
        const current = await store.findFlow(pool, workspaceId, flowId);
        if (!current) throw notFound(flowId);
        const triggerCampaignId = request.triggerCampaignId !== undefined ? request.triggerCampaignId || null : undefined;
        // The flow as it would be: a notification trigger may keep its campaign, another may not.
        const nextTrigger = triggerType ?? current.trigger_type;
        const nextCampaign = triggerCampaignId !== undefined ? triggerCampaignId : current.trigger_campaign_id;
        if (triggerCampaignId !== undefined || triggerType !== undefined) await checkTriggerCampaign(workspaceId, nextTrigger, nextCampaign);
        const row = await withTransaction(pool, async (tx) => {
          const locked = await store.findFlow(tx, workspaceId, flowId, true);
          if (!locked) throw notFound(flowId);
          if (steps) await store.replaceSteps(tx, flowId, steps);
          const stepCount = steps ? steps.length : locked.steps.length;
          if (status === 'active' && stepCount === 0) throw withoutSteps(locked);
          await store.updateFlow(tx, flowId, {
            ...(request.name !== undefined ? { name: request.name } : {}),
            ...(request.description !== undefined ? { description: request.description } : {}),
            ...(triggerType !== undefined ? { triggerType } : {}),
            ...(triggerCampaignId !== undefined ? { triggerCampaignId } : {}),
            ...(status !== undefined ? { status } : {}),
          });
          return store.findFlow(tx, workspaceId, flowId);
        });
        if (!row) throw notFound(flowId);
        logger.info({ workspaceId, flowId, status: row.status, version: row.version }, 'flow changed');
        return { flow: toFlow(row) };
      },

      async deleteFlow({ workspaceId, flowId }) {
        if (!(await store.deleteFlow(pool, workspaceId, flowId))) throw notFound(flowId);
        logger.info({ workspaceId, flowId }, 'flow deleted');
        return {};
      },

      async activateFlow({ workspaceId, flowId }) {
        return { flow: await move(workspaceId, flowId, 'active', ACTIVATABLE, 'activating') };
      },

      async pauseFlow({ workspaceId, flowId }) {
        return { flow: await move(workspaceId, flowId, 'paused', ['active'], 'pausing') };
      },

      async listRuns({ workspaceId, flowId, limit, cursor }) {
        const request = pageRequest(limit, cursor);
        if (!(await store.findFlow(pool, workspaceId, flowId))) throw notFound(flowId);
        const { rows, nextCursor } = request.page(await store.listRuns(pool, workspaceId, flowId, request.after, request.fetch));
        return { runs: rows.map(toRun), nextCursor };
      },
    },
    logger,
  );
}
