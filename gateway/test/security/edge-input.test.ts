import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  call,
  connectDatabase,
  createWorkspace,
  errorBody,
  eventually,
  pushSubscription,
  SERVER_API,
  startStack,
  type ApiResponse,
  type Stack,
  type TestWorkspace,
} from '@herald/testkit';

import { recordTried, reportTried } from './suite.js';

// Issue #22, findings 4 to 8 on REST: lone UTF-16 surrogates in every class of field, template
// placeholders that named the object prototype, callback URLs on IPv6 forms that embed a private
// IPv4, JSON nested 5,000 deep, and a client's X-Request-Id. Each is what the attacker sent, the
// exact refusal, and a check that nothing was stored.

let stack: Stack;
let growth: TestWorkspace;
let partner: TestWorkspace;
let subscriberId: string;

before(async () => {
  stack = await startStack({ decisions: true, services: ['campaign', 'flow'], gatewayEnv: { ALLOW_ANY_PUSH_SERVICE: 'true' } });
  [growth, partner] = await Promise.all([createWorkspace('growth'), createWorkspace('partner')]);
  const subscribed = await call<{ subscriberId: string }>(stack.gatewayUrl, '/api/v1/subscribe', {
    method: 'POST',
    key: growth.siteKey,
    headers: { origin: 'https://example.test' },
    body: pushSubscription(),
  });
  assert.equal(subscribed.status, 201, JSON.stringify(subscribed.body));
  subscriberId = subscribed.body.subscriberId;
  const patched = await call(stack.gatewayUrl, `${SERVER_API}/subscribers/${subscriberId}`, { method: 'PATCH', key: growth.apiKey, body: { externalId: 'victim', customData: { plan: 'gold' } } });
  assert.equal(patched.status, 200, JSON.stringify(patched.body));
});
after(async () => {
  reportTried('edge-input');
  await stack.stop();
});

const HINT = 'Fix the request as the message says and send it again.';
const SURROGATE = 'must not contain lone UTF-16 surrogates (\\uD800-\\uDFFF without its pair)';
const fieldRefusal = (fields: Array<{ field: string; problem: string }>) =>
  errorBody('invalid_request', 400, 'Invalid request', `Invalid request body: ${fields.map(({ field, problem }) => `${field} ${problem}`).join('; ')}.`, HINT, {
    fields: fields.map(({ field, problem }) => ({ field, in: 'body', problem })),
  });
const TOO_DEEP = errorBody('invalid_request', 400, 'Invalid JSON', 'The body nests objects and arrays deeper than 32 levels.', HINT);

async function send(kind: string, method: string, path: string, key: string, body: unknown): Promise<ApiResponse> {
  recordTried(kind);
  return call(stack.gatewayUrl, `${SERVER_API}${path}`, { method, key, body });
}

async function questionsOf(workspace: TestWorkspace): Promise<string[]> {
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<{ question: string }>('SELECT question FROM decision.questions WHERE workspace_id = $1 ORDER BY created_at', [workspace.workspaceId]);
    return rows.map((row) => row.question);
  } finally {
    await db.end();
  }
}

test('finding 4: the bound key made for victim\\udbff never reaches the decision opened for victim\\ud800: both are refused at the edge', async () => {
  const key = await send('lone surrogate', 'POST', '/keys', partner.apiKey, { externalId: 'victim\udbff' });
  assert.deepEqual([key.status, key.body], [400, fieldRefusal([{ field: 'externalId', problem: SURROGATE }])]);
  const decision = await send('lone surrogate', 'POST', '/decisions', partner.apiKey, { question: 'Wire $10,000?', externalId: 'victim\ud800' });
  assert.deepEqual([decision.status, decision.body], [400, fieldRefusal([{ field: 'externalId', problem: SURROGATE }])]);
  // Nothing was made: no key, no decision.
  const keys = await call<{ keys: unknown[] }>(stack.gatewayUrl, `${SERVER_API}/keys`, { key: partner.apiKey });
  assert.deepEqual(keys.body.keys, []);
  assert.deepEqual(await questionsOf(partner), []);
});

