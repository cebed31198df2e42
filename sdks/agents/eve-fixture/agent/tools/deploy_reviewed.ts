import { gateTool } from "@herald/agents/eve";
import { defineTool } from "eve/tools";
import { z } from "zod";

import { gate, ran } from "../lib/herald.ts";

export default gateTool(
  gate(30000, { reviewed: true }),
  defineTool({
    description: "deploy, approved by the reviewer only",
    inputSchema: z.object({}).passthrough(),
    execute: async (input) => ran("deploy_reviewed", input),
  }),
);
