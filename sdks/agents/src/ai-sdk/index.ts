import type { AskRecord, Herald, SendResult } from '@herald/sdk';
import { tool, type Tool, type ToolApprovalConfiguration, type ModelMessage, type ToolApprovalResponse, type ToolApprovalStatus, type ToolModelMessage, type ToolSet } from 'ai';

import { approvalOf, HeraldGate, type ToolCall } from '../gate.js';
import { ASK_USER, askUser, SEND_NOTIFICATION, sendNotification, type AskUserInput, type SendNotificationInput } from '../tools.js';

/**
 * The Vercel AI SDK (`ai` 7): Herald's two tools as AI SDK tools, an approval gate around any
 * tool set, and Herald as the approver of the SDK's own tool approval, so a run that waits for a
 * person ends, and is resumed from its messages, even in another process.
 */

/** send_notification and ask_user as AI SDK tools. */
export function heraldTools(herald: Herald): { send_notification: Tool<SendNotificationInput, SendResult>; ask_user: Tool<AskUserInput, AskRecord> } {
  return {
    send_notification: tool({
      description: SEND_NOTIFICATION.description,
      inputSchema: SEND_NOTIFICATION.inputSchema,
      execute: (input, { abortSignal }) => sendNotification(herald, input, abortSignal),
    }),
    ask_user: tool({
      description: ASK_USER.description,
      inputSchema: ASK_USER.inputSchema,
      execute: (input, { abortSignal }) => askUser(herald, input, abortSignal),
    }),
  };
}

/**
 * The same tools, each call first cleared by the gate (its toolCallId keys the decision): a call
 * Herald does not clear throws ToolCallRefusedError, which the SDK reports to the model as a tool
 * error. Alone, a call that needs a person blocks until they answer; with `heraldToolApproval`
 * the run ends instead, and this is the check that the person's yes was for these arguments.
 */
export function gateTools<TOOLS extends ToolSet>(gate: HeraldGate, tools: TOOLS): TOOLS {
  const gated: ToolSet = {};
  for (const [toolName, original] of Object.entries(tools)) {
    const execute = original.execute;
    gated[toolName] =
      execute === undefined
        ? original
        : { ...original, execute: (input: unknown, options) => gate.run({ toolName, input, callId: options.toolCallId }, () => execute(input as never, options), options.abortSignal) };
  }
  // Every entry keeps its own tool's type: only execute was wrapped, with the same signature.
  return gated as TOOLS;
}

/**
 * `toolApproval` for generateText/streamText: allow runs, deny is denied with the policy's reason,
 * requires_human opens the decision and asks for the SDK's user approval (the run ends with a
 * tool-approval-request; answer it with `answerApprovals`). The SDK asks again when the run is
 * resumed: the decision's answer then approves or denies it. `gated`: the tool set given to
 * `gateTools`, when other tools (e.g. heraldTools) run beside it without Herald's approval.
 */
export function heraldToolApproval<TOOLS extends ToolSet, RUNTIME_CONTEXT = unknown>(gate: HeraldGate, gated?: ToolSet): ToolApprovalConfiguration<TOOLS, RUNTIME_CONTEXT> {
  const names = gated === undefined ? undefined : new Set(Object.keys(gated));
  return async ({ toolCall }) =>
    names !== undefined && !names.has(toolCall.toolName) ? 'not-applicable' : statusOf(gate, { toolName: toolCall.toolName, input: toolCall.input, callId: toolCall.toolCallId });
}

async function statusOf(gate: HeraldGate, call: ToolCall): Promise<ToolApprovalStatus> {
  const screening = await gate.screen(call);
  if (screening.verdict === 'allow') return 'not-applicable';
  if (screening.verdict === 'deny') return { type: 'denied', reason: screening.reason };
  if (screening.decision.status === 'pending') return { type: 'user-approval', reason: screening.authorization.reason };
  const clearance = gate.judge(call, screening.authorization, screening.decision);
  return clearance.cleared ? { type: 'approved', reason: approvalOf(screening.decision) } : { type: 'denied', reason: clearance.reason };
}

/**
 * Answers the run's open tool-approval requests from Herald's decisions (found again by tool call
 * id, so this works after a restart from saved messages), waiting across holds up to
 * `waitTimeoutMs`. Returns the tool message to append before resuming, or null while a person
 * has yet to answer one of them (call again later). Only an explicit yes approves.
 */
export async function answerApprovals(gate: HeraldGate, messages: ModelMessage[], options: { waitTimeoutMs?: number; signal?: AbortSignal } = {}): Promise<ToolModelMessage | null> {
  const calls = new Map<string, ToolCall>();
  const requests: Array<{ approvalId: string; toolCallId: string }> = [];
  const answered = new Set<string>();
  for (const message of messages) {
    if (typeof message.content === 'string') continue;
    for (const part of message.content) {
      if (part.type === 'tool-call') calls.set(part.toolCallId, { toolName: part.toolName, input: part.input, callId: part.toolCallId });
      if (part.type === 'tool-approval-request' && part.isAutomatic !== true) requests.push({ approvalId: part.approvalId, toolCallId: part.toolCallId });
      if (part.type === 'tool-approval-response') answered.add(part.approvalId);
    }
  }
  const responses: ToolApprovalResponse[] = [];
  for (const request of requests.filter((open) => !answered.has(open.approvalId))) {
    const call = calls.get(request.toolCallId);
    if (call === undefined) throw new Error(`No tool call ${request.toolCallId} for approval ${request.approvalId} in the messages`);
    const screening = await gate.screen(call, options.signal);
    if (screening.verdict !== 'requires_human') {
      responses.push({ type: 'tool-approval-response', approvalId: request.approvalId, approved: screening.verdict === 'allow', ...(screening.verdict === 'deny' && { reason: screening.reason }) });
      continue;
    }
    const decision = await gate.settle(screening.decision, options);
    if (decision.status === 'pending') return null;
    const clearance = gate.judge(call, screening.authorization, decision);
    responses.push({ type: 'tool-approval-response', approvalId: request.approvalId, approved: clearance.cleared, reason: clearance.cleared ? approvalOf(decision) : clearance.reason });
  }
  return responses.length === 0 ? null : { role: 'tool', content: responses };
}
