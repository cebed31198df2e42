import { gateTool } from "@herald/agents/eve";
import { defineTool } from "eve/tools";
import { z } from "zod";

import { gate, ran } from "../lib/herald.ts";

export default gateTool(
  gate(30000),
  defineTool({
    description: "read_file",
    inputSchema: z.object({}).passthrough(),
    execute: async (input) => ran("read_file", input),
  }),
);
