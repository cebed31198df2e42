import { askStillOpenHint, type Scope } from '@herald/domain';
import { errorBody, HeraldError, invalidFields } from '@herald/errors';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/server';
import { Type, type Static, type TObject } from '@sinclair/typebox';

import { validationError } from '../errors.js';
import { CreateCampaignBody } from '../schemas/campaigns.js';
import { CreateFlowBody } from '../schemas/flows.js';
import { SendBody } from '../schemas/notifications.js';
import { MAX_WAIT_SECONDS, QuestionFields } from '../schemas/questions.js';
import { schemaValidator } from '../validation.js';
import { isJsonObject, type Json, type RestAnswer, type RestExchange } from './rest.js';

/** The MCP tools: each validates its arguments, then calls one REST route (see rest.ts). */

export interface HeraldTool {
  name: string;
  title: string;
  description: string;
  /** The key scope the REST route behind the tool needs (see the scope table). */
  scope: Scope;
  inputSchema: TObject;
  annotations: ToolAnnotations;
  /** Throws HeraldError invalid_request for arguments that do not fit. */
  call(args: unknown, rest: RestExchange): Promise<RestAnswer>;
}

// As REST validates bodies: no coercion, no silently dropped fields, defaults filled in.
const argumentValidator = schemaValidator(false);

function tool<S extends TObject>(spec: Omit<HeraldTool, 'call' | 'inputSchema'> & { inputSchema: S; run(args: Static<S>, rest: RestExchange): Promise<RestAnswer> }): HeraldTool {
  const valid = argumentValidator.compile<Static<S>>(spec.inputSchema);
  const { run, ...definition } = spec;
  return {
    ...definition,
    async call(args, rest) {
      // Defaults are written into the arguments, so they are copied first.
      const input = isJsonObject(args) ? { ...args } : args;
      if (!valid(input)) throw validationError('arguments', valid.errors ?? []);
      return run(input, rest);
    },
  };
}

const MAX_WAIT_MS = MAX_WAIT_SECONDS * 1_000;
/** REST waits in whole seconds; a wait in milliseconds is rounded up. */
const waitSeconds = (timeoutMs: number) => Math.ceil(timeoutMs / 1_000);

const TimeoutMs = (minimum: number, description: string) => Type.Integer({ minimum, maximum: MAX_WAIT_MS, default: 30_000, description });
const CorrelationId = Type.String({ minLength: 1, maxLength: 64, description: 'The correlationId ask_user returned' });

/** An ask record whose wait ran out while the question is open: the hint names the MCP tools, not REST. */
function forAgents(answer: RestAnswer): RestAnswer {
  const { body } = answer;
  if (body.status !== 'timeout' || typeof body.expiresInSeconds !== 'number' || body.expiresInSeconds <= 0) return answer;
  const hint = askStillOpenHint(body.expiresInSeconds, 'call wait_for_answer with this correlationId to keep waiting, or cancel_question if it no longer matters');
  return { ...answer, body: { ...body, hint } };
}

const SEND_BODY_MAX = SendBody.properties.body.maxLength ?? 2_048;

const CampaignId = Type.String({ minLength: 1, maxLength: 64, description: 'The id create_campaign (or send_notification, as campaignId) returned' });
const campaignPath = (campaignId: string, action = '') => `/campaigns/${encodeURIComponent(campaignId)}${action}`;
const FlowId = Type.String({ minLength: 1, maxLength: 64, description: 'The id create_flow returned' });
const flowPath = (flowId: string, action = '') => `/flows/${encodeURIComponent(flowId)}${action}`;

