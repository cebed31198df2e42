import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { admin, call, createKey, createWorkspace, errorBody, SERVER_API, startStack, type Stack } from '@herald/testkit';

import { memberSessions } from './member-sessions.js';

// GET /workspace and PATCH /workspace (the approval mode), through HTTP: exact bodies, the scope
// and role checks, tenant isolation, and the mode reaching the questions opened after the change.

let stack: Stack;
before(async () => {
  // Verified keys are not cached: a key's next call carries the workspace's new mode.
  stack = await startStack({ decisions: true, gatewayEnv: { KEY_CACHE_TTL_MS: '0' } });
});
after(() => stack.stop());

const { withSession, signInWith } = memberSessions(() => stack.gatewayUrl);

const path = `${SERVER_API}/workspace`;
const read = (key: string) => call<Record<string, unknown>>(stack.gatewayUrl, path, { key });
const change = (key: string, body: unknown) => call<Record<string, unknown>>(stack.gatewayUrl, path, { method: 'PATCH', key, body });

test('GET /workspace names the workspace, its plan and approval mode; PATCH changes the mode, and questions opened after it carry it', async () => {
  const workspace = await createWorkspace('growth');
  const before = await read(workspace.apiKey);
  assert.equal(before.status, 200);
  const { name, createdAt } = before.body;
  assert.equal(typeof name, 'string');
  assert.ok(Date.parse(String(createdAt)) > 0);
  assert.deepEqual(before.body, { id: workspace.workspaceId, name, plan: 'growth', approvalMode: 'browser', createdAt });

  const changed = await change(workspace.apiKey, { approvalMode: 'terminal' });
  assert.equal(changed.status, 200);
  assert.deepEqual(changed.body, { id: workspace.workspaceId, name, plan: 'growth', approvalMode: 'terminal', createdAt });
  assert.deepEqual((await read(workspace.apiKey)).body, changed.body);

  const decision = await call<{ mode: string }>(stack.gatewayUrl, `${SERVER_API}/decisions`, { method: 'POST', key: workspace.apiKey, body: { question: 'Deploy?', agentName: 'release-bot' } });
  assert.equal(decision.status, 200, JSON.stringify(decision.body));
  assert.equal(decision.body.mode, 'terminal');

  // Back to browser; the same value again is a no-op answering the same record.
  assert.equal((await change(workspace.apiKey, { approvalMode: 'browser' })).body.approvalMode, 'browser');
  assert.deepEqual((await change(workspace.apiKey, { approvalMode: 'browser' })).body, before.body);
});

test('PATCH /workspace refuses an unknown mode, a missing one and other fields (400 naming the field), and changes nothing', async () => {
  const workspace = await createWorkspace();
  for (const [body, field] of [
    [{ approvalMode: 'phone' }, 'approvalMode'],
    [{}, 'approvalMode'],
    [{ approvalMode: 'terminal', name: 'Renamed' }, 'name'],
  ] as const) {
    const refused = await change(workspace.apiKey, body);
    assert.equal(refused.status, 400, JSON.stringify(body));
    assert.equal(refused.body.code, 'invalid_request');
    assert.deepEqual(
      (refused.body.fields as Array<{ field: string; in: string }>).map(({ field: named, in: where }) => [named, where]),
      [[field, 'body']],
      JSON.stringify(refused.body),
    );
  }
  assert.equal((await read(workspace.apiKey)).body.approvalMode, 'browser');
});

test("a key changes only its own workspace's mode; a runtime key reads it but may not change it (403)", async () => {
  const [one, other] = await Promise.all([createWorkspace(), createWorkspace()]);
  assert.equal((await change(one.apiKey, { approvalMode: 'terminal' })).status, 200);
  const otherRead = await read(other.apiKey);
  assert.deepEqual([otherRead.body.id, otherRead.body.approvalMode], [other.workspaceId, 'browser']);

  const runtime = await createKey(other.workspaceId, 'runtime');
  assert.equal((await read(runtime.apiKey)).status, 200);
  const refused = await change(runtime.apiKey, { approvalMode: 'terminal' });
  assert.equal(refused.status, 403);
  assert.equal(refused.body.code, 'forbidden');
  assert.equal((await read(other.apiKey)).body.approvalMode, 'browser');
});

test('members: an admin changes the mode with their session; a viewer reads it and is refused the change (403)', async () => {
  const workspace = await createWorkspace('partner');
  const session = async (role: string) => {
    const invited = await admin<{ signInUrl: string }>('member', 'invite', '--workspace', workspace.workspaceId, '--email', `${role}-${process.pid}@example.test`, '--role', role);
    return signInWith(invited.signInUrl);
  };
  const [adminSession, viewer] = [await session('admin'), await session('viewer')];

  const viewed = await withSession(viewer, path);
  assert.deepEqual([viewed.status, viewed.body.approvalMode], [200, 'browser']);
  const refused = await withSession(viewer, path, { method: 'PATCH', body: { approvalMode: 'terminal' } });
  assert.deepEqual(refused, {
    ...refused,
    status: 403,
    body: errorBody('forbidden', 403, 'Permission denied', 'Your role cannot access this endpoint', 'Members with the role "viewer" cannot change "webhooks"; ask an owner or admin.'),
  });

  const changed = await withSession(adminSession, path, { method: 'PATCH', body: { approvalMode: 'terminal' } });
  assert.deepEqual([changed.status, changed.body.approvalMode], [200, 'terminal']);
  assert.equal((await withSession(viewer, path)).body.approvalMode, 'terminal');
});
