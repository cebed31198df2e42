import { sendNotificationTool } from "@herald/agents/eve";

import { herald } from "../lib/herald.ts";

export default sendNotificationTool(herald);
