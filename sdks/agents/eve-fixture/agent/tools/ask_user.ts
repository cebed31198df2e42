import { askUserTool } from "@herald/agents/eve";

import { herald } from "../lib/herald.ts";

export default askUserTool(herald);
