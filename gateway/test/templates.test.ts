import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, createWorkspace, errorBody, SERVER_API, startStack, type Stack, type TestWorkspace } from '@herald/testkit';

// /templates end to end: the gateway and the campaign service (which owns templates) on the real
// PostgreSQL; each test in a workspace of its own.

let stack: Stack;
before(async () => {
  stack = await startStack({ sending: true });
});
after(() => stack.stop());

interface TemplateRecord {
  id: string;
  name: string;
  title: string;
  body: string;
  iconUrl: string | null;
  imageUrl: string | null;
  actionUrl: string | null;
  createdAt: string;
  updatedAt: string;
}
type Page = { data: TemplateRecord[]; hasMore: boolean; nextCursor: string | null };

const templates = (workspace: TestWorkspace, path = '', options: { method?: string; body?: unknown } = {}) =>
  call<TemplateRecord & Page & Record<string, unknown>>(stack.gatewayUrl, `${SERVER_API}/templates${path}`, { key: workspace.apiKey, ...options });

test('a template is created (201), read, listed newest first in cursor pages, changed field by field and deleted (204)', async () => {
  const workspace = await createWorkspace();
  const created = await templates(workspace, '', {
    method: 'POST',
    body: { name: 'Welcome', title: 'Hello {{firstName|friend}}', body: 'Your {{plan}} plan is ready', actionUrl: 'https://shop.example.test/{{path}}' },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const template = created.body;
  assert.match(template.id, /^tpl_[a-z2-7]{24}$/);
  assert.deepEqual(template, {
    id: template.id,
    name: 'Welcome',
    title: 'Hello {{firstName|friend}}',
    body: 'Your {{plan}} plan is ready',
    iconUrl: null,
    imageUrl: null,
    actionUrl: 'https://shop.example.test/{{path}}',
    createdAt: template.createdAt,
    updatedAt: template.createdAt,
  });
  assert.deepEqual((await templates(workspace, `/${template.id}`)).body, template);

  const second = (await templates(workspace, '', { method: 'POST', body: { name: 'Second', title: 't2', body: 'b2', iconUrl: 'https://cdn.example.test/i.png' } })).body;
  const third = (await templates(workspace, '', { method: 'POST', body: { name: 'Third', title: 't3', body: 'b3' } })).body;
  const first = await templates(workspace, '?limit=2');
  assert.equal(first.status, 200);
  assert.deepEqual(first.body.data.map((item) => item.id), [third.id, second.id]);
  assert.equal(first.body.hasMore, true);
  assert.ok(first.body.nextCursor);
  const next = await templates(workspace, `?limit=2&cursor=${first.body.nextCursor}`);
  assert.deepEqual([next.body.data.map((item) => item.id), next.body.hasMore, next.body.nextCursor], [[template.id], false, null]);

  const patched = await templates(workspace, `/${second.id}`, { method: 'PATCH', body: { title: 'changed', iconUrl: null } });
  assert.equal(patched.status, 200, JSON.stringify(patched.body));
  assert.deepEqual({ ...patched.body, updatedAt: second.updatedAt }, { ...second, title: 'changed', iconUrl: null });
  assert.ok(Date.parse(patched.body.updatedAt) > Date.parse(second.updatedAt));

  const deleted = await templates(workspace, `/${third.id}`, { method: 'DELETE' });
  assert.deepEqual([deleted.status, deleted.body], [204, '']);
  assert.equal((await templates(workspace, `/${third.id}`)).status, 404);
  assert.equal((await templates(workspace, `/${third.id}`, { method: 'DELETE' })).status, 404);
  assert.deepEqual((await templates(workspace)).body.data.map((item) => item.id), [second.id, template.id]);
});

test("another workspace's template is 404 for every operation", async () => {
  const owner = await createWorkspace();
  const other = await createWorkspace();
  const { id } = (await templates(owner, '', { method: 'POST', body: { name: 'Mine', title: 't', body: 'b' } })).body;
  for (const [method, body] of [['GET'], ['PATCH', { name: 'taken' }], ['DELETE']] as const) {
    const response = await templates(other, `/${id}`, { method, body });
    assert.deepEqual(response.body, errorBody('not_found', 404, 'Not found', `No template ${id}.`, 'Check the path and the identifier.'), method);
  }
  assert.deepEqual((await templates(other)).body, { data: [], hasMore: false, nextCursor: null });
  assert.equal((await templates(owner, `/${id}`)).body.name, 'Mine');
});

test('validation: every bad field is a 400 naming it, malformed placeholders included', async () => {
  const workspace = await createWorkspace();
  const fieldsOf = (response: { status: number; body: Record<string, unknown> }) => {
    assert.equal(response.status, 400, JSON.stringify(response.body));
    assert.equal(response.body.code, 'invalid_request');
    return (response.body.fields as Array<{ field: string }>).map((item) => item.field).sort();
  };
  assert.deepEqual(fieldsOf(await templates(workspace, '', { method: 'POST', body: {} })), ['body', 'name', 'title']);
  assert.deepEqual(fieldsOf(await templates(workspace, '', { method: 'POST', body: { name: 'x', title: 't', body: 'b', actionUrl: 'ftp://x', iconUrl: 'icon.png', extra: 1 } })), [
    'actionUrl',
    'extra',
    'iconUrl',
  ]);
  const malformed = await templates(workspace, '', { method: 'POST', body: { name: 'x', title: 'Hi {{ first name }}', body: 'Bye {{x', actionUrl: 'https://a.test/{{ok}}' } });
  assert.deepEqual(fieldsOf(malformed), ['body', 'title']);
  assert.match(String(malformed.body.message), /title has a malformed placeholder: write \{\{name\}\} or \{\{name\|fallback\}\}/);
  const { id } = (await templates(workspace, '', { method: 'POST', body: { name: 'ok', title: 't', body: 'b' } })).body;
  assert.deepEqual(fieldsOf(await templates(workspace, `/${id}`, { method: 'PATCH', body: {} })), ['(body)']);
  assert.deepEqual(fieldsOf(await templates(workspace, `/${id}`, { method: 'PATCH', body: { body: '{{}}' } })), ['body']);
  assert.deepEqual(fieldsOf(await templates(workspace, '?cursor=not-a-cursor')), ['cursor']);
  assert.deepEqual(fieldsOf(await templates(workspace, '?limit=101')), ['limit']);
});
