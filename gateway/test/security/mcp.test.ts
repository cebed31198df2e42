import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, connectDatabase, createWorkspace, errorBody, startStack, type Stack, type TestWorkspace } from '@herald/testkit';

import { countingInRedis, freshClient, recordTried, reportTried, requestFrom, type RawAnswer } from './suite.js';

// Issue #22, findings 1, 4, 7 and 8 on MCP: what an attacker sent to /api/mcp/mcp, and the exact
// refusal. The per-IP limit counts an invalid credential like none, before any work, and a batch
// by its messages; a response has a size bound; lone surrogates and deep nesting are a 400; a
// browser page of another origin is a 403; the OAuth metadata names no authorization server
// unless one is configured.

let stack: Stack;
let workspace: TestWorkspace;

before(async () => {
  stack = await startStack({ decisions: true });
  workspace = await createWorkspace('growth');
});
after(async () => {
  reportTried('mcp');
  await stack.stop();
});

const LIST = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
const batchOf = (count: number) => Array.from({ length: count }, (_, index) => ({ ...LIST, id: index + 1 }));

/** A 2025-03-26 client's headers: batches allowed. */
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-03-26' };

/** One JSON-RPC POST from `localAddress`. */
const rpcFrom = (url: string, localAddress: string, body: unknown, headers: Record<string, string> = {}, rawBody?: string): Promise<RawAnswer> =>
  requestFrom(url, localAddress, 'POST', '/api/mcp/mcp', { ...MCP_HEADERS, ...headers }, rawBody ?? JSON.stringify(body));

const rateLimited = (answer: RawAnswer) => (answer.body as { code?: string }).code === 'rate_limited' && answer.status === 429;

test('finding 1: a garbage or unknown credential is limited per IP like no credential, before any work', async () => {
  const limited = await stack.addGateway({ IP_RATE_LIMIT_PER_MINUTE: '3' });
  await countingInRedis(limited, 'POST', '/api/mcp/mcp', 3, MCP_HEADERS, JSON.stringify(LIST));
  const credentials = {
    garbage: 'Bearer garbage',
    'unknown key': `Bearer pk_${'a'.repeat(16)}.${'b'.repeat(43)}`,
    'not Bearer': 'Basic dXNlcjpwYXNz',
  };
  for (const [kind, authorization] of Object.entries(credentials)) {
    const client = freshClient();
    for (let n = 1; n <= 3; n += 1) {
      recordTried('MCP request with an invalid credential');
      const allowed = await rpcFrom(limited, client, LIST, { authorization });
      assert.equal(allowed.status, 200, kind);
      assert.equal(allowed.headers['x-ratelimit-remaining'], String(3 - n), kind);
    }
    recordTried('MCP request with an invalid credential');
    const refused = await rpcFrom(limited, client, LIST, { authorization });
    assert.ok(rateLimited(refused), `${kind}: ${refused.status} ${JSON.stringify(refused.body)}`);
    // Over the limit, a tool call with that credential is refused by the limit, not looked at.
    const tool = await rpcFrom(limited, client, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'ask_user', arguments: { question: 'Now?' } } }, { authorization });
    assert.ok(rateLimited(tool), kind);
  }
  // Under the limit, a tool call with an invalid key is the 401 challenge, as before.
  const client = freshClient();
  const tool = await rpcFrom(limited, client, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'ask_user', arguments: { question: 'Now?' } } }, { authorization: credentials['unknown key'] });
  assert.equal(tool.status, 401);
  assert.equal((tool.body as { code?: string }).code, 'unauthorized');
  assert.match(String(tool.headers['www-authenticate']), /error="invalid_token"/);
  // A valid key is not counted per IP: the catalogue still answers from that exhausted address.
  for (let n = 0; n < 3; n += 1) await rpcFrom(limited, client, LIST);
  const keyed = await rpcFrom(limited, client, LIST, { authorization: `Bearer ${workspace.apiKey}` });
  assert.equal(keyed.status, 200);
  // Nothing was asked on the way.
  const db = await connectDatabase();
  try {
    assert.equal((await db.query('SELECT 1 FROM decision.questions WHERE workspace_id = $1', [workspace.workspaceId])).rowCount, 0);
  } finally {
    await db.end();
  }
});

