import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { admin, call, connectDatabase, createKey, createWorkspace, SAMPLE_POLICY, SERVER_API, startStack, type Stack, type TestWorkspace } from '@herald/testkit';

import { memberSessions, newAddress } from './member-sessions.js';

// The policy's past versions (GET /policy/versions, /policy/versions/{version}) and "try it"
// (POST /policy/evaluate) end to end: gateway, policy service, PostgreSQL; keys and members' sessions.

let stack: Stack | undefined;
const running = () => {
  if (!stack) throw new Error('the stack starts before the first test');
  return stack;
};
before(async () => {
  stack = await startStack({ policy: true });
});
after(() => stack?.stop());

const sessions = memberSessions(() => running().gatewayUrl);

type Json = Record<string, unknown>;
const as = (key: string, method: string, path: string, body?: unknown) => call<Json>(running().gatewayUrl, `${SERVER_API}${path}`, { method, key, body });
const DOCS = 'http://localhost:8080/docs/errors';

function assertRecent(at: unknown): void {
  assert.equal(typeof at, 'string');
  const ms = Date.parse(String(at));
  assert.ok(Math.abs(Date.now() - ms) < 60_000, String(at));
}

test('every PUT and DELETE keeps its document as a version: listed newest first with who and when, paged, each readable; a refused PUT keeps none', async () => {
  const workspace = await createWorkspace('growth');
  const key = workspace.apiKey;
  const changedBy = { kind: 'key', id: workspace.keyId };
  assert.deepEqual(await as(key, 'GET', '/policy/versions').then((r) => [r.status, r.body]), [200, { data: [], hasMore: false, nextCursor: null }]);

  const texts = ['@id("v1") permit(principal, action, resource);', '@id("v2") forbid(principal, action, resource);', null, SAMPLE_POLICY];
  for (const text of texts) {
    const response = text === null ? await as(key, 'DELETE', '/policy') : await as(key, 'PUT', '/policy', { policy: text });
    assert.equal(response.status, 200, JSON.stringify(response.body));
  }
  // Refused whole: no version.
  assert.equal((await as(key, 'PUT', '/policy', { policy: 'permit(principal, action, resource' })).status, 400);

  const all = await as(key, 'GET', '/policy/versions');
  assert.equal(all.status, 200);
  const data = all.body.data as Json[];
  assert.deepEqual(
    data.map(({ createdAt: _at, ...rest }) => rest),
    [
      { version: 4, deleted: false, changedBy },
      { version: 3, deleted: true, changedBy },
      { version: 2, deleted: false, changedBy },
      { version: 1, deleted: false, changedBy },
    ],
  );
  data.forEach((version) => assertRecent(version.createdAt));
  assert.deepEqual([all.body.hasMore, all.body.nextCursor], [false, null]);
  // The newest is the one in force.
  const current = await as(key, 'GET', '/policy');
  assert.deepEqual([current.body.version, current.body.updatedAt], [4, data[0]?.createdAt]);

  // Two at a time.
  const first = await as(key, 'GET', '/policy/versions?limit=2');
  assert.deepEqual([(first.body.data as Json[]).map((v) => v.version), first.body.hasMore], [[4, 3], true]);
  assert.equal(typeof first.body.nextCursor, 'string');
  const second = await as(key, 'GET', `/policy/versions?limit=2&cursor=${String(first.body.nextCursor)}`);
  assert.deepEqual([(second.body.data as Json[]).map((v) => v.version), second.body.hasMore, second.body.nextCursor], [[2, 1], false, null]);

  // Each version with its text; a deleted one has none.
  for (const [index, text] of texts.entries()) {
    const version = index + 1;
    const one = await as(key, 'GET', `/policy/versions/${version}`);
    assert.equal(one.status, 200);
    assert.deepEqual(one.body, { version, deleted: text === null, changedBy, createdAt: data[texts.length - version]?.createdAt, policy: text });
  }
});

