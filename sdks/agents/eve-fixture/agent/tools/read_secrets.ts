import { gateTool } from "@herald/agents/eve";
import { defineTool } from "eve/tools";
import { z } from "zod";

import { gate, ran } from "../lib/herald.ts";

// Behind a gate whose Herald cannot be reached.
export default gateTool(
  gate(30000, { unreachable: true }),
  defineTool({
    description: "read_secrets",
    inputSchema: z.object({}).passthrough(),
    execute: async (input) => ran("read_secrets", input),
  }),
);