test('finding 1: a batch counts as its number of messages; one larger than what is left is refused whole', async () => {
  const limited = await stack.addGateway({ IP_RATE_LIMIT_PER_MINUTE: '5' });
  await countingInRedis(limited, 'POST', '/api/mcp/mcp', 5, MCP_HEADERS, JSON.stringify(LIST));
  const client = freshClient();
  recordTried('MCP batch', 3);
  const three = await rpcFrom(limited, client, batchOf(3));
  assert.equal(three.status, 200);
  assert.equal((three.body as unknown[]).length, 3);
  assert.equal(three.headers['x-ratelimit-remaining'], '2');
  recordTried('MCP batch', 3);
  const tooMany = await rpcFrom(limited, client, batchOf(3));
  assert.ok(rateLimited(tooMany), JSON.stringify(tooMany.body));
  assert.equal(tooMany.headers['x-ratelimit-remaining'], '2');
  // What was left is still there for smaller requests.
  const two = await rpcFrom(limited, client, batchOf(2));
  assert.equal(two.status, 200);
  assert.equal(two.headers['x-ratelimit-remaining'], '0');
  // The attack as sent: a 100-message batch, from a fresh address with the default limit of 100 a
  // minute, is admitted once at most; the second is a 429.
  const defaultLimit = stack.gatewayUrl;
  const attacker = freshClient();
  recordTried('MCP batch', 200);
  const first = await rpcFrom(defaultLimit, attacker, batchOf(100));
  const second = await rpcFrom(defaultLimit, attacker, batchOf(100));
  assert.deepEqual([first.status, rateLimited(second)], [400, true]);
});

test('finding 1: a response larger than MCP_RESPONSE_LIMIT_BYTES is a 400 in the error shape', async () => {
  const bounded = await stack.addGateway({ MCP_RESPONSE_LIMIT_BYTES: '16384' });
  const client = freshClient();
  const one = await rpcFrom(bounded, client, LIST);
  assert.equal(one.status, 200);
  assert.ok(JSON.stringify(one.body).length < 16_384);
  recordTried('MCP batch', 2);
  const two = await rpcFrom(bounded, client, batchOf(2));
  assert.deepEqual(
    [two.status, two.body],
    [
      400,
      errorBody('invalid_request', 400, 'Response too large', 'The response would be larger than 16384 bytes; send fewer messages per batch.', 'Fix the request as the message says and send it again.'),
    ],
  );
});

