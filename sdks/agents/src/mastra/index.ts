import type { Herald } from '@herald/sdk';
import { createTool, type Tool, type ToolExecutionContext } from '@mastra/core/tools';

import { approvedResult, HeraldGate, type Approved, type PendingDecision } from '../gate.js';
import { ASK_USER, askUser, SEND_NOTIFICATION, sendNotification, type AskUserInput, type SendNotificationInput } from '../tools.js';

/**
 * Mastra (`@mastra/core` 1): Herald's two tools as Mastra tools, and an approval gate around any
 * Mastra tool that suspends the agent's run with Mastra's own suspend while a person decides (the
 * agent's tool call id keys the decision, so the resumed call finds it again).
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
 * reason, requires_human opens the decision. Where the run can be resumed (the agent belongs to a
 * Mastra instance with storage), the call suspends with a PendingDecision while the person
 * decides; `resumeWhenDecided` then gives the data to resume it with (`agent.resumeGenerate` or
 * `resumeStream`, after a restart too), and the resumed call runs only if Herald's decision is an
 * explicit yes to the same arguments. Elsewhere the call waits for the person, across 55 s holds,
 * up to the gate's `waitTimeoutMs`. Silence, a cancel, an expiry or an error never run it.
 * After a person's yes the agent is given who approved with the tool's output, `{approval:
 * "approved by …", result}`; a call the policy allows gives the output alone. So the gated tool
 * declares no outputSchema: the original's own execute still checks its output against its schema.
 */
export function gateTool<Input, Output, Id extends string>(gate: HeraldGate, original: HeraldTool<Input, Output, Id>): HeraldTool<Input, Output | Approved<Output>, Id> {
  const execute = original.execute;
  if (execute === undefined) throw new TypeError(`The tool ${original.id} has no execute function to gate`);
  return createTool({
    id: original.id,
    description: original.description,
    inputSchema: original.inputSchema,
    execute: async (input: Input, context: ToolExecutionContext) => {
      const agent = context.agent;
      const resumable = agent !== undefined && context.mastra?.getStorage() !== undefined;
      if (!resumable) return gate.runApproved({ toolName: original.id, input, callId: agent?.toolCallId }, () => execute(input, context), context.abortSignal);
      const step = await gate.step({ toolName: original.id, input, callId: agent.toolCallId }, { resumed: agent.resumeData !== undefined, signal: context.abortSignal });
      if (step.action === 'refuse') throw step.error;
      if (step.action === 'pause') return agent.suspend(step.pending);
      return approvedResult(step.decision, await execute(input, context));
    },
  }) as HeraldTool<Input, Output | Approved<Output>, Id>;
}

/**
 * Waits (across 55 s holds, up to `waitTimeoutMs`) for the decision behind a suspended call and
 * returns the resume data once it is answered, cancelled or expired, or null while it is still
 * open. The resumed call reads Herald's decision itself: this value is never an approval.
 */
export async function resumeWhenDecided(
  gate: HeraldGate,
  pending: PendingDecision,
  options: { waitTimeoutMs?: number; signal?: AbortSignal } = {},
): Promise<{ decisionId: string; status: string } | null> {
  const decision = await gate.whenDecided(pending, options);
  return decision === null ? null : { decisionId: decision.decisionId, status: decision.status };
}
