import { appendFileSync } from "node:fs";

import { HeraldGate } from "@herald/agents";
import { Herald } from "@herald/sdk";

// Made on first use: eve evaluates tool modules at build time, before this environment exists.
let client: Herald | undefined;
export const herald = (): Herald => (client ??= new Herald({ apiKey: process.env.HERALD_API_KEY, baseUrl: process.env.HERALD_URL }));

/**
 * A gate that waits up to waitTimeoutMs for the person; `unreachable`: its Herald is at
 * HERALD_UNREACHABLE_URL, where nothing listens; `reviewed`: only the API key HERALD_REVIEWER_KEY_ID may approve.
 */
export const gate = (waitTimeoutMs: number, { unreachable = false, reviewed = false } = {}) => () =>
  new HeraldGate({
    herald: unreachable ? new Herald({ apiKey: process.env.HERALD_API_KEY, baseUrl: process.env.HERALD_UNREACHABLE_URL }) : herald(),
    actor: "eve-agent",
    waitTimeoutMs,
    ...(reviewed && { approvers: [{ kind: "key" as const, id: process.env.HERALD_REVIEWER_KEY_ID ?? "" }] }),
  });

/** What a tool did, one JSON line per run, in the file the test reads. */
export function ran(tool: string, input: unknown): string {
  appendFileSync(process.env.EVE_TOOL_LOG ?? "", `${JSON.stringify({ tool, input })}\n`);
  return `${tool} ran`;
}
