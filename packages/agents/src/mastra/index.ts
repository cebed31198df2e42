import type { Herald } from '@herald/sdk';
import { createTool, type Tool, type ToolExecutionContext } from '@mastra/core/tools';

import { HeraldGate } from '../gate.js';
import { ASK_USER, askUser, SEND_NOTIFICATION, sendNotification, type AskUserInput, type SendNotificationInput } from '../tools.js';

/**
 * Mastra (`@mastra/core` 1): Herald's two tools as Mastra tools, and an approval gate around any
 * Mastra tool. The gate waits for the person inside the tool call (across 55 s holds, up to the
 * gate's `waitTimeoutMs`); the agent's tool call id keys the decision, so the same call made
 * again finds the decision instead of asking twice.
 */

type HeraldTool<Input, Output, Id extends string> = Tool<Input, Output, unknown, unknown, ToolExecutionContext, Id>;

/** send_notification and ask_user as Mastra tools. */
export function heraldTools(herald: Herald): {
  send_notification: HeraldTool<SendNotificationInput, unknown, 'send_notification'>;
  ask_user: HeraldTool<AskUserInput, unknown, 'ask_user'>;
} {
  return {
    send_notification: createTool({
      id: SEND_NOTIFICATION.name,
      description: SEND_NOTIFICATION.description,
      inputSchema: SEND_NOTIFICATION.inputSchema,
      execute: (input, context) => sendNotification(herald, input, context.abortSignal),
    }),
    ask_user: createTool({
      id: ASK_USER.name,
      description: ASK_USER.description,
      inputSchema: ASK_USER.inputSchema,
      execute: (input, context) => askUser(herald, input, context.abortSignal),
    }),
  };
}

/**
 * The tool behind Herald's gate: allow runs it, deny throws ToolCallRefusedError with the policy's
 * reason, requires_human waits for the person and runs it only on an explicit yes to the same
 * arguments; silence, a cancel, an expiry or an error from Herald throw and run nothing.
 */
export function gateTool<Input, Output, Id extends string>(gate: HeraldGate, original: HeraldTool<Input, Output, Id>): HeraldTool<Input, Output, Id> {
  const execute = original.execute;
  if (execute === undefined) throw new TypeError(`The tool ${original.id} has no execute function to gate`);
  return createTool({
    id: original.id,
    description: original.description,
    inputSchema: original.inputSchema,
    outputSchema: original.outputSchema,
    execute: (input: Input, context: ToolExecutionContext) =>
      gate.run({ toolName: original.id, input, callId: context.agent?.toolCallId }, () => execute(input, context), context.abortSignal),
  }) as HeraldTool<Input, Output, Id>;
}