test('finding 4: a lone surrogate in any class of field is a 400 naming the field, and nothing changes', async () => {
  const cases: Array<[string, string, string, unknown, string, string?]> = [
    // jsonb: a subscriber's customData (value, and a property's name), a decision's parameters, a flow step's title.
    ['PATCH', `/subscribers/${subscriberId}`, growth.apiKey, { customData: { plan: 'platinum\ud800' } }, 'customData.plan'],
    ['PATCH', `/subscribers/${subscriberId}`, growth.apiKey, { customData: { ['tier\udc00']: 1 } }, 'customData.tier\udc00', `${SURROGATE} in its name`],
    ['POST', '/decisions', partner.apiKey, { question: 'Deploy?', parameters: { target: 'prod\udbff' } }, 'parameters.target'],
    [
      'POST',
      '/flows',
      growth.apiKey,
      { name: 'Welcome', triggerType: 'subscription', steps: [{ stepType: 'send_notification', config: { notification: { title: 'Hi \ud83d', body: 'Welcome' } } }] },
      'steps.0.config.notification.title',
    ],
    // text: ids and plain strings.
    ['PATCH', `/subscribers/${subscriberId}`, growth.apiKey, { externalId: 'victim\ud800' }, 'externalId'],
    ['PATCH', `/subscribers/${subscriberId}`, growth.apiKey, { tags: ['vip\udfff'] }, 'tags.0'],
    ['POST', '/ask', growth.apiKey, { question: 'Ship \udc00it?', wait: false }, 'question'],
    ['POST', '/templates', growth.apiKey, { name: 'T', title: 'Hello \ud800', body: 'B' }, 'title'],
  ];
  for (const [method, path, key, body, field, problem = SURROGATE] of cases) {
    const response = await send('lone surrogate', method, path, key, body);
    assert.deepEqual([response.status, response.body], [400, fieldRefusal([{ field, problem }])], `${method} ${path} ${field}`);
  }
  const subscriber = await call<Record<string, unknown>>(stack.gatewayUrl, `${SERVER_API}/subscribers/${subscriberId}`, { key: growth.apiKey });
  assert.deepEqual([subscriber.body.externalId, subscriber.body.customData, subscriber.body.tags], ['victim', { plan: 'gold' }, []]);
  assert.deepEqual((await call<{ data: unknown[] }>(stack.gatewayUrl, `${SERVER_API}/flows`, { key: growth.apiKey })).body.data, []);
  assert.deepEqual((await call<{ data: unknown[] }>(stack.gatewayUrl, `${SERVER_API}/templates`, { key: growth.apiKey })).body.data, []);
  assert.deepEqual(await questionsOf(growth), []);
  assert.deepEqual(await questionsOf(partner), []);
  // Paired surrogates (any character outside the BMP, escaped or not) are text like any other.
  const fine = await call<Record<string, unknown>>(stack.gatewayUrl, `${SERVER_API}/subscribers/${subscriberId}`, {
    method: 'PATCH',
    key: growth.apiKey,
    rawBody: '{"customData":{"plan":"gold","mood":"\\ud83d\\ude80 🚀"}}',
    headers: { 'content-type': 'application/json' },
  });
  assert.equal(fine.status, 200, JSON.stringify(fine.body));
  assert.deepEqual(fine.body.customData, { plan: 'gold', mood: '🚀 🚀' });
});

