import { defineAgent } from "eve";
import { mockModel } from "eve/evals";

// The scripted model: the user's message is {"tool", "input"}; the model calls that tool, then
// answers with the tool's result as JSON once it sees it.
export default defineAgent({
  model: mockModel({
    modelId: "herald-script",
    respond: ({ lastUserMessage, toolResults }) => {
      const [result] = toolResults;
      if (result !== undefined) return JSON.stringify(result.output);
      const { tool, input } = JSON.parse(lastUserMessage ?? "{}") as { tool: string; input: unknown };
      return { toolCalls: [{ name: tool, input }] };
    },
  }),
});
