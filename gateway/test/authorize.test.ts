import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, connectDatabase, createKey, createWorkspace, freePort, SERVER_API, startStack, type Stack, type TestWorkspace } from '@herald/testkit';

// POST /authorize and the workspace Cedar policy (GET/PUT/DELETE /policy), end to end: gateway,
// policy service (two replicas), PostgreSQL.

let stack: Stack;
before(async () => {
  stack = await startStack({ policy: true });
});
after(() => stack.stop());

type Verdict = { verdict: string; policy: string | null; reason: string; authorizationId: string };
type PolicyDocument = { policy: string | null; version: number; updatedAt: string | null };

const authorize = (key: string, body: unknown, url = stack.gatewayUrl) => call<Verdict>(url, `${SERVER_API}/authorize`, { method: 'POST', key, body });
const putPolicy = (key: string, policy: string, url = stack.gatewayUrl) =>
  call<PolicyDocument & Record<string, unknown>>(url, `${SERVER_API}/policy`, { method: 'PUT', key, body: { policy } });
const getPolicy = (key: string) => call<PolicyDocument>(stack.gatewayUrl, `${SERVER_API}/policy`, { key });

async function partnerWorkspace(policy?: string): Promise<TestWorkspace> {
  const workspace = await createWorkspace('partner');
  if (policy !== undefined) {
    const put = await putPolicy(workspace.apiKey, policy);
    assert.equal(put.status, 200, JSON.stringify(put.body));
  }
  return workspace;
}

function assertVerdict(response: { status: number; body: Verdict }, verdict: string, policy: string | null, reason: string | RegExp): void {
  assert.equal(response.status, 200, JSON.stringify(response.body));
  const { authorizationId, ...rest } = response.body;
  assert.match(authorizationId, /^authz_[0-9a-f]{32}$/);
  if (typeof reason === 'string') assert.deepEqual(rest, { verdict, policy, reason });
  else {
    assert.deepEqual({ verdict: rest.verdict, policy: rest.policy }, { verdict, policy });
    assert.match(rest.reason, reason);
  }
}

const POLICY = `
@id("read-anything")
permit(principal, action == Herald::Action::"call", resource)
when { resource.name == "read_file" };

@id("deploy-staging")
permit(principal, action, resource)
when { resource.name == "deploy" && context.environment == "staging" };

@id("deploy-production-reviewed")
@requires_human
permit(principal, action, resource)
when { resource.name == "deploy" && context.environment == "production" };

@id("no-secrets")
forbid(principal, action, resource)
when { resource.name == "read_file" && resource.target like "*.env" };

@id("small-payments")
permit(principal, action, resource)
when { resource.name == "pay" && resource.hasTag("amount") && resource.getTag("amount").long <= 100 };

@id("own-user-only")
permit(principal, action, resource)
when { resource.name == "email" && principal.externalId == "user-1" };
`;