test('findings 4 and 7 on MCP: lone surrogates and JSON nested 5,000 deep are a 400 naming the problem, never a 500', async () => {
  const client = freshClient();
  const key = { authorization: `Bearer ${workspace.apiKey}` };
  const deep = `${'['.repeat(5_000)}${']'.repeat(5_000)}`;
  const cases: Array<[string, string, unknown]> = [
    [
      'deeply nested JSON',
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask_user","arguments":{"question":"q","context":${deep}}}}`,
      errorBody('invalid_request', 400, 'Invalid JSON', 'The body nests objects and arrays deeper than 32 levels.', 'Fix the request as the message says and send it again.'),
    ],
    [
      'deeply nested JSON',
      deep,
      errorBody('invalid_request', 400, 'Invalid JSON', 'The body nests objects and arrays deeper than 32 levels.', 'Fix the request as the message says and send it again.'),
    ],
    [
      'lone surrogate',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask_user","arguments":{"question":"victim\\ud800"}}}',
      errorBody(
        'invalid_request',
        400,
        'Invalid request',
        'Invalid request body: params.arguments.question must not contain lone UTF-16 surrogates (\\uD800-\\uDFFF without its pair).',
        'Fix the request as the message says and send it again.',
        { fields: [{ field: 'params.arguments.question', in: 'body', problem: 'must not contain lone UTF-16 surrogates (\\uD800-\\uDFFF without its pair)' }] },
      ),
    ],
    [
      'lone surrogate',
      '{"jsonrpc":"2.0","id":1,"method":"tools/list\\udfff"}',
      errorBody(
        'invalid_request',
        400,
        'Invalid request',
        'Invalid request body: method must not contain lone UTF-16 surrogates (\\uD800-\\uDFFF without its pair).',
        'Fix the request as the message says and send it again.',
        { fields: [{ field: 'method', in: 'body', problem: 'must not contain lone UTF-16 surrogates (\\uD800-\\uDFFF without its pair)' }] },
      ),
    ],
  ];
  for (const [kind, raw, expected] of cases) {
    recordTried(`${kind} (MCP)`);
    const answer = await rpcFrom(stack.gatewayUrl, client, undefined, key, raw);
    assert.deepEqual([answer.status, answer.body], [400, expected], raw.slice(0, 60));
  }
  // A paired surrogate (an emoji written as an escape) is fine.
  const paired = await rpcFrom(stack.gatewayUrl, client, undefined, key, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask_user","arguments":{"question":"Ship it? \\ud83d\\ude80","wait":false}}}');
  assert.equal(paired.status, 200);
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<{ question: string }>('SELECT question FROM decision.questions WHERE workspace_id = $1', [workspace.workspaceId]);
    assert.deepEqual(
      rows.map((row) => row.question),
      ['Ship it? 🚀'],
    );
  } finally {
    await db.end();
  }
});

test("finding 8: a browser page of another origin is refused with 403; the public origin, configured origins and non-browser clients are served", async () => {
  const gateway = await stack.addGateway({ MCP_ALLOWED_ORIGINS: 'https://agents.example.test' });
  const client = freshClient();
  for (const origin of ['https://evil.example', 'http://localhost:8081', 'null', 'https://agents.example.test.evil.example']) {
    recordTried('MCP from a foreign Origin');
    const refused = await rpcFrom(gateway, client, LIST, { origin });
    assert.deepEqual(
      [refused.status, refused.body],
      [403, errorBody('forbidden', 403, 'Origin not allowed', `Origin ${origin} may not call MCP.`, 'Call MCP from a server, or add the origin to MCP_ALLOWED_ORIGINS.')],
      origin,
    );
  }
  const allowed: Array<Record<string, string>> = [{}, { origin: 'http://localhost:8080' }, { origin: 'https://agents.example.test' }];
  for (const headers of allowed) {
    const served = await rpcFrom(gateway, client, LIST, headers);
    assert.equal(served.status, 200, JSON.stringify(headers));
  }
  // An allowed origin the gateway cannot read stops it at start, naming the variable.
  await assert.rejects(
    stack.addGateway({ MCP_ALLOWED_ORIGINS: 'https://agents.example.test/path' }),
    (err: Error) =>
      err.message.includes('exited (78)') &&
      err.message.includes('MCP_ALLOWED_ORIGINS must be comma-separated origins such as https://app.example.com ("https://agents.example.test/path" is not one)'),
  );
});

test('finding 8: the protected resource metadata names an authorization server only when one is configured', async () => {
  const without = await call<Record<string, unknown>>(stack.gatewayUrl, '/.well-known/oauth-protected-resource');
  assert.equal(without.status, 200);
  assert.equal('authorization_servers' in without.body, false);
  const manifest = await call<{ authentication: { authorizationServers: string[] } }>(stack.gatewayUrl, '/.well-known/mcp');
  assert.deepEqual(manifest.body.authentication.authorizationServers, []);
  const configured = await stack.addGateway({ OAUTH_AUTHORIZATION_SERVER: 'https://auth.example.test' });
  const withServer = await call<Record<string, unknown>>(configured, '/.well-known/oauth-protected-resource');
  assert.deepEqual(withServer.body.authorization_servers, ['https://auth.example.test']);
});