test('finding 5: placeholders read only own variables: {{toString}}, {{constructor}} and {{__proto__}} are the documented 400', async () => {
  const template = await call<{ id: string }>(stack.gatewayUrl, `${SERVER_API}/templates`, {
    method: 'POST',
    key: growth.apiKey,
    body: { name: 'Prototype', title: 'Hi {{toString}}', body: '{{__proto__}} and {{constructor}}' },
  });
  assert.equal(template.status, 201, JSON.stringify(template.body));
  const missing = (name: string, field: string) => ({ field: `variables.${name}`, problem: `is required by the template's ${field} ({{${name}}} has no default)` });
  const campaign = await send('placeholder naming the prototype', 'POST', '/campaigns', growth.apiKey, { name: 'Proto', templateId: template.body.id });
  assert.deepEqual([campaign.status, campaign.body], [400, fieldRefusal([missing('toString', 'title'), missing('__proto__', 'body'), missing('constructor', 'body')])]);
  // Given as variables, they are filled like any others (a "__proto__" key is refused as JSON, so that one stays missing).
  const given = await send('placeholder naming the prototype', 'POST', '/campaigns', growth.apiKey, { name: 'Own', templateId: template.body.id, variables: { toString: 'Ada', constructor: 'Grace' } });
  assert.deepEqual([given.status, given.body], [400, fieldRefusal([missing('__proto__', 'body')])]);
  const flow = await send('placeholder naming the prototype', 'POST', '/flows', growth.apiKey, {
    name: 'Proto',
    triggerType: 'subscription',
    steps: [{ stepType: 'send_notification', config: { templateId: template.body.id } }],
  });
  assert.equal(flow.status, 400, JSON.stringify(flow.body));
  assert.deepEqual(
    ((flow.body as { fields?: Array<{ field: string }> }).fields ?? []).map((entry) => entry.field),
    ['steps[0].config.variables.toString', 'steps[0].config.variables.__proto__', 'steps[0].config.variables.constructor'],
  );
  assert.deepEqual((await call<{ data: unknown[] }>(stack.gatewayUrl, `${SERVER_API}/campaigns`, { key: growth.apiKey })).body.data, []);
  assert.deepEqual((await call<{ data: unknown[] }>(stack.gatewayUrl, `${SERVER_API}/flows`, { key: growth.apiKey })).body.data, []);
});

test('finding 6: callback URLs on IPv6 forms that embed a private IPv4 are refused by the address they embed', async () => {
  const urls = [
    'https://[2002:7f00:1::]/hook', // 6to4 of 127.0.0.1
    'https://[2002:a9fe:a9fe::1]/latest/meta-data', // 6to4 of 169.254.169.254
    'https://[::ffff:0:127.0.0.1]/hook', // IPv4-translated
    'https://[::ffff:0:a00:1]/hook', // IPv4-translated 10.0.0.1, in hex
    'https://[2001::]/hook', // Teredo: server 0.0.0.0, client 255.255.255.255
    'https://[2001:0::]/hook',
    'https://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/hook', // Teredo: public server, client 10.0.0.1 (inverted)
    'https://[2001:0:7f00:1:8000:63bf:a247:27dd]/hook', // Teredo: server 127.0.0.1
    'https://[64:ff9b::127.0.0.1]/hook', // NAT64
    'https://[64:ff9b::a9fe:a9fe]/hook',
    'https://[64:ff9b:1::a00:1]/hook', // local-use NAT64
    'https://[::ffff:10.0.0.1]/hook', // IPv4-mapped
    'https://[::127.0.0.1]/hook', // IPv4-compatible
  ];
  for (const callbackUrl of urls) {
    const response = await send('callback URL on an IPv6 form embedding a private IPv4', 'POST', '/ask', growth.apiKey, { question: 'Call me back?', wait: false, callbackUrl });
    assert.deepEqual(
      [response.status, response.body],
      [400, fieldRefusal([{ field: 'callbackUrl', problem: 'must resolve to public addresses only (not private, loopback, link-local, CGNAT, multicast or unspecified)' }])],
      callbackUrl,
    );
  }
  assert.deepEqual(await questionsOf(growth), []);
});

