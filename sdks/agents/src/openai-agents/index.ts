import type { Herald } from '@herald/sdk';
import { tool, type FunctionTool, type RunContext, type RunState, type RunToolApprovalItem, type ToolInputParameters } from '@openai/agents';

import { HeraldGate, ToolCallRefusedError, type Approved, type ToolCall } from '../gate.js';
import { ASK_USER, askUser, SEND_NOTIFICATION, sendNotification } from '../tools.js';

/**
 * The OpenAI Agents SDK (`@openai/agents` 0.x): Herald's two tools as function tools, and an
 * approval gate that uses the SDK's own tool approval: a call that needs a person interrupts the
 * run, the run's state can be saved (`state.toString()`) and resumed in another process, and
 * `answerInterruptions` approves or rejects each interruption from Herald's decision.
 */

/** send_notification and ask_user as function tools. */
export function heraldTools(herald: Herald) {
  return [
    tool({
      name: SEND_NOTIFICATION.name,
      description: SEND_NOTIFICATION.description,
      parameters: SEND_NOTIFICATION.inputSchema,
      execute: (input, _context, details) => sendNotification(herald, input, details?.signal),
    }),
    tool({
      name: ASK_USER.name,
      description: ASK_USER.description,
      parameters: ASK_USER.inputSchema,
      execute: (input, _context, details) => askUser(herald, input, details?.signal),
    }),
  ];
}

/**
 * The tool behind Herald's gate. Its approval policy asks /authorize: `requires_human` opens the
 * decision (keyed by the call id) and interrupts the run. When the tool is finally invoked the
 * gate checks again that Herald's decision is a yes to these arguments; a refusal becomes the
 * text the model sees, and an error from Herald is thrown as the SDK's typed error. After a
 * person's yes the model is given who approved with the tool's output, `{approval: "approved by
 * …", result}`; a call the policy allows gives the output alone.
 */
export function gateTool<Context, Parameters extends ToolInputParameters, Result>(
  gate: HeraldGate,
  original: FunctionTool<Context, Parameters, Result>,
): FunctionTool<Context, Parameters, Result | Approved<string | Result>> {
  return {
    ...original,
    needsApproval: async (_context, input, callId) => (await gate.screen({ toolName: original.name, input, callId })).verdict === 'requires_human',
    invoke: async (context: RunContext<Context>, input: string, details) => {
      const call: ToolCall = { toolName: original.name, input: JSON.parse(input) as unknown, callId: details?.toolCall?.callId };
      try {
        return await gate.runApproved(call, () => original.invoke(context, input, details), details?.signal);
      } catch (err) {
        if (err instanceof ToolCallRefusedError) return err.message;
        throw err;
      }
    },
  };
}

/**
 * Resolves the run's interruptions for gated tools from Herald: each decision (found again by the
 * call id, so a state restored in another process works) is waited for up to `waitTimeoutMs`,
 * then approved only on an explicit yes to the same arguments and rejected otherwise, with the
 * reason the model will see. Returns false, changing nothing, while a person has yet to answer one.
 */
export async function answerInterruptions(
  gate: HeraldGate,
  state: Pick<RunState<unknown, never>, 'getInterruptions' | 'approve' | 'reject'>,
  options: { waitTimeoutMs?: number; signal?: AbortSignal } = {},
): Promise<boolean> {
  const verdicts: Array<{ item: RunToolApprovalItem; approved: boolean; reason?: string }> = [];
  for (const item of state.getInterruptions()) {
    const { rawItem } = item;
    if (rawItem.type !== 'function_call') continue;
    const call: ToolCall = { toolName: rawItem.name, input: JSON.parse(rawItem.arguments) as unknown, callId: rawItem.callId };
    const screening = await gate.screen(call, options.signal);
    if (screening.verdict !== 'requires_human') {
      verdicts.push({ item, approved: screening.verdict === 'allow', ...(screening.verdict === 'deny' && { reason: screening.reason }) });
      continue;
    }
    const decision = await gate.settle(screening.decision, options);
    if (decision.status === 'pending') return false;
    const clearance = gate.judge(call, screening.authorization, decision);
    verdicts.push({ item, approved: clearance.cleared, ...(!clearance.cleared && { reason: `Herald refused ${call.toolName}: ${clearance.reason}` }) });
  }
  for (const { item, approved, reason } of verdicts) {
    if (approved) state.approve(item);
    else state.reject(item, reason === undefined ? {} : { message: reason });
  }
  return true;
}