export const TOOLS: readonly HeraldTool[] = [
  tool({
    name: 'send_notification',
    title: 'Send a notification',
    description:
      'Send a push notification to the person: their phone app and the browsers subscribed to this workspace. Use it to tell them something that needs no answer (a long task finished, a build failed). ' +
      'Returns {success, status: "queued", campaignId, sent, limits}. To get an answer, use ask_user instead.',
    scope: 'notifications:send',
    annotations: { title: 'Send a notification', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    inputSchema: Type.Object(
      {
        title: Type.String({ minLength: 1, maxLength: SendBody.properties.title.maxLength, description: 'The headline, e.g. "Deploy finished"' }),
        body: Type.String({ minLength: 1, maxLength: SEND_BODY_MAX, description: 'The message' }),
        url: Type.Optional(
          Type.String({ maxLength: SendBody.properties.url.maxLength, pattern: SendBody.properties.url.pattern, description: 'http(s) link opened when the notification is tapped' }),
        ),
        context: Type.Optional(
          Type.String({ minLength: 1, maxLength: 2_000, description: 'More detail; appended to the body after a blank line (body and context together at most 2,048 characters)' }),
        ),
      },
      { additionalProperties: false },
    ),
    async run({ title, body, url, context }, rest) {
      const text = context === undefined ? body : `${body}\n\n${context}`;
      if (text.length > SEND_BODY_MAX) {
        throw invalidFields('arguments', [{ field: 'context', in: 'arguments', problem: `makes the body longer than ${SEND_BODY_MAX} characters` }]);
      }
      return rest.call('POST', '/send', { title, body: text, ...(url !== undefined && { url }) });
    },
  }),
  tool({
    name: 'ask_user',
    title: 'Ask the person',
    description:
      'Ask the person a question and wait for the answer. Fail closed: only an explicit "yes" to a confirm question approves; no answer is never approval. ' +
      'type: "confirm" (yes/no, the default), "select" (one of 2-20 options) or "input" (free text). ' +
      'With wait (the default) the call returns when they answer or after timeoutMs (default 30,000, at most 55,000). ' +
      'Result: {correlationId, status: "answered" | "pending" | "timeout" | "withdrawn", answered, value, answeredBy, liveUrl, ...}; value is the answer ("yes"/"no" for confirm), answeredBy who gave it ({kind, id, displayName, channel, at}). ' +
      'approvers: only these people may answer ([{kind: "email" | "slack" | "subscriber" | "key" | "member", id}]); escalation: more channels and approvers while it stays unanswered. ' +
      'On "timeout" with the question still open (expiresInSeconds > 0), call wait_for_answer with the correlationId; the question stays open 10 minutes.',
    scope: 'ask',
    annotations: { title: 'Ask the person', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    inputSchema: Type.Object(
      {
        question: QuestionFields.question,
        type: Type.Optional(Type.Union([Type.Literal('confirm'), Type.Literal('select'), Type.Literal('input')], { description: 'confirm (default), select or input' })),
        options: QuestionFields.options,
        context: QuestionFields.context,
        placeholder: QuestionFields.placeholder,
        agentName: QuestionFields.agentName,
        approvers: QuestionFields.approvers,
        escalation: QuestionFields.escalation,
        wait: Type.Optional(Type.Boolean({ default: true, description: 'false: return at once with status "pending" and the correlationId' })),
        timeoutMs: Type.Optional(TimeoutMs(1, 'How long to wait for the answer, in milliseconds (rounded up to whole seconds)')),
      },
      { additionalProperties: false },
    ),
    async run({ wait, timeoutMs, ...question }, rest) {
      const timeoutSeconds = waitSeconds(timeoutMs ?? 30_000);
      return forAgents(await rest.call('POST', '/ask', { ...question, wait: wait ?? true, timeoutSeconds }));
    },
  }),
  tool({
    name: 'wait_for_answer',
    title: 'Wait for an answer',
    description:
      'Wait for the answer to a question asked with ask_user. Returns the same record as ask_user when the person answers or after timeoutMs (default 30,000, at most 55,000; 0 reads at once). ' +
      'Status "timeout" with expiresInSeconds > 0 means no answer yet: call again.',
    scope: 'ask',
    annotations: { title: 'Wait for an answer', readOnlyHint: true, openWorldHint: false },
    inputSchema: Type.Object(
      { correlationId: CorrelationId, timeoutMs: Type.Optional(TimeoutMs(0, 'How long to wait, in milliseconds (rounded up to whole seconds)')) },
      { additionalProperties: false },
    ),
    async run({ correlationId, timeoutMs }, rest) {
      return forAgents(await rest.call('GET', `/ask/${encodeURIComponent(correlationId)}?wait=${waitSeconds(timeoutMs ?? 30_000)}`));
    },
  }),
  tool({
    name: 'cancel_question',
    title: 'Withdraw a question',
    description:
      'Withdraw a question asked with ask_user that no longer matters; the person can no longer answer it. Returns the record with status "withdrawn". ' +
      'Fails with code "conflict" when it was already answered, withdrawn or expired.',
    scope: 'ask',
    annotations: { title: 'Withdraw a question', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    inputSchema: Type.Object({ correlationId: CorrelationId }, { additionalProperties: false }),
    async run({ correlationId }, rest) {
      return rest.call('DELETE', `/ask/${encodeURIComponent(correlationId)}`);
    },
  }),
  tool({
    name: 'get_question_events',
    title: "Read a question's record",
    description:
      "The record of a question asked with ask_user, oldest first: {data: [{seq, kind (opened | delivered | viewed | answered | refused | escalated | cancelled | expired), at, actor (who answered or tried: kind, id, displayName, channel; null for Herald's own steps), detail, prevHash, hash}], hasMore, nextCursor}. " +
      'Each entry carries the hash of the one before it, so a changed record shows.',
    scope: 'ask',
    annotations: { title: "Read a question's record", readOnlyHint: true, openWorldHint: false },
    inputSchema: Type.Object(
      {
        correlationId: CorrelationId,
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 100 })),
        cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400, description: 'nextCursor of the previous page' })),
      },
      { additionalProperties: false },
    ),
    async run({ correlationId, limit, cursor }, rest) {
      const query = new URLSearchParams({ limit: String(limit ?? 100), ...(cursor ? { cursor } : {}) });
      return rest.call('GET', `/ask/${encodeURIComponent(correlationId)}/events?${query.toString()}`);
    },
  }),
  tool({
    name: 'create_campaign',
    title: 'Create a campaign',
    description:
      "Create a push campaign to the site's browser subscribers (every active subscriber, or a saved segment's with segmentId): content given here or copied from a template (templateId, with variables for its {{placeholders}}). " +
      'It is a draft, or scheduled when scheduledAt (ISO 8601) is given; with sendNow: true it is started at once. ' +
      'Returns the campaign {id, status, totalTargeted, ...}. Read its figures later with get_campaign_stats.',
    scope: 'campaigns',
    annotations: { title: 'Create a campaign', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    inputSchema: Type.Object(
      {
        ...CreateCampaignBody.properties,
        sendNow: Type.Optional(Type.Boolean({ default: false, description: 'Start it at once (ignores scheduledAt)' })),
      },
      { additionalProperties: false },
    ),
    async run({ sendNow, ...campaign }, rest) {
      const created = await rest.call('POST', '/campaigns', campaign);
      if (!sendNow || created.status !== 201 || typeof created.body.id !== 'string') return created;
      return rest.call('POST', campaignPath(created.body.id, '/send'));
    },
  }),
  tool({
    name: 'send_campaign',
    title: 'Send a campaign now',
    description: 'Start a draft or scheduled campaign now (its schedule is ignored). Returns the campaign with status "sending"; a campaign already started fails with code "conflict".',
    scope: 'campaigns',
    annotations: { title: 'Send a campaign now', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    inputSchema: Type.Object({ campaignId: CampaignId }, { additionalProperties: false }),
    async run({ campaignId }, rest) {
      return rest.call('POST', campaignPath(campaignId, '/send'));
    },
  }),
  tool({
    name: 'get_campaign_stats',
    title: "Read a campaign's figures",
    description:
      "A campaign's figures: {totalSent (accepted by the push service), totalDelivered (shown, as the browser reported), totalClicked, totalFailed, deliveryRate, clickRate (percent)}.",
    scope: 'campaigns',
    annotations: { title: "Read a campaign's figures", readOnlyHint: true, openWorldHint: false },
    inputSchema: Type.Object({ campaignId: CampaignId }, { additionalProperties: false }),
    async run({ campaignId }, rest) {
      return rest.call('GET', campaignPath(campaignId, '/stats'));
    },
  }),
  tool({
    name: 'create_flow',
    title: 'Create a flow',
    description:
      'Create an automation that runs for each subscriber its trigger fires for (subscription, unsubscription, or a click, impression or dismiss of a push, ' +
      'optionally of one campaign: triggerCampaignId): its steps, in order, send a notification to that subscriber ({stepType: "send_notification", config: {notification: {title, body}}} ' +
      'or {templateId, variables}), wait ({stepType: "delay", config: {delay: {value, unit: "seconds" | "minutes" | "hours" | "days"}}}, at most 365 days) or end it ({stepType: "exit", config: {}}). ' +
      'It is a draft; with activate: true it starts running at once (it needs at least one step). Returns the flow {id, status, steps, ...}; follow its runs with list_flow_runs.',
    scope: 'flows',
    annotations: { title: 'Create a flow', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    inputSchema: Type.Object(
      {
        ...CreateFlowBody.properties,
        activate: Type.Optional(Type.Boolean({ default: false, description: 'Activate it at once: its trigger starts runs' })),
      },
      { additionalProperties: false },
    ),
    async run({ activate, ...flow }, rest) {
      const created = await rest.call('POST', '/flows', flow);
      if (!activate || created.status !== 201 || typeof created.body.id !== 'string') return created;
      return rest.call('POST', flowPath(created.body.id, '/activate'));
    },
  }),
  tool({
    name: 'list_flow_runs',
    title: "List a flow's runs",
    description:
      "A flow's runs, newest first: {data: [{subscriberId, state (running | waiting | completed | exited | cancelled | failed), currentStep, nextWakeUpAt, endReason, notificationIds}], hasMore, nextCursor}.",
    scope: 'flows',
    annotations: { title: "List a flow's runs", readOnlyHint: true, openWorldHint: false },
    inputSchema: Type.Object(
      {
        flowId: FlowId,
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
        cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400, description: 'nextCursor of the previous page' })),
      },
      { additionalProperties: false },
    ),
    async run({ flowId, limit, cursor }, rest) {
      const query = new URLSearchParams({ limit: String(limit ?? 20), ...(cursor ? { cursor } : {}) });
      return rest.call('GET', `${flowPath(flowId, '/runs')}?${query.toString()}`);
    },
  }),
];

/** A REST answer as a tool result: the JSON body, and isError for any 4xx or 5xx (the body carries REST's `code`). */
function toolResult({ status, body }: RestAnswer): CallToolResult {
  // Checks the REST route made itself name the argument where the tool's arguments are REST's fields.
  const fields = Array.isArray(body.fields) ? body.fields.map((field: unknown) => (isJsonObject(field) && field.in === 'body' ? { ...field, in: 'arguments' } : field)) : undefined;
  const shown: Json = fields === undefined ? body : { ...body, fields };
  return { content: [{ type: 'text', text: JSON.stringify(shown) }], structuredContent: shown, ...(status >= 400 && { isError: true }) };
}

/** Runs a tool; an invalid argument becomes the same tool error a REST 400 would. */
export async function runTool(definition: HeraldTool, args: unknown, rest: RestExchange, documentationBase: string): Promise<CallToolResult> {
  try {
    return toolResult(await definition.call(args, rest));
  } catch (err) {
    if (!(err instanceof HeraldError)) throw err;
    return toolResult({ status: err.status, body: errorBody(err, documentationBase) });
  }
}
