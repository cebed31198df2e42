// MCP tools/call round trips: an agent over Streamable HTTP (stateless JSON-RPC POSTs, as the
// gateway serves them) asks with ask_user (no wait) and withdraws with cancel_question, at a
// constant arrival rate. Each result must be a tool result (not an error) whose structured
// content carries the record.
import { check, type HttpClient, type HttpResponse } from '../runner/http.js';
import { Trend } from '../runner/metrics.js';
import { defineScenario, type Form, type Iteration } from '../runner/scenario.js';
import { ALWAYS, maxVus, budget, bearer, bootstrapKeys, bootstrapWorkspace, handleSummary, pick, retireWorkspaces } from './lib/herald.js';

const PROTOCOL_VERSION = '2025-06-18';
/** Both calls of one round, ask and withdraw. */
const roundTrip = new Trend('mcp_round_trip', true);

interface Data {
  keys: string[];
}

interface ToolResult {
  result?: { isError?: boolean; structuredContent?: { correlationId?: string; status?: string } };
}

const FORMS = {
  smoke: { rate: 5, duration: '4s', keys: 1 },
  // Two requests a round: 12 rounds a second over two keys is 720 requests a minute per key.
  full: { rate: 12, duration: '2m', keys: 2 },
} as const;

export default defineScenario<Data>({
  name: 'mcp',
  description: 'JSON-RPC tools/call (ask_user, cancel_question) over Streamable HTTP at /api/mcp/mcp',
  options(form: Form) {
    const { rate, duration } = FORMS[form];
    return {
      scenarios: {
        agents: { executor: 'constant-arrival-rate', rate, timeUnit: '1s', duration, preAllocatedVUs: 10, maxVUs: maxVus(form, 100), exec: round },
      },
      thresholds: {
        ...ALWAYS,
        http_req_failed: ['rate==0'],
        'http_req_duration{name:mcp,tool:ask_user}': [budget(form, 500)],
        'http_req_duration{name:mcp,tool:cancel_question}': [budget(form, 500)],
        mcp_round_trip: [budget(form, 1000)],
        dropped_iterations: ['count==0'],
      },
    };
  },
  async setup(env) {
    const { workspaceId, apiKey } = await bootstrapWorkspace('mcp', 'enterprise');
    return { keys: [apiKey, ...(await bootstrapKeys(workspaceId, FORMS[env.form].keys - 1))] };
  },
  teardown: retireWorkspaces,
  handleSummary,
});

function toolCall(http: HttpClient, key: string, id: number, name: string, args: Record<string, unknown>): Promise<HttpResponse> {
  return http.post('/api/mcp/mcp', {
    name: 'mcp',
    tags: { tool: name },
    headers: { ...bearer(key), accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL_VERSION },
    body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } },
    expected: [200],
  });
}

async function round({ http, data, vu }: Iteration<Data>): Promise<void> {
  const key = pick(data.keys, vu.iterations);
  const started = performance.now();
  const asked = await toolCall(http, key, 1, 'ask_user', { question: 'Continue the load run?', agentName: 'load-agent', wait: false });
  const question = asked.json<ToolResult>()?.result;
  const correlationId = question?.structuredContent?.correlationId ?? '';
  const ok = check(asked, {
    'ask_user is a tool result': (r) => r.status === 200 && question !== undefined && question.isError !== true,
    'ask_user is pending': () => question?.structuredContent?.status === 'pending' && /^ask_[0-9a-f]{32}$/.test(correlationId),
  });
  if (!ok) return;
  const cancelled = await toolCall(http, key, 2, 'cancel_question', { correlationId });
  const withdrawn = cancelled.json<ToolResult>()?.result;
  if (
    check(cancelled, {
      'cancel_question is a tool result': (r) => r.status === 200 && withdrawn !== undefined && withdrawn.isError !== true,
      'the question is withdrawn': () => withdrawn?.structuredContent?.status === 'withdrawn' && withdrawn.structuredContent.correlationId === correlationId,
    })
  ) {
    roundTrip.add(performance.now() - started);
  }
}
