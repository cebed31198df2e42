import type { AskRecord, Herald, SendResult } from '@herald/sdk';
import { defineTool, type ToolContext, type ToolDefinition } from 'eve/tools';

import type { Approved, HeraldGate } from '../gate.js';
import { ASK_USER, askUser, SEND_NOTIFICATION, sendNotification, type AskUserInput, type SendNotificationInput } from '../tools.js';

/**
 * Eve (`eve` 0.80, its tools are AI SDK tools): Herald's two tools as Eve tool definitions (each
 * default-exported from its own `agent/tools/<name>.ts`), and Herald's approval gate around any
 * Eve tool. Eve evaluates tool modules when it compiles the agent, before the runtime's
 * environment exists, so the client and the gate may be given as functions, called on first use.
 */

/** A value, or a function that makes it when a call first needs it (e.g. from process.env at run time). */
export type Lazy<T> = T | (() => T);

const resolve = <T extends object>(value: Lazy<T>): T => (typeof value === 'function' ? (value as () => T)() : value);

/** send_notification as an Eve tool: default-export it from `agent/tools/send_notification.ts`. */
export function sendNotificationTool(herald: Lazy<Herald>): ToolDefinition<SendNotificationInput, SendResult> {
  return defineTool({
    description: SEND_NOTIFICATION.description,
    inputSchema: SEND_NOTIFICATION.inputSchema,
    execute: (input: SendNotificationInput, ctx: ToolContext) => sendNotification(resolve(herald), input, ctx.abortSignal),
  });
}

/** ask_user as an Eve tool: default-export it from `agent/tools/ask_user.ts`. */
export function askUserTool(herald: Lazy<Herald>): ToolDefinition<AskUserInput, AskRecord> {
  return defineTool({
    description: ASK_USER.description,
    inputSchema: ASK_USER.inputSchema,
    execute: (input: AskUserInput, ctx: ToolContext) => askUser(resolve(herald), input, ctx.abortSignal),
  });
}

/**
 * The tool behind Herald's gate (Eve's session id and call id key the decision: a replayed step
 * finds the same decision again, and call ids repeat across sessions): allow runs it, deny throws ToolCallRefusedError with the
 * policy's reason, requires_human opens the decision and waits for the person inside the call,
 * across 55 s holds, up to the gate's `waitTimeoutMs`. Only an explicit yes to the same arguments
 * runs it; no, a cancel, silence (expiry or the wait ending) and an error from Herald never do.
 * Eve reports the refusal to the model as the call's error. After a person's yes the model is given
 * who approved with the tool's output, `{approval: "approved by …", result}`; a call the policy
 * allows gives the output alone.
 */
export function gateTool<Input, Output>(gate: Lazy<HeraldGate>, original: ToolDefinition<Input, Output>): ToolDefinition<Input, Output | Approved<Output>> {
  const execute = original.execute.bind(original);
  // An object literal on purpose: eve's compiler rewrites each defineTool({...}) call site into
  // durable callbacks, and runs those; a copy of a definition would still run the ungated execute.
  return defineTool({
    description: original.description,
    inputSchema: original.inputSchema,
    approval: original.approval,
    // A streaming (async-iterable) tool is cleared before its first value, as any other.
    execute: (input: Input, ctx: ToolContext) => resolve(gate).runApproved({ toolName: ctx.toolName, input, callId: `${ctx.session.id}:${ctx.callId}` }, () => execute(input, ctx), ctx.abortSignal),
  } as Parameters<typeof defineTool>[0]) as ToolDefinition<Input, Output | Approved<Output>>;
}
