import type { Decision, Herald } from '@herald/sdk';
import { tool, type StructuredToolInterface, type ToolRunnableConfig } from '@langchain/core/tools';
import { Command, interrupt } from '@langchain/langgraph';

import { HeraldGate, ToolCallRefusedError, type ToolCall } from '../gate.js';
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

/** What the graph's interrupt carries while a person decides: enough to wait for the decision, or show it. */
export interface HeraldInterrupt {
  herald: 'decision';
  decisionId: string;
  toolName: string;
  toolCallId: string;
  decisionPageUrl: string;
  question: string;
}

/**
 * The tool behind Herald's gate. allow runs it; deny refuses it (the refusal is thrown, and the
 * ToolNode shows it to the model); requires_human opens the decision and, while it is pending,
 * interrupts the graph with a HeraldInterrupt. When the thread is resumed the tool runs again
 * from the start and goes ahead only if Herald's decision is an explicit yes to the same arguments;
 * the resume value is never taken as approval. Called without a tool call id (outside a ToolNode)
 * there is no id to find the decision again by, so it waits for the person instead.
 */
export function gateTool(gate: HeraldGate, original: StructuredToolInterface): StructuredToolInterface {
  return tool(
    async (input: unknown, config: ToolRunnableConfig) => {
      const callId = config.toolCall?.id;
      const call: ToolCall = { toolName: original.name, input, callId };
      if (callId === undefined) return gate.run(call, () => original.invoke(input, config), config.signal);
      const screening = await gate.screen(call, config.signal);
      if (screening.verdict === 'allow') return original.invoke(input, config);
      if (screening.verdict === 'deny') throw new ToolCallRefusedError(call.toolName, { cleared: false, authorization: screening.authorization, decision: null, reason: screening.reason });
      const { decision } = screening;
      if (decision.status === 'pending') interrupt<HeraldInterrupt>(interruptOf(decision, call.toolName, callId));
      // Resumed: Herald's decision as it is now, never the resume value, decides.
      const current = decision.status === 'pending' ? await gate.herald.getDecision(decision.decisionId, {}, { signal: config.signal }) : decision;
      const clearance = gate.judge(call, screening.authorization, current);
      if (!clearance.cleared) throw new ToolCallRefusedError(call.toolName, clearance);
      return original.invoke(input, config);
    },
    { name: original.name, description: original.description, schema: original.schema },
  );
}

function interruptOf(decision: Decision, toolName: string, toolCallId: string): HeraldInterrupt {
  return { herald: 'decision', decisionId: decision.decisionId, toolName, toolCallId, decisionPageUrl: decision.decisionPageUrl, question: decision.question };
}

/** Whether an interrupt's value is the gate's. */
export function isHeraldInterrupt(value: unknown): value is HeraldInterrupt {
  return typeof value === 'object' && value !== null && (value as { herald?: unknown }).herald === 'decision' && typeof (value as { decisionId?: unknown }).decisionId === 'string';
}

/**
 * Waits (across 55 s holds, up to `waitTimeoutMs`) for the decision behind a HeraldInterrupt and
 * returns the Command that resumes the thread once it is answered, cancelled or expired, or null
 * while it is still open. What the tool then does depends on Herald's answer, not on this value.
 */
export async function resumeWhenDecided(gate: HeraldGate, pending: HeraldInterrupt, options: { waitTimeoutMs?: number; signal?: AbortSignal } = {}): Promise<Command | null> {
  const decision = await gate.settle(await gate.herald.getDecision(pending.decisionId, {}, { signal: options.signal }), options);
  if (decision.status === 'pending') return null;
  return new Command({ resume: { decisionId: decision.decisionId, status: decision.status } });
}