test('versions are the workspace\'s own: another workspace\'s version number is 404; unknown versions 404; bad versions, limits and cursors 400', async () => {
  const [owner, other] = await Promise.all([createWorkspace('growth'), createWorkspace('growth')]);
  for (const text of ['permit(principal, action, resource);', 'forbid(principal, action, resource);']) assert.equal((await as(owner.apiKey, 'PUT', '/policy', { policy: text })).status, 200);
  assert.equal((await as(other.apiKey, 'PUT', '/policy', { policy: 'permit(principal, action, resource);' })).status, 200);

  const notFound = (version: number) => ({
    error: 'Not found',
    code: 'not_found',
    status: 404,
    message: `No version ${version} of this workspace's policy.`,
    hint: 'Check the path and the identifier.',
    documentation: `${DOCS}#not_found`,
  });
  const missing = await as(other.apiKey, 'GET', '/policy/versions/2');
  assert.deepEqual([missing.status, missing.body], [404, notFound(2)]);
  assert.deepEqual((await as(owner.apiKey, 'GET', '/policy/versions/3')).body, notFound(3));
  // Each workspace's version 1 is its own.
  assert.equal((await as(other.apiKey, 'GET', '/policy/versions/1')).body.policy, 'permit(principal, action, resource);');
  assert.equal((await as(owner.apiKey, 'GET', '/policy/versions/1')).body.policy, 'permit(principal, action, resource);');
  assert.deepEqual(((await as(other.apiKey, 'GET', '/policy/versions')).body.data as Json[]).map((v) => v.version), [1]);

  const invalid = async (path: string, field: string) => {
    const response = await as(owner.apiKey, 'GET', path);
    assert.equal(response.status, 400, path);
    assert.equal(response.body.code, 'invalid_request', path);
    assert.deepEqual((response.body.fields as Json[]).map((entry) => entry.field), [field], `${path}: ${JSON.stringify(response.body)}`);
  };
  await invalid('/policy/versions/0', 'version');
  await invalid('/policy/versions/abc', 'version');
  await invalid('/policy/versions/1.5', 'version');
  await invalid('/policy/versions?limit=0', 'limit');
  await invalid('/policy/versions?limit=101', 'limit');
  await invalid('/policy/versions?cursor=not-a-cursor', 'cursor');
  // Well formed, but another list's (a template's position): not a version's.
  await invalid(`/policy/versions?cursor=${Buffer.from('v1:1700000000000000:tpl_1').toString('base64url')}`, 'cursor');
  await invalid('/policy/versions?unknown=1', 'unknown');
});

test('POST /policy/evaluate tries a call against a draft or the saved policy, records nothing, and refuses an invalid draft with its problems at their line and column', async () => {
  const workspace = await createWorkspace('growth');
  const key = workspace.apiKey;
  const evaluate = (body: Json) => as(key, 'POST', '/policy/evaluate', body);

  // Nothing saved: everything denied.
  assert.deepEqual((await evaluate({ toolName: 'read_file', toolTarget: 'a.txt' })).body, { verdict: 'deny', policy: null, reason: 'no policy', version: 0 });
  // A draft, not saved: each verdict as it says.
  const draft = (body: Json) => evaluate({ policy: SAMPLE_POLICY, ...body });
  assert.deepEqual((await draft({ toolName: 'read_file', toolTarget: 'a.txt' })).body, { verdict: 'allow', policy: 'read-anything', reason: 'permitted by policy read-anything', version: null });
  assert.deepEqual((await draft({ toolName: 'read_file', toolTarget: 'prod.env' })).body, { verdict: 'deny', policy: 'no-secrets', reason: 'forbidden by policy no-secrets', version: null });
  assert.deepEqual((await draft({ toolName: 'deploy', environment: 'production', actor: 'ci', parameters: { ref: 'main' } })).body, {
    verdict: 'requires_human',
    policy: 'deploy-reviewed',
    reason: 'policy deploy-reviewed permits this call only after a person approves it',
    version: null,
  });
  assert.deepEqual((await as(key, 'GET', '/policy')).body.version, 0);

  // Saved, then evaluated as saved (its version named).
  assert.equal((await as(key, 'PUT', '/policy', { policy: SAMPLE_POLICY })).status, 200);
  assert.deepEqual((await evaluate({ toolName: 'deploy', environment: 'staging' })).body, { verdict: 'deny', policy: null, reason: 'no policy permits this call', version: 1 });
  assert.deepEqual((await evaluate({ toolName: 'read_file', toolTarget: 'b.txt' })).body, { verdict: 'allow', policy: 'read-anything', reason: 'permitted by policy read-anything', version: 1 });

  // An invalid draft: 400 with every problem at its line and column; nothing changes.
  const bad = await evaluate({ policy: '@id("x")\npermit(principal, action, resource) when { resource.owner == "me" };', toolName: 'read_file' });
  assert.deepEqual([bad.status, bad.body], [
    400,
    {
      error: 'Invalid policy',
      code: 'invalid_request',
      status: 400,
      message: 'The policy is invalid at line 2, column 44 (policy x): attribute `owner` on entity type `Herald::Tool` not found',
      hint: 'Nothing was changed: the previous policy stays in force. See the Herald Cedar schema in the documentation.',
      documentation: `${DOCS}#invalid_request`,
      problems: [{ message: 'attribute `owner` on entity type `Herald::Tool` not found', policyId: 'x', line: 2, column: 44, help: 'did you mean `name`?' }],
    },
  ]);
  const syntax = await evaluate({ policy: 'permit(principal, action, resource);\nforbid(principal, action, resource)\n  when { resource.name == };', toolName: 'x' });
  assert.equal(syntax.status, 400);
  assert.deepEqual((syntax.body.problems as Json[]).map(({ line, column }) => ({ line, column })), [{ line: 3, column: 27 }]);
  const tooLarge = await evaluate({ policy: `// ${'é'.repeat(40_000)}\npermit(principal, action, resource);`, toolName: 'x' });
  assert.deepEqual([tooLarge.status, tooLarge.body.error, tooLarge.body.message], [400, 'Policy too large', 'The policy is 80040 bytes; at most 65536 are allowed.']);

  // The body is validated like POST /authorize's.
  for (const [body, field] of [
    [{}, 'toolName'],
    [{ toolName: '' }, 'toolName'],
    [{ toolName: 'x', extra: true }, 'extra'],
    [{ toolName: 'x', policy: 'x'.repeat(65_537) }, 'policy'],
    [{ toolName: 'x', parameters: { nested: { no: 1 } } }, 'parameters.nested'],
  ] as const) {
    const response = await evaluate(body);
    assert.equal(response.status, 400, JSON.stringify(body));
    assert.equal(response.body.code, 'invalid_request');
    assert.ok((response.body.fields as Json[]).some((entry) => String(entry.field).startsWith(field)), `${field}: ${JSON.stringify(response.body.fields)}`);
  }

  // Try-it records no authorization.
  const db = await connectDatabase();
  try {
    const { rows } = await db.query('SELECT count(*)::int AS n FROM policy.authorizations WHERE workspace_id = $1', [workspace.workspaceId]);
    assert.deepEqual(rows, [{ n: 0 }]);
  } finally {
    await db.end();
  }
});

