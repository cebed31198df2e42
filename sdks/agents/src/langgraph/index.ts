import type { Herald } from '@herald/sdk';
import { ToolMessage } from '@langchain/core/messages';
import { tool, type StructuredToolInterface, type ToolRunnableConfig } from '@langchain/core/tools';
import { Command, interrupt } from '@langchain/langgraph';

import { approvedResult, HeraldGate, type PendingDecision, type Step } from '../gate.js';
import { ASK_USER, askUser, SEND_NOTIFICATION, sendNotification } from '../tools.js';

/**
 * LangGraph.js (`@langchain/langgraph` 1): Herald's two tools as LangChain tools, and an approval
 * gate that pauses the graph with LangGraph's own `interrupt` while a person decides. With a
 * checkpointer the paused thread survives a restart; resuming it re-runs the tool, which reads
 * Herald's decision again (found by the tool call id) and runs only on an explicit yes.
 */

/** send_notification and ask_user as LangChain tools. */
export function heraldTools(herald: Herald) {
  return [
    tool((input, config: ToolRunnableConfig) => sendNotification(herald, input, config.signal), {
      name: SEND_NOTIFICATION.name,
      description: SEND_NOTIFICATION.description,
      schema: SEND_NOTIFICATION.inputSchema,
    }),
    tool((input, config: ToolRunnableConfig) => askUser(herald, input, config.signal), { name: ASK_USER.name, description: ASK_USER.description, schema: ASK_USER.inputSchema }),
  ];
}

/**
 * The tool behind Herald's gate. allow runs it; deny refuses it (the refusal is thrown, and the
 * ToolNode shows it to the model); requires_human opens the decision and, while it is pending,
 * interrupts the graph with a PendingDecision. When the thread is resumed the tool runs again
 * from the start and goes ahead only if Herald's decision is an explicit yes to the same
 * arguments; the resume value is never taken as approval. Called without a tool call id (outside
 * a ToolNode) there is no id to find the decision again by, so it waits for the person instead.
 * After a person's yes the model is given who approved with the tool's output, `{approval:
 * "approved by …", result}`; a call the policy allows gives the output alone.
 */
export function gateTool(gate: HeraldGate, original: StructuredToolInterface): StructuredToolInterface {
  return tool(
    async (input: unknown, config: ToolRunnableConfig) => {
      const callId = config.toolCall?.id;
      if (callId === undefined) return gate.runApproved({ toolName: original.name, input }, () => original.invoke(input, config), config.signal);
      const call = { toolName: original.name, input, callId };
      const first = await gate.step(call, { resumed: false, signal: config.signal });
      let step: Exclude<Step, { action: 'pause' }>;
      if (first.action === 'pause') {
        // Throws on the first pass (the graph pauses); returns once the thread is resumed.
        interrupt<PendingDecision>(first.pending);
        step = await gate.step(call, { resumed: true, signal: config.signal });
      } else step = first;
      if (step.action === 'refuse') throw step.error;
      const output: unknown = await original.invoke(input, config);
      // Invoked with the tool call, the tool answers with its ToolMessage: the model is given its content.
      return step.decision === null ? output : approvedResult(step.decision, ToolMessage.isInstance(output) ? output.content : output);
    },
    { name: original.name, description: original.description, schema: original.schema },
  );
}

/**
 * Waits (across 55 s holds, up to `waitTimeoutMs`) for the decision behind a PendingDecision and
 * returns the Command that resumes the thread once it is answered, cancelled or expired, or null
 * while it is still open. What the tool then does depends on Herald's answer, not on this value.
 */
export async function resumeWhenDecided(gate: HeraldGate, pending: PendingDecision, options: { waitTimeoutMs?: number; signal?: AbortSignal } = {}): Promise<Command | null> {
  const decision = await gate.whenDecided(pending, options);
  return decision === null ? null : new Command({ resume: { decisionId: decision.decisionId, status: decision.status } });
}
