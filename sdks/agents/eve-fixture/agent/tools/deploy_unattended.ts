import { gateTool } from "@herald/agents/eve";
import { defineTool } from "eve/tools";
import { z } from "zod";

import { gate, ran } from "../lib/herald.ts";

export default gateTool(
  gate(1000),
  defineTool({
    description: "deploy_unattended",
    inputSchema: z.object({}).passthrough(),
    execute: async (input) => ran("deploy_unattended", input),
  }),
);
