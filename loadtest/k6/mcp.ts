// MCP tools/call round trips: an agent over Streamable HTTP (stateless JSON-RPC POSTs, as the
// gateway serves them) asks with ask_user (no wait) and withdraws with cancel_question, at a
// constant arrival rate. Each result must be a tool result (not an error) whose structured
// content carries the record.
import { check } from 'k6';
import exec from 'k6/execution';
import http from 'k6/http';
import { Trend } from 'k6/metrics';
import type { Options } from 'k6/options';

import { BASE_URL, bearer, budget, dropBudget, maxVus, pick, PROVISION, SMOKE } from './lib/config.ts';
import { body } from './lib/http.ts';
import { summaryFiles } from './lib/summary.ts';

const PROTOCOL_VERSION = '2025-06-18';
// Two requests a round: 12 rounds a second over two keys is 720 requests a minute per key.
const FORM = SMOKE ? { rate: 5, seconds: 4, keys: 1 } : { rate: 12, seconds: 120, keys: 2 };
const KEYS = PROVISION.mcp.keys.slice(0, FORM.keys);

/** Both calls of one round, ask and withdraw. */
const roundTrip = new Trend('mcp_round_trip', true);

export const options: Options = {
  scenarios: {
    agents: { executor: 'constant-arrival-rate', rate: FORM.rate, timeUnit: '1s', duration: `${FORM.seconds}s`, preAllocatedVUs: 10, maxVUs: maxVus(100) },
  },
  thresholds: {
    checks: ['rate==1'],
    http_req_failed: ['rate==0'],
    'http_req_duration{name:mcp,tool:ask_user}': [budget(500)],
    'http_req_duration{name:mcp,tool:cancel_question}': [budget(500)],
    mcp_round_trip: [budget(1000)],
    dropped_iterations: [dropBudget(FORM.rate * FORM.seconds)],
  },
};

interface ToolResult {
  result?: { isError?: boolean; structuredContent?: { correlationId?: string; status?: string } };
}

function toolCall(key: string, id: number, name: string, args: Record<string, unknown>): ToolResult['result'] & { status: number } {
  const response = http.post(`${BASE_URL}/api/mcp/mcp`, JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }), {
    headers: { ...bearer(key), 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': PROTOCOL_VERSION },
    tags: { name: 'mcp', tool: name },
  });
  return { status: response.status, ...body<ToolResult>(response)?.result };
}

export function setup(): void {
  if (KEYS.length < FORM.keys) throw new Error(`the provisioning file has ${KEYS.length} MCP keys, this form needs ${FORM.keys}`);
}

export default function round(): void {
  const key = pick(KEYS, exec.scenario.iterationInTest);
  const started = Date.now();
  const asked = toolCall(key, 1, 'ask_user', { question: 'Continue the load run?', agentName: 'load-agent', wait: false });
  const correlationId = asked.structuredContent?.correlationId ?? '';
  const ok = check(asked, {
    'ask_user is a tool result': (r) => r.status === 200 && r.structuredContent !== undefined && r.isError !== true,
    'ask_user is pending': (r) => r.structuredContent?.status === 'pending' && /^ask_[0-9a-f]{32}$/.test(correlationId),
  });
  if (!ok) return;
  const withdrawn = toolCall(key, 2, 'cancel_question', { correlationId });
  const done = check(withdrawn, {
    'cancel_question is a tool result': (r) => r.status === 200 && r.structuredContent !== undefined && r.isError !== true,
    'the question is withdrawn': (r) => r.structuredContent?.status === 'withdrawn' && r.structuredContent.correlationId === correlationId,
  });
  if (done) roundTrip.add(Date.now() - started);
}

export function teardown(): void {
  // The tool list an agent starts from still names both tools.
  const response = http.post(`${BASE_URL}/api/mcp/mcp`, JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }), {
    headers: { ...bearer(pick(KEYS, 0)), 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': PROTOCOL_VERSION },
    tags: { name: 'mcp', tool: 'tools/list', phase: 'teardown' },
  });
  const names = (body<{ result?: { tools?: Array<{ name?: string }> } }>(response)?.result?.tools ?? []).map((tool) => tool.name);
  check(response, { 'tools/list names ask_user and cancel_question': (r) => r.status === 200 && names.includes('ask_user') && names.includes('cancel_question') });
}

export const handleSummary = summaryFiles('mcp');