test('members: an admin\'s change is recorded as theirs; a viewer reads the versions but the API refuses their PUT, DELETE and try-it (403); a bound key reaches none of it', async () => {
  const workspace: TestWorkspace = await createWorkspace('partner');
  const invite = (role: string) => admin<{ memberId: string; signInUrl: string }>('member', 'invite', '--workspace', workspace.workspaceId, '--email', newAddress(role), '--role', role);
  const [adminInvite, viewerInvite] = [await invite('admin'), await invite('viewer')];
  const adminSession = await sessions.signInWith(adminInvite.signInUrl);
  const viewer = await sessions.signInWith(viewerInvite.signInUrl);

  const put = await sessions.withSession(adminSession, `${SERVER_API}/policy`, { method: 'PUT', body: { policy: 'permit(principal, action, resource);' } });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  const listed = await sessions.withSession(viewer, `${SERVER_API}/policy/versions`);
  assert.equal(listed.status, 200);
  assert.deepEqual(((listed.body.data as Json[])[0] as Json).changedBy, { kind: 'member', id: adminInvite.memberId });
  assert.equal((await sessions.withSession(viewer, `${SERVER_API}/policy/versions/1`)).body.policy, 'permit(principal, action, resource);');

  const refused = {
    error: 'Permission denied',
    code: 'forbidden',
    status: 403,
    message: 'Your role cannot access this endpoint',
    hint: 'Members with the role "viewer" cannot change "policy"; ask an owner or admin.',
    documentation: `${DOCS}#forbidden`,
  };
  for (const [method, path, body] of [
    ['PUT', '/policy', { policy: 'forbid(principal, action, resource);' }],
    ['DELETE', '/policy', undefined],
    ['POST', '/policy/evaluate', { toolName: 'x' }],
  ] as const) {
    const response = await sessions.withSession(viewer, `${SERVER_API}${path}`, { method, ...(body === undefined ? {} : { body }) });
    assert.deepEqual([response.status, response.body], [403, refused], `${method} ${path}`);
  }
  const after = await as(workspace.apiKey, 'GET', '/policy');
  assert.deepEqual([after.body.policy, after.body.version], ['permit(principal, action, resource);', 1]);

  // An admin's try-it runs as the member (principal.key is the member id).
  const tried = await sessions.withSession(adminSession, `${SERVER_API}/policy/evaluate`, {
    method: 'POST',
    body: { policy: 'permit(principal, action, resource) when { principal.origin == "session" };', toolName: 'x' },
  });
  assert.deepEqual([tried.status, tried.body.verdict], [200, 'allow']);

  const bound = (await createKey(workspace.workspaceId, 'bound', '--external-id', 'user-1')).apiKey;
  for (const [method, path] of [['GET', '/policy/versions'], ['GET', '/policy/versions/1'], ['POST', '/policy/evaluate']] as const) {
    const response = await as(bound, method, path, method === 'POST' ? { toolName: 'x' } : undefined);
    assert.deepEqual([response.status, response.body.code], [403, 'forbidden'], `${method} ${path}`);
  }
});