test('allow, deny, forbid over permit, requires_human, fail-closed evaluation, every verdict recorded', async () => {
  const workspace = await partnerWorkspace(POLICY);
  const key = workspace.apiKey;

  assertVerdict(await authorize(key, { toolName: 'read_file', toolTarget: 'README.md' }), 'allow', 'read-anything', 'permitted by policy read-anything');
  // No permit matches.
  assertVerdict(await authorize(key, { toolName: 'rm_rf', toolTarget: '/' }), 'deny', null, 'no policy permits this call');
  // A forbid wins over a matching permit.
  assertVerdict(await authorize(key, { toolName: 'read_file', toolTarget: 'prod.env' }), 'deny', 'no-secrets', 'forbidden by policy no-secrets');
  // A forbid that cannot be evaluated (no target: resource.target is missing) denies.
  assertVerdict(
    await authorize(key, { toolName: 'read_file' }),
    'deny',
    'no-secrets',
    'evaluation error in forbid policy no-secrets: `Herald::Tool::"read_file"` does not have the attribute `target`',
  );
  assertVerdict(await authorize(key, { toolName: 'deploy', environment: 'staging' }), 'allow', 'deploy-staging', 'permitted by policy deploy-staging');
  assertVerdict(
    await authorize(key, { toolName: 'deploy', environment: 'production', actor: 'ci-agent' }),
    'requires_human',
    'deploy-production-reviewed',
    'policy deploy-production-reviewed permits this call only after a person approves it',
  );
  // A missing attribute in a when clause: the permit does not apply, and the verdict says why.
  assertVerdict(
    await authorize(key, { toolName: 'deploy' }),
    'deny',
    'deploy-staging',
    /^evaluation error in policy deploy-staging: record does not have the attribute `environment`; no policy permits this call$/,
  );
  // Parameters are resource tags; a string where a number is expected is an evaluation error.
  assertVerdict(await authorize(key, { toolName: 'pay', parameters: { amount: 40, currency: 'EUR' } }), 'allow', 'small-payments', 'permitted by policy small-payments');
  assertVerdict(await authorize(key, { toolName: 'pay', parameters: { amount: 400 } }), 'deny', null, 'no policy permits this call');
  assertVerdict(await authorize(key, { toolName: 'pay', parameters: { amount: '40' } }), 'deny', 'small-payments', /^evaluation error in policy small-payments: /);
  assertVerdict(await authorize(key, { toolName: 'pay', parameters: { amount: null } }), 'deny', 'small-payments', /^evaluation error in policy small-payments: /);
  assertVerdict(await authorize(key, { toolName: 'email', externalId: 'user-1' }), 'allow', 'own-user-only', 'permitted by policy own-user-only');
  assertVerdict(await authorize(key, { toolName: 'email', externalId: 'user-2' }), 'deny', null, 'no policy permits this call');

  const db = await connectDatabase();
  try {
    const { rows } = await db.query(
      `SELECT id, key_id, request, verdict, policy_id, reason FROM policy.authorizations WHERE workspace_id = $1 ORDER BY created_at, id`,
      [workspace.workspaceId],
    );
    assert.equal(rows.length, 13);
    assert.ok(rows.every((row) => key.startsWith(`pk_${row.key_id}.`)), JSON.stringify(rows.map((row) => row.key_id)));
    const requiresHuman = rows.find((row) => row.verdict === 'requires_human');
    assert.deepEqual(
      { request: requiresHuman.request, policyId: requiresHuman.policy_id },
      { request: { toolName: 'deploy', environment: 'production', actor: 'ci-agent', parameters: {} }, policyId: 'deploy-production-reviewed' },
    );
    assert.deepEqual(
      rows.map((row) => row.verdict),
      ['allow', 'deny', 'deny', 'deny', 'allow', 'requires_human', 'deny', 'allow', 'deny', 'deny', 'deny', 'allow', 'deny'],
    );
  } finally {
    await db.end();
  }
});

test('a workspace without a policy denies everything; GET, PUT and DELETE manage it', async () => {
  const workspace = await partnerWorkspace();
  const key = workspace.apiKey;
  assertVerdict(await authorize(key, { toolName: 'read_file' }), 'deny', null, 'no policy');
  assert.deepEqual(await getPolicy(key).then((r) => [r.status, r.body]), [200, { policy: null, version: 0, updatedAt: null }]);

  const text = 'permit(principal, action, resource);';
  const put = await putPolicy(key, text);
  assert.equal(put.status, 200);
  assert.equal(put.body.policy, text);
  assert.equal(put.body.version, 1);
  assert.ok(put.body.updatedAt && !Number.isNaN(Date.parse(put.body.updatedAt)));
  assert.deepEqual((await getPolicy(key)).body, put.body);
  assertVerdict(await authorize(key, { toolName: 'anything' }), 'allow', 'policy0', 'permitted by policy policy0');

  const removed = await call<PolicyDocument>(stack.gatewayUrl, `${SERVER_API}/policy`, { method: 'DELETE', key });
  assert.equal(removed.status, 200);
  assert.deepEqual({ policy: removed.body.policy, version: removed.body.version }, { policy: null, version: 2 });
  assertVerdict(await authorize(key, { toolName: 'anything' }), 'deny', null, 'no policy');
});

