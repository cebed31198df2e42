import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import {
  admin,
  call,
  createKey,
  createWorkspace,
  eventually,
  seedAudience,
  SERVER_API,
  startSendingHarness,
  type Audience,
  type SendingHarness,
} from '@herald/testkit';

import { onlyQuestionId } from './waiting.js';

// The MCP server end to end: the official MCP client over Streamable HTTP against a real gateway,
// the campaign and delivery path to a strict push service, and the decision service for questions.

let harness: SendingHarness;
let audience: Audience;
let gateway: string;

before(async () => {
  harness = await startSendingHarness({ decisions: true, services: ['flow'] });
  gateway = harness.stack.gatewayUrl;
  audience = await seedAudience(harness, 1);
});
after(() => harness.stop());

const ORIGIN = 'http://localhost:8080';
const RESOURCE_METADATA = `${ORIGIN}/.well-known/oauth-protected-resource`;
const TOOL_NAMES = ['send_notification', 'ask_user', 'wait_for_answer', 'cancel_question', 'get_question_events', 'create_campaign', 'send_campaign', 'get_campaign_stats', 'create_flow', 'list_flow_runs'];

interface Connection {
  client: Client;
  close(): Promise<void>;
}

async function connect(key?: string, options: ConstructorParameters<typeof Client>[1] = {}): Promise<Connection> {
  const client = new Client({ name: 'herald-test', version: '1.0.0' }, options);
  const transport = new StreamableHTTPClientTransport(new URL(`${gateway}/api/mcp/mcp`), {
    requestInit: { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return { client, close: () => client.close() };
}

type Structured = Record<string, unknown> & { code?: string; status?: unknown; fields?: unknown; correlationId?: string; liveUrl?: string };

async function callTool(connection: Connection, name: string, args: Record<string, unknown>): Promise<{ isError: boolean; body: Structured }> {
  const result = (await connection.client.callTool({ name, arguments: args })) as CallToolResult;
  const text = result.content[0];
  assert.equal(text?.type, 'text');
  const body = JSON.parse(text.type === 'text' ? text.text : '') as Structured;
  assert.deepEqual(result.structuredContent, body, 'the text and the structured content carry the same JSON');
  return { isError: result.isError === true, body };
}

/** One raw JSON-RPC POST, as a 2025-06-18 client without the SDK sends it. */
function rpc(body: unknown, key?: string, protocolVersion = '2025-06-18') {
  return call<Record<string, unknown>>(gateway, '/api/mcp/mcp', {
    method: 'POST',
    key,
    body,
    headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': protocolVersion },
  });
}

const toolCall = (name: string, args: Record<string, unknown>, id = 1) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });

const tokenOf = (liveUrl: string) => liveUrl.slice(liveUrl.indexOf('/a/') + 3);
const answer = (liveUrl: string, value: string) => call(gateway, `/api/v1/answer/${tokenOf(liveUrl)}`, { method: 'POST', body: { answer: value } });

test('the handshake and the tool catalogue need no key', async () => {
  const connection = await connect();
  try {
    assert.deepEqual(connection.client.getServerVersion(), { name: 'herald', title: 'Herald', version: '1.0.0' });
    assert.equal(connection.client.getNegotiatedProtocolVersion(), '2025-11-25');
    assert.match(connection.client.getInstructions() ?? '', /ask_user asks and waits/);
    const { tools } = await connection.client.listTools();
    assert.deepEqual(
      tools.map((tool) => tool.name),
      TOOL_NAMES,
    );
    const ask = tools.find((tool) => tool.name === 'ask_user');
    assert.ok(ask?.description?.includes('wait_for_answer'));
    assert.deepEqual(ask?.inputSchema.required, ['question']);
    assert.deepEqual(Object.keys(ask?.inputSchema.properties ?? {}), ['question', 'type', 'options', 'context', 'placeholder', 'agentName', 'approvers', 'escalation', 'wait', 'timeoutMs']);
    assert.deepEqual((ask?.inputSchema.properties as Record<string, unknown>).timeoutMs, {
      type: 'integer',
      minimum: 1,
      maximum: 55_000,
      default: 30_000,
      description: 'How long to wait for the answer, in milliseconds (rounded up to whole seconds)',
    });
    const send = tools.find((tool) => tool.name === 'send_notification');
    assert.deepEqual(send?.inputSchema.required, ['title', 'body']);
    assert.deepEqual(send?.annotations, { title: 'Send a notification', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true });
  } finally {
    await connection.close();
  }
  // Stateless: no session id is handed out, and GET (a 2025 session stream) is not offered.
  const initialize = await rpc({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  assert.equal(initialize.status, 200);
  assert.equal(initialize.headers.get('mcp-session-id'), null);
  assert.equal((initialize.body.result as { protocolVersion: string }).protocolVersion, '2025-06-18');
  const stream = await call(gateway, '/api/mcp/mcp', { headers: { accept: 'text/event-stream' } });
  assert.equal(stream.status, 405);
  assert.equal(stream.headers.get('allow'), 'POST');
});

test('the 2025-03-26, 2025-06-18 and 2026-07-28 revisions negotiate, and tools work on each', async () => {
  const { apiKey } = await createWorkspace();
  for (const version of ['2025-03-26', '2025-06-18']) {
    const connection = await connect(apiKey, { supportedProtocolVersions: [version] });
    try {
      assert.equal(connection.client.getNegotiatedProtocolVersion(), version);
      assert.equal((await connection.client.listTools()).tools.length, TOOL_NAMES.length);
      const asked = await callTool(connection, 'ask_user', { question: `On ${version}?`, wait: false });
      assert.equal(asked.isError, false, JSON.stringify(asked.body));
      assert.equal(asked.body.status, 'pending');
    } finally {
      await connection.close();
    }
  }
  const modern = await connect(apiKey, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  try {
    assert.equal(modern.client.getNegotiatedProtocolVersion(), '2026-07-28');
    assert.deepEqual(
      (await modern.client.listTools()).tools.map((tool) => tool.name),
      TOOL_NAMES,
    );
    const asked = await callTool(modern, 'ask_user', { question: 'On 2026-07-28?', wait: false });
    assert.equal(asked.isError, false, JSON.stringify(asked.body));
    assert.equal(asked.body.status, 'pending');
  } finally {
    await modern.close();
  }
});

test('a tool call without a valid key is a 401 with the OAuth challenge; the metadata names the authorization server', async () => {
  const missing = await rpc(toolCall('send_notification', { title: 't', body: 'b' }));
  assert.equal(missing.status, 401);
  assert.equal(missing.headers.get('www-authenticate'), `Bearer resource_metadata="${RESOURCE_METADATA}"`);
  assert.equal(missing.body.code, 'unauthorized');
  assert.equal(missing.body.message, 'Calling a tool needs an API key: send "Authorization: Bearer pk_<id>.<secret>".');

  // A key REST refuses (here revoked before its first use) is refused the same way.
  const { workspaceId } = await createWorkspace();
  const revoked = await createKey(workspaceId, 'runtime');
  await admin('key', 'revoke', '--key', revoked.keyId);
  const refused = await rpc(toolCall('ask_user', { question: 'Still there?' }), revoked.apiKey);
  assert.equal(refused.status, 401);
  assert.equal(refused.headers.get('www-authenticate'), `Bearer resource_metadata="${RESOURCE_METADATA}", error="invalid_token"`);
  const rest = await call(gateway, `${SERVER_API}/identity`, { key: revoked.apiKey });
  assert.deepEqual(refused.body, rest.body);

  // The official client surfaces it as an authorization failure, not as a tool result.
  const connection = await connect();
  try {
    await assert.rejects(connection.client.callTool({ name: 'ask_user', arguments: { question: 'Hello?' } }), (err: Error) => /401|Unauthorized/i.test(`${err.name} ${err.message}`));
  } finally {
    await connection.close();
  }

  const metadata = await call(gateway, '/.well-known/oauth-protected-resource');
  assert.equal(metadata.status, 200);
  // No authorization server is configured here, so none is named (see test/security/mcp.test.ts).
  assert.deepEqual(metadata.body, {
    resource: ORIGIN,
    bearer_methods_supported: ['header'],
    scopes_supported: ['notifications:send', 'ask', 'campaigns', 'flows'],
    resource_name: 'Herald',
  });
});

test('the manifest at /.well-known/mcp', async () => {
  const manifest = await call<Record<string, unknown> & { tools: Array<Record<string, unknown>> }>(gateway, '/.well-known/mcp');
  assert.equal(manifest.status, 200);
  const { tools, ...rest } = manifest.body;
  assert.deepEqual(rest, {
    name: 'herald',
    title: 'Herald',
    version: '1.0.0',
    description: 'Reach a real person from an agent: push notifications, and questions that wait for a human answer (fail closed).',
    endpoint: `${ORIGIN}/api/mcp/mcp`,
    transport: { type: 'streamable-http', protocolVersions: ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07'], sessions: false },
    authentication: {
      type: 'bearer',
      header: 'Authorization',
      format: 'Bearer pk_<id>.<secret>',
      requiredFor: ['tools/call'],
      protectedResourceMetadata: RESOURCE_METADATA,
      authorizationServers: [],
    },
  });
  assert.deepEqual(
    tools.map((tool) => [tool.name, tool.scope]),
    [
      ['send_notification', 'notifications:send'],
      ['ask_user', 'ask'],
      ['wait_for_answer', 'ask'],
      ['cancel_question', 'ask'],
      ['get_question_events', 'ask'],
      ['create_campaign', 'campaigns'],
      ['send_campaign', 'campaigns'],
      ['get_campaign_stats', 'campaigns'],
      ['create_flow', 'flows'],
      ['list_flow_runs', 'flows'],
    ],
  );
  // The catalogue the manifest shows is the one tools/list serves.
  const connection = await connect();
  try {
    const listed = (await connection.client.listTools()).tools;
    for (const tool of tools) {
      const served = listed.find((candidate) => candidate.name === tool.name);
      assert.equal(served?.description, tool.description);
      assert.deepEqual(served?.inputSchema, tool.inputSchema);
    }
  } finally {
    await connection.close();
  }
});

test('send_notification sends through POST /send; the context is appended to the body', async () => {
  const { workspace } = audience;
  const runtime = await createKey(workspace.workspaceId, 'runtime');
  const connection = await connect(runtime.apiKey);
  try {
    const sent = await callTool(connection, 'send_notification', {
      title: 'Deploy finished',
      body: 'v2 is live.',
      url: 'https://shop.example.test/releases/2',
      context: 'All 412 checks passed.',
    });
    assert.equal(sent.isError, false, JSON.stringify(sent.body));
    assert.match(String(sent.body.campaignId), /^ntf_/);
    assert.deepEqual(sent.body, { success: true, status: 'queued', campaignId: sent.body.campaignId, sent: 1, limits: sent.body.limits, duplicate: false });
    const messages = await eventually(
      'the push service received the notification',
      async () => harness.peer.received().filter((message) => (JSON.parse(message.plaintext.toString()) as { notificationId: string }).notificationId === sent.body.campaignId),
      (found) => found.length === 1,
    );
    assert.ok(messages[0]);
    assert.deepEqual(harness.openPush(messages[0]).payload, {
      notificationId: sent.body.campaignId,
      title: 'Deploy finished',
      body: 'v2 is live.\n\nAll 412 checks passed.',
      url: 'https://shop.example.test/releases/2',
    });

    const tooLong = await callTool(connection, 'send_notification', { title: 't', body: 'b'.repeat(2_000), context: 'c'.repeat(100) });
    assert.equal(tooLong.isError, true);
    assert.equal(tooLong.body.code, 'invalid_request');
    assert.deepEqual(tooLong.body.fields, [{ field: 'context', in: 'arguments', problem: 'makes the body longer than 2048 characters' }]);
  } finally {
    await connection.close();
  }
});

test('arguments are checked as REST checks bodies: invalid_request naming each argument', async () => {
  const { apiKey } = await createWorkspace();
  const connection = await connect(apiKey);
  try {
    const invalid = async (name: string, args: Record<string, unknown>, fields: Array<{ field: string; problem: string }>) => {
      const result = await callTool(connection, name, args);
      assert.equal(result.isError, true);
      assert.equal(result.body.code, 'invalid_request');
      assert.equal(result.body.status, 400);
      assert.deepEqual(
        result.body.fields,
        fields.map((field) => ({ ...field, in: 'arguments' })),
      );
    };
    await invalid('ask_user', {}, [{ field: 'question', problem: 'is required' }]);
    await invalid('ask_user', { question: 'x'.repeat(501) }, [{ field: 'question', problem: 'must NOT have more than 500 characters' }]);
    await invalid('ask_user', { question: 'Sure?', timeoutMs: 55_001 }, [{ field: 'timeoutMs', problem: 'must be <= 55000' }]);
    await invalid('ask_user', { question: 'Sure?', timeoutMs: 0 }, [{ field: 'timeoutMs', problem: 'must be >= 1' }]);
    await invalid('ask_user', { question: 'Sure?', urgent: true }, [{ field: 'urgent', problem: 'is not allowed' }]);
    // A rule only the REST route knows comes back from it, named the same way.
    await invalid('ask_user', { question: 'Pick', type: 'select' }, [{ field: 'options', problem: 'is required for a select question' }]);
    await invalid('wait_for_answer', { correlationId: '' }, [{ field: 'correlationId', problem: 'must NOT have fewer than 1 characters' }]);
    await invalid('cancel_question', {}, [{ field: 'correlationId', problem: 'is required' }]);
    await invalid('get_question_events', { correlationId: 'ask_x', limit: 101 }, [{ field: 'limit', problem: 'must be <= 100' }]);
    await invalid('send_notification', { title: 't', body: 'b', url: 'ftp://example.test' }, [{ field: 'url', problem: 'must match pattern "^https?://[^\\s]+$"' }]);

    const unknown = await callTool(connection, 'wait_for_answer', { correlationId: 'ask_00000000000000000000000000000000', timeoutMs: 0 });
    assert.equal(unknown.isError, true);
    assert.equal(unknown.body.code, 'not_found');
  } finally {
    await connection.close();
  }
});

/** A runtime key calling a dashboard-only tool is refused as REST refuses it. */
async function assertRuntimeRefused(name: string, args: Record<string, unknown>): Promise<void> {
  const runtime = await createKey(audience.workspace.workspaceId, 'runtime');
  const limited = await connect(runtime.apiKey);
  try {
    const refused = await callTool(limited, name, args);
    assert.deepEqual([refused.isError, refused.body.code, refused.body.message], [true, 'forbidden', 'This key cannot access this endpoint']);
  } finally {
    await limited.close();
  }
}

test('campaign tools: create (and send at once), send, read the figures; REST errors and scopes come through', async () => {
  const { workspace } = audience;
  const connection = await connect(workspace.apiKey);
  try {
    const draft = await callTool(connection, 'create_campaign', { name: 'Weekly', title: 'This week', body: 'Three new things' });
    assert.equal(draft.isError, false, JSON.stringify(draft.body));
    assert.deepEqual([draft.body.status, draft.body.name], ['draft', 'Weekly']);
    const started = await callTool(connection, 'send_campaign', { campaignId: draft.body.id });
    assert.deepEqual([started.isError, started.body.status, started.body.totalTargeted], [false, 'sending', audience.subscribers.length]);
    const again = await callTool(connection, 'send_campaign', { campaignId: draft.body.id });
    assert.deepEqual([again.isError, again.body.code], [true, 'conflict']);

    const now = await callTool(connection, 'create_campaign', { name: 'Flash', title: 'Now', body: 'Only today', sendNow: true });
    assert.deepEqual([now.isError, now.body.status], [false, 'sending']);
    const stats = await eventually(
      'the flash campaign sent',
      async () => callTool(connection, 'get_campaign_stats', { campaignId: now.body.id }),
      (read) => read.body.totalSent === audience.subscribers.length,
    );
    assert.deepEqual(stats.body, { totalSent: audience.subscribers.length, totalDelivered: 0, totalClicked: 0, totalFailed: 0, deliveryRate: 0, clickRate: 0 });

    const bad = await callTool(connection, 'create_campaign', { name: 'No content' });
    assert.deepEqual([bad.isError, bad.body.code], [true, 'invalid_request']);
    const unknown = await callTool(connection, 'get_campaign_stats', { campaignId: 'cmp_nope' });
    assert.deepEqual([unknown.isError, unknown.body.code], [true, 'not_found']);
  } finally {
    await connection.close();
  }
  // Campaigns are for dashboard keys: a runtime key is refused as REST refuses it.
  await assertRuntimeRefused('create_campaign', { name: 'x', title: 't', body: 'b' });
});

test('flow tools: create (and activate at once), list the runs; REST errors and scopes come through', async () => {
  const { workspace } = audience;
  const connection = await connect(workspace.apiKey);
  try {
    const steps = [{ stepType: 'send_notification', config: { notification: { title: 'Welcome', body: 'Glad you are here' } } }, { stepType: 'exit', config: {} }];
    const draft = await callTool(connection, 'create_flow', { name: 'Welcome', triggerType: 'subscription', steps });
    assert.equal(draft.isError, false, JSON.stringify(draft.body));
    assert.deepEqual([draft.body.status, draft.body.name, (draft.body.steps as unknown[]).length], ['draft', 'Welcome', 2]);
    const active = await callTool(connection, 'create_flow', { name: 'Welcome now', triggerType: 'subscription', steps, activate: true });
    assert.deepEqual([active.isError, active.body.status], [false, 'active']);
    const runs = await callTool(connection, 'list_flow_runs', { flowId: active.body.id });
    assert.deepEqual([runs.isError, runs.body], [false, { data: [], hasMore: false, nextCursor: null }]);

    const empty = await callTool(connection, 'create_flow', { name: 'Empty', triggerType: 'subscription', activate: true });
    assert.deepEqual([empty.isError, empty.body.code], [true, 'conflict']);
    const bad = await callTool(connection, 'create_flow', { name: 'Bad', triggerType: 'subscription', steps: [{ stepType: 'delay', config: { delay: { value: 0, unit: 'days' } } }] });
    assert.deepEqual([bad.isError, bad.body.code, bad.body.fields], [true, 'invalid_request', [{ field: 'steps[0].config.delay.value', in: 'arguments', problem: 'must be greater than 0' }]]);
    const unknown = await callTool(connection, 'list_flow_runs', { flowId: 'flw_nope' });
    assert.deepEqual([unknown.isError, unknown.body.code], [true, 'not_found']);
  } finally {
    await connection.close();
  }
  // Flows are for dashboard keys: a runtime key is refused as REST refuses it.
  await assertRuntimeRefused('list_flow_runs', { flowId: 'flw_nope' });
});

test('scopes as REST: a runtime key sends and asks, a connector key sends but may not ask', async () => {
  const { workspace } = audience;
  const runtime = await createKey(workspace.workspaceId, 'runtime');
  const connector = await createKey(workspace.workspaceId, 'connector');
  for (const [key, mayAsk] of [
    [runtime.apiKey, true],
    [connector.apiKey, false],
  ] as const) {
    const connection = await connect(key);
    try {
      const sent = await callTool(connection, 'send_notification', { title: 'Scope', body: 'test' });
      assert.equal(sent.isError, false, JSON.stringify(sent.body));
      const asked = await callTool(connection, 'ask_user', { question: 'May I?', wait: false });
      if (mayAsk) {
        assert.equal(asked.isError, false, JSON.stringify(asked.body));
        assert.equal(asked.body.status, 'pending');
        assert.equal((await callTool(connection, 'cancel_question', { correlationId: asked.body.correlationId })).body.status, 'withdrawn');
      } else {
        assert.equal(asked.isError, true);
        assert.equal(asked.body.code, 'forbidden');
        assert.equal(asked.body.message, 'This key cannot access this endpoint');
        for (const name of ['wait_for_answer', 'cancel_question']) {
          const refused = await callTool(connection, name, { correlationId: 'ask_00000000000000000000000000000000' });
          assert.equal(refused.body.code, 'forbidden');
        }
      }
    } finally {
      await connection.close();
    }
  }
});

test('ask_user waits for the answer; after a time-out wait_for_answer picks it up; cancel_question withdraws', async () => {
  const { apiKey, workspaceId } = await createWorkspace();
  const connection = await connect(apiKey);
  try {
    // Answered within the wait: the call returns the value.
    const waiting = callTool(connection, 'ask_user', { question: 'Deploy to production?', context: 'All checks green.', agentName: 'ci-bot', timeoutMs: 20_000 });
    const id = await onlyQuestionId(workspaceId);
    const record = await call<{ liveUrl: string; status: string }>(gateway, `${SERVER_API}/ask/${id}`, { key: apiKey });
    assert.equal(record.body.status, 'pending');
    assert.equal((await answer(record.body.liveUrl, 'yes')).status, 200);
    const answered = await waiting;
    assert.equal(answered.isError, false);
    assert.deepEqual(answered.body, {
      correlationId: id,
      question: 'Deploy to production?',
      type: 'confirm',
      status: 'answered',
      answered: true,
      value: 'yes',
      options: [],
      context: 'All checks green.',
      placeholder: null,
      agentName: 'ci-bot',
      liveUrl: record.body.liveUrl,
      pollUrl: `${ORIGIN}/api/v1/server/ask/${id}`,
      expiresInSeconds: answered.body.expiresInSeconds,
      expiresAt: answered.body.expiresAt,
      createdAt: answered.body.createdAt,
      mode: 'browser',
      approvers: [],
      // Answered through its answer link, which names nobody.
      answeredBy: { kind: 'link', id: '', displayName: 'the holder of the answer link', channel: 'answer_page', at: (answered.body.answeredBy as { at: string }).at },
      escalation: [],
    });
    assert.match((answered.body.answeredBy as { at: string }).at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    // The wait ends first: a correlationId and a hint naming wait_for_answer.
    const select = await callTool(connection, 'ask_user', { question: 'Which region?', type: 'select', options: ['eu-west', 'us-east'], timeoutMs: 1_000 });
    assert.equal(select.isError, false);
    assert.equal(select.body.status, 'timeout');
    assert.equal(select.body.answered, false);
    assert.match(String(select.body.hint), /^No answer yet\. The question stays open for \d+ more seconds: call wait_for_answer with this correlationId/);
    const correlationId = String(select.body.correlationId);
    const stillOpen = await callTool(connection, 'wait_for_answer', { correlationId, timeoutMs: 0 });
    assert.equal(stillOpen.body.status, 'pending');
    const picked = callTool(connection, 'wait_for_answer', { correlationId, timeoutMs: 20_000 });
    await sleep(200);
    assert.equal((await answer(String(select.body.liveUrl), 'us-east')).status, 200);
    const result = await picked;
    assert.equal(result.body.status, 'answered');
    assert.equal(result.body.value, 'us-east');

    // Withdrawn, then no longer withdrawable: conflict, as REST says.
    const open = await callTool(connection, 'ask_user', { question: 'Still needed?', type: 'input', placeholder: 'why', wait: false });
    const withdrawn = await callTool(connection, 'cancel_question', { correlationId: open.body.correlationId });
    assert.equal(withdrawn.isError, false);
    assert.equal(withdrawn.body.status, 'withdrawn');
    const again = await callTool(connection, 'cancel_question', { correlationId: open.body.correlationId });
    assert.equal(again.isError, true);
    assert.equal(again.body.code, 'conflict');
    // Its record, through get_question_events: opened by the key, then withdrawn (recorded cancelled).
    const recorded = await callTool(connection, 'get_question_events', { correlationId: open.body.correlationId });
    assert.equal(recorded.isError, false);
    const entries = recorded.body.data as Array<{ kind: string; seq: number; prevHash: string; hash: string }>;
    assert.deepEqual(
      entries.filter((entry) => entry.kind !== 'delivered').map((entry) => entry.kind),
      ['opened', 'cancelled'],
    );
    assert.deepEqual([entries[0]?.seq, entries[0]?.prevHash, recorded.body.hasMore], [1, '', false]);
    const paged = await callTool(connection, 'get_question_events', { correlationId: open.body.correlationId, limit: 1 });
    assert.deepEqual([(paged.body.data as unknown[]).length, paged.body.hasMore], [1, true]);
    // Another workspace's question does not exist for this key.
    const other = await createWorkspace();
    const stranger = await connect(other.apiKey);
    try {
      assert.equal((await callTool(stranger, 'wait_for_answer', { correlationId, timeoutMs: 0 })).body.code, 'not_found');
      assert.equal((await callTool(stranger, 'get_question_events', { correlationId })).body.code, 'not_found');
    } finally {
      await stranger.close();
    }
  } finally {
    await connection.close();
  }
});

test('ask_user passes approvers and escalation: only an approver may answer, and the link the agent holds is refused', async () => {
  const { apiKey } = await createWorkspace();
  const connection = await connect(apiKey);
  try {
    const asked = await callTool(connection, 'ask_user', {
      question: 'Drop the staging database?',
      approvers: [{ kind: 'email', id: 'Ops@Example.com' }],
      escalation: [{ afterSeconds: 300, channels: ['email'], approvers: [{ kind: 'email', id: 'cto@example.com' }] }],
      wait: false,
    });
    assert.equal(asked.isError, false, JSON.stringify(asked.body));
    assert.deepEqual([asked.body.approvers, asked.body.answeredBy, asked.body.escalation], [
      [{ kind: 'email', id: 'ops@example.com' }],
      null,
      [{ afterSeconds: 300, channels: ['email'], approvers: [{ kind: 'email', id: 'cto@example.com' }] }],
    ]);
    const refused = await answer(String(asked.body.liveUrl), 'yes');
    assert.equal(refused.status, 403);
    assert.equal((refused.body as { code: string }).code, 'forbidden');
    const still = await callTool(connection, 'wait_for_answer', { correlationId: asked.body.correlationId, timeoutMs: 0 });
    assert.deepEqual([still.body.status, still.body.answeredBy], ['pending', null]);

    const invalid = await callTool(connection, 'ask_user', { question: 'Sure?', approvers: [{ kind: 'fax', id: '555' }], wait: false });
    assert.equal(invalid.isError, true);
    assert.equal(invalid.body.code, 'invalid_request');
    assert.deepEqual(
      (invalid.body.fields as Array<{ field: string; in: string }>).map(({ field, in: where }) => [field, where]),
      [['approvers.0.kind', 'arguments']],
    );
  } finally {
    await connection.close();
  }
});

test('rate limits are REST buckets: headers on tool calls, then rate_limited with Retry-After', async () => {
  const { apiKey } = await createWorkspace('free');
  // The free plan admits 100 requests a minute per key; REST and MCP draw on the same bucket.
  for (let batch = 0; batch < 9; batch += 1) {
    await Promise.all(Array.from({ length: 11 }, () => call(gateway, `${SERVER_API}/identity`, { key: apiKey })));
  }
  const last = await rpc(toolCall('wait_for_answer', { correlationId: 'ask_00000000000000000000000000000000', timeoutMs: 0 }), apiKey);
  assert.equal(last.status, 200);
  assert.equal(last.headers.get('x-ratelimit-limit'), '100');
  assert.equal(last.headers.get('x-ratelimit-remaining'), '0');
  assert.ok(Number(last.headers.get('x-ratelimit-reset')) > Date.now() / 1000);

  const limited = await rpc(toolCall('wait_for_answer', { correlationId: 'ask_00000000000000000000000000000000', timeoutMs: 0 }, 2), apiKey);
  assert.equal(limited.status, 200);
  assert.equal(limited.headers.get('x-ratelimit-remaining'), '0');
  const retryAfter = Number(limited.headers.get('retry-after'));
  assert.ok(retryAfter >= 1 && retryAfter <= 60);
  const result = limited.body.result as { isError: boolean; structuredContent: Record<string, unknown> };
  assert.equal(result.isError, true);
  assert.equal(result.structuredContent.code, 'rate_limited');
  assert.equal(result.structuredContent.status, 429);
  assert.equal(result.structuredContent.retryAfter, retryAfter);
  assert.equal(result.structuredContent.limit, 100);
});

/** One JSON-RPC POST from a chosen loopback address: the gateway sees that address as the client IP. */
function rpcFrom(url: string, localAddress: string, body: unknown, key?: string): Promise<{ status: number; headers: IncomingHttpHeaders; body: Record<string, unknown> }> {
  const target = new URL('/api/mcp/mcp', url);
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: 'POST',
        localAddress,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-06-18',
          ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
        },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: JSON.parse(text) as Record<string, unknown> }));
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

test('calls without a key are limited per client IP (their own bucket); keyed calls are not', async () => {
  const limitedGateway = await harness.stack.addGateway({ IP_RATE_LIMIT_PER_MINUTE: '3' });
  // A loopback address no other test uses, so the per-IP bucket starts empty.
  const client = `127.${1 + randomInt(254)}.${randomInt(256)}.${1 + randomInt(254)}`;
  const list = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
  for (let n = 1; n <= 3; n += 1) {
    const allowed = await rpcFrom(limitedGateway, client, list);
    assert.equal(allowed.status, 200);
    assert.equal(allowed.headers['x-ratelimit-limit'], '3');
    assert.equal(allowed.headers['x-ratelimit-remaining'], String(3 - n));
  }
  const refused = await rpcFrom(limitedGateway, client, list);
  assert.equal(refused.status, 429);
  assert.equal(refused.body.code, 'rate_limited');
  const retryAfter = Number(refused.headers['retry-after']);
  assert.ok(retryAfter >= 1 && retryAfter <= 60, String(retryAfter));
  const keyed = await rpcFrom(limitedGateway, client, list, audience.workspace.apiKey);
  assert.equal(keyed.status, 200);
  assert.equal((keyed.body.result as { tools: unknown[] }).tools.length, TOOL_NAMES.length);
});
