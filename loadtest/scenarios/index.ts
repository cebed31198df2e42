// Every journey by the name `npm run load -- <name>` takes.
import { runScenario, type RunResult } from '../runner/engine.js';
import type { LoadScenario, RunEnv } from '../runner/scenario.js';
import approval from './approval.js';
import authorize from './authorize.js';
import campaign from './campaign.js';
import engagement from './engagement.js';
import identity from './identity.js';
import mcp from './mcp.js';
import send from './send.js';
import subscribe from './subscribe.js';

export interface Journey {
  readonly description: string;
  run(env: RunEnv): Promise<RunResult>;
}

/** Hides each scenario's setup-data type behind its run. */
const journey = <Data>(scenario: LoadScenario<Data>): Journey => ({ description: scenario.description, run: (env) => runScenario(scenario, env) });

export const JOURNEYS: Readonly<Record<string, Journey>> = {
  identity: journey(identity),
  subscribe: journey(subscribe),
  send: journey(send),
  campaign: journey(campaign),
  engagement: journey(engagement),
  approval: journey(approval),
  authorize: journey(authorize),
  mcp: journey(mcp),
};