test('finding 7: JSON nested 5,000 deep is a 400 on every JSON body; 32 levels pass', async () => {
  const deepObject = (levels: number) => {
    let value = '1';
    for (let level = 0; level < levels; level += 1) value = `{"a":${value}}`;
    return value;
  };
  const arrays = `${'['.repeat(5_000)}${']'.repeat(5_000)}`;
  const bodies: Array<[string, string, string, string]> = [
    ['PATCH', `/subscribers/${subscriberId}`, growth.apiKey, `{"customData":${deepObject(5_000)}}`],
    ['POST', '/decisions', partner.apiKey, `{"question":"q","parameters":${deepObject(5_000)}}`],
    ['POST', '/flows', growth.apiKey, `{"name":"n","triggerType":"subscription","steps":${arrays}}`],
    ['POST', '/ask', growth.apiKey, arrays],
    ['POST', '/send', growth.apiKey, `{"title":"t","body":"b","tags":${arrays}}`],
  ];
  for (const [method, path, key, rawBody] of bodies) {
    recordTried('deeply nested JSON');
    const response = await call(stack.gatewayUrl, `${SERVER_API}${path}`, { method, key, rawBody, headers: { 'content-type': 'application/json' } });
    assert.deepEqual([response.status, response.body], [400, TOO_DEEP], `${method} ${path}`);
  }
  // The public endpoints parse JSON the same way.
  recordTried('deeply nested JSON');
  const subscribe = await call(stack.gatewayUrl, '/api/v1/subscribe', { method: 'POST', key: growth.siteKey, headers: { origin: 'https://example.test', 'content-type': 'application/json' }, rawBody: arrays });
  assert.deepEqual([subscribe.status, (subscribe.body as { message?: string }).message], [400, TOO_DEEP.message]);
  // The boundary: the body and 31 objects in customData are 32 levels; one more is refused.
  const atLimit = await call(stack.gatewayUrl, `${SERVER_API}/subscribers/${subscriberId}`, { method: 'PATCH', key: growth.apiKey, rawBody: `{"customData":${deepObject(31)}}`, headers: { 'content-type': 'application/json' } });
  assert.equal(atLimit.status, 200, JSON.stringify(atLimit.body));
  const overLimit = await call(stack.gatewayUrl, `${SERVER_API}/subscribers/${subscriberId}`, { method: 'PATCH', key: growth.apiKey, rawBody: `{"customData":${deepObject(32)}}`, headers: { 'content-type': 'application/json' } });
  assert.deepEqual([overLimit.status, overLimit.body], [400, TOO_DEEP]);
  // Brackets inside strings are text, not nesting.
  const inText = await call(stack.gatewayUrl, `${SERVER_API}/subscribers/${subscriberId}`, { method: 'PATCH', key: growth.apiKey, body: { customData: { note: '[['.repeat(100) + '\\"{{' } } });
  assert.equal(inText.status, 200, JSON.stringify(inText.body));
  assert.deepEqual(await questionsOf(growth), []);
  assert.deepEqual((await call<{ data: unknown[] }>(stack.gatewayUrl, `${SERVER_API}/flows`, { key: growth.apiKey })).body.data, []);
});

test("finding 8: a client's X-Request-Id is never the server's request id; it is logged in a field of its own", async () => {
  const forged = 'forged-request-id-1';
  recordTried('forged X-Request-Id');
  const response = await call(stack.gatewayUrl, `${SERVER_API}/identity`, { key: growth.apiKey, headers: { 'x-request-id': forged } });
  assert.equal(response.status, 200);
  const serverId = response.headers.get('x-request-id') ?? '';
  assert.match(serverId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  const gateway = stack.gateways[0];
  assert.ok(gateway);
  const lines = await eventually(
    'the request logged',
    async () =>
      gateway
        .output()
        .split('\n')
        .filter((line) => line.includes(serverId) || line.includes(forged))
        .map((line) => JSON.parse(line) as { reqId?: string; clientRequestId?: string; msg?: string }),
    (found) => found.some((line) => line.msg === 'request completed'),
  );
  assert.ok(lines.length >= 2);
  for (const line of lines) assert.deepEqual([line.reqId, line.clientRequestId], [serverId, forged], JSON.stringify(line));
});