test('a bad policy is rejected whole with 400 naming the problem, and the old one stays in force', async () => {
  const good = '@id("all") permit(principal, action, resource);';
  const workspace = await partnerWorkspace(good);
  const key = workspace.apiKey;

  // A syntax error: line and column from Cedar.
  const syntax = await putPolicy(key, 'permit(principal, action, resource);\nforbid(principal, action, resource)\n  when { resource.name == };');
  assert.equal(syntax.status, 400);
  assert.equal(syntax.body.code, 'invalid_request');
  assert.match(String(syntax.body.message), /^The policy is invalid at line 3, column 27: unexpected token `}`/);
  assert.equal((syntax.body.problems as { line: number }[])[0]?.line, 3);

  // Parses, but does not validate against Herald's schema (an attribute that does not exist).
  const unknown = await putPolicy(key, '@id("x")\npermit(principal, action, resource) when { resource.owner == "me" };');
  assert.equal(unknown.status, 400);
  assert.deepEqual(unknown.body, {
    error: 'Invalid policy',
    code: 'invalid_request',
    status: 400,
    message: 'The policy is invalid at line 2, column 44 (policy x): attribute `owner` on entity type `Herald::Tool` not found',
    hint: 'Nothing was changed: the previous policy stays in force. See the Herald Cedar schema in the documentation.',
    documentation: 'http://localhost:8080/docs/errors#invalid_request',
    problems: [{ message: 'attribute `owner` on entity type `Herald::Tool` not found', policyId: 'x', line: 2, column: 44, help: 'did you mean `name`?' }],
  });

  // An unknown entity type; the valid forbid beside it is not applied either.
  const mixed = await putPolicy(key, 'forbid(principal, action, resource);\npermit(principal is Herald::User, action, resource);');
  assert.equal(mixed.status, 400);
  assert.equal(mixed.body.message, 'The policy is invalid at line 2, column 21 (policy policy1): unrecognized entity type `Herald::User`');

  const duplicate = await putPolicy(key, '@id("a") permit(principal, action, resource);\n@id("a") forbid(principal, action, resource);');
  assert.equal(duplicate.status, 400);
  assert.equal(duplicate.body.message, 'The policy is invalid (policy a): two policies have the id "a"');

  const tooLarge = await putPolicy(key, `// ${'x'.repeat(65_536)}\n${good}`);
  assert.equal(tooLarge.status, 400);
  assert.equal(tooLarge.body.code, 'invalid_request');

  const current = await getPolicy(key);
  assert.deepEqual({ policy: current.body.policy, version: current.body.version }, { policy: good, version: 1 });
  assertVerdict(await authorize(key, { toolName: 'anything' }), 'allow', 'all', 'permitted by policy all');
});

test('the request body is validated: parameters are at most 32 scalars, unknown fields are refused', async () => {
  const workspace = await partnerWorkspace('permit(principal, action, resource);');
  const key = workspace.apiKey;
  const refused = async (body: unknown): Promise<Record<string, unknown>> => {
    const response = await authorize(key, body);
    assert.equal(response.status, 400, JSON.stringify(body));
    assert.equal((response.body as unknown as { code: string }).code, 'invalid_request');
    return response.body as unknown as Record<string, unknown>;
  };
  const fieldsOf = (body: Record<string, unknown>) => (body.fields as { field: string; problem: string }[]).map((field) => `${field.field} ${field.problem}`);
  assert.ok(fieldsOf(await refused({ toolName: 'x', parameters: { nested: { a: 1 } } })).includes('parameters.nested must match a schema in anyOf'));
  await refused({ toolName: 'x', parameters: { list: [1, 2] } });
  assert.deepEqual(await refused({ toolName: 'x', parameters: Object.fromEntries(Array.from({ length: 33 }, (_, index) => [`p${index}`, index])) }), {
    error: 'Invalid request',
    code: 'invalid_request',
    status: 400,
    message: 'Invalid request body: parameters must NOT have more than 32 properties.',
    hint: 'Fix the request as the message says and send it again.',
    documentation: 'http://localhost:8080/docs/errors#invalid_request',
    fields: [{ field: 'parameters', in: 'body', problem: 'must NOT have more than 32 properties' }],
  });
  await refused({ toolName: 'x', parameters: { ['k'.repeat(65)]: 1 } });
  await refused({ toolName: 'x', parameters: { long: 'v'.repeat(1_001) } });
  assert.deepEqual(fieldsOf(await refused({ toolName: 'x', surprise: true })), ['surprise is not allowed']);
  await refused({ toolName: '' });
  await refused({ toolName: 't'.repeat(201) });
  await refused({ parameters: {} });
  assertVerdict(
    await authorize(key, { toolName: 'x', parameters: Object.fromEntries(Array.from({ length: 32 }, (_, index) => [`p${index}`, index % 2 ? 'v' : null])) }),
    'allow',
    'policy0',
    'permitted by policy policy0',
  );
});

test('bound keys evaluate only for their own end-user and cannot manage the policy; connector keys cannot authorize', async () => {
  const workspace = await partnerWorkspace('@id("user-1-only") permit(principal, action, resource) when { principal.externalId == "user-1" };');
  const bound = (await createKey(workspace.workspaceId, 'bound', '--external-id', 'user-1')).apiKey;
  const connector = (await createKey(workspace.workspaceId, 'connector')).apiKey;

  assertVerdict(await authorize(bound, { toolName: 'x' }), 'allow', 'user-1-only', 'permitted by policy user-1-only');
  assertVerdict(await authorize(bound, { toolName: 'x', externalId: 'user-1' }), 'allow', 'user-1-only', 'permitted by policy user-1-only');
  const other = await authorize(bound, { toolName: 'x', externalId: 'user-2' });
  assert.equal(other.status, 403);
  assert.deepEqual(
    { code: (other.body as unknown as { code: string }).code, message: (other.body as unknown as { message: string }).message },
    { code: 'forbidden', message: 'This key may only evaluate policy for its own end-user.' },
  );

  for (const [method, body] of [['GET', undefined], ['PUT', { policy: 'permit(principal, action, resource);' }], ['DELETE', undefined]] as const) {
    const response = await call(stack.gatewayUrl, `${SERVER_API}/policy`, { method, key: bound, body });
    assert.equal(response.status, 403, method);
    assert.deepEqual([response.body.code, response.body.message], ['forbidden', 'This key cannot access this endpoint']);
  }
  const fromConnector = await authorize(connector, { toolName: 'x' });
  assert.equal(fromConnector.status, 403);
  assert.deepEqual([fromConnector.body as unknown as Record<string, unknown>].map((b) => [b.code, b.message])[0], ['forbidden', 'This key cannot access this endpoint']);

  // The rejected calls were never evaluated.
  const db = await connectDatabase();
  try {
    const { rows } = await db.query(`SELECT request->>'externalId' AS external_id FROM policy.authorizations WHERE workspace_id = $1`, [workspace.workspaceId]);
    assert.deepEqual(rows.map((row) => row.external_id), ['user-1', 'user-1']);
  } finally {
    await db.end();
  }
});

test('a PUT on one policy replica is in force on another at once', async () => {
  const port = await freePort();
  await stack.startService('policy', { GRPC_PORT: String(port) });
  const secondGateway = await stack.addGateway({ POLICY_GRPC_URL: `127.0.0.1:${port}` });
  const workspace = await partnerWorkspace('@id("v1") permit(principal, action, resource) when { resource.name == "a" };');
  const key = workspace.apiKey;
  // Both replicas have v1 preparsed.
  for (const url of [stack.gatewayUrl, secondGateway]) {
    assertVerdict(await authorize(key, { toolName: 'a' }, url), 'allow', 'v1', 'permitted by policy v1');
    assertVerdict(await authorize(key, { toolName: 'b' }, url), 'deny', null, 'no policy permits this call');
  }
  // Written through the first replica, evaluated on the second with the very next request.
  assert.equal((await putPolicy(key, '@id("v2") permit(principal, action, resource) when { resource.name == "b" };')).status, 200);
  assertVerdict(await authorize(key, { toolName: 'b' }, secondGateway), 'allow', 'v2', 'permitted by policy v2');
  assertVerdict(await authorize(key, { toolName: 'a' }, secondGateway), 'deny', null, 'no policy permits this call');
  // And the other way round, including removal.
  assert.equal((await call(secondGateway, `${SERVER_API}/policy`, { method: 'DELETE', key })).status, 200);
  assertVerdict(await authorize(key, { toolName: 'b' }), 'deny', null, 'no policy');
});
