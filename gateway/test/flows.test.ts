import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, createKey, createWorkspace, errorBody, SERVER_API, startStack, type Stack, type TestWorkspace } from '@herald/testkit';

// /flows through HTTP: the gateway's schemas, the flow service's rules (steps, triggers, states),
// the campaign service asked about trigger campaigns. Runs are in services/flow/test.

let stack: Stack;
before(async () => {
  stack = await startStack({ services: ['campaign', 'flow'] });
});
after(() => stack.stop());

interface StepRecord {
  id: string;
  flowId: string;
  stepOrder: number;
  stepType: string;
  config: Record<string, unknown>;
}
interface FlowRecord {
  id: string;
  siteId: string;
  name: string;
  description: string;
  triggerType: string;
  triggerCampaignId: string | null;
  status: string;
  executionCount: number;
  steps: StepRecord[];
  createdAt: string;
  updatedAt: string;
}
type Page<T> = { data: T[]; hasMore: boolean; nextCursor: string | null };
type Answer = FlowRecord & Page<FlowRecord> & Record<string, unknown>;

const flows = (workspace: TestWorkspace, path = '', options: { method?: string; body?: unknown; key?: string } = {}) =>
  call<Answer>(stack.gatewayUrl, `${SERVER_API}/flows${path}`, { key: workspace.apiKey, ...options });

const WELCOME = { notification: { title: 'Welcome', body: 'Glad you are here', actionUrl: 'https://shop.example.test/start' } };
const STEPS = [
  { stepType: 'send_notification', config: WELCOME },
  { stepType: 'delay', config: { delay: { value: 1, unit: 'days' } } },
  { stepType: 'exit', config: {} },
];

async function create(workspace: TestWorkspace, body: Record<string, unknown> = {}): Promise<FlowRecord> {
  const response = await flows(workspace, '', { method: 'POST', body: { name: 'Welcome series', triggerType: 'subscription', steps: STEPS, ...body } });
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return response.body;
}

/** The 400 naming exactly these fields and problems. */
async function assertInvalid(response: Promise<{ status: number; body: Record<string, unknown> }>, fields: Array<{ field: string; problem: string }>): Promise<void> {
  const { status, body } = await response;
  assert.equal(status, 400, JSON.stringify(body));
  assert.equal(body.code, 'invalid_request');
  assert.deepEqual(
    (body.fields as Array<{ field: string; problem: string }>).map(({ field, problem }) => ({ field, problem })),
    fields,
  );
}

test('create answers 201 with the flow in draft, its steps in order; read, list and patch show the same', async () => {
  const workspace = await createWorkspace('growth');
  const created = await create(workspace, { description: 'Greets new subscribers' });
  assert.match(created.id, /^flw_[a-z0-9]{24}$/);
  assert.deepEqual(
    { ...created, id: '', siteId: '', createdAt: '', updatedAt: '', steps: [] },
    { id: '', siteId: '', name: 'Welcome series', description: 'Greets new subscribers', triggerType: 'subscription', triggerCampaignId: null, status: 'draft', executionCount: 0, steps: [], createdAt: '', updatedAt: '' },
  );
  assert.deepEqual(
    created.steps.map(({ flowId, stepOrder, stepType, config }) => ({ flowId, stepOrder, stepType, config })),
    STEPS.map((step, index) => ({ flowId: created.id, stepOrder: index, ...step })),
  );
  assert.equal(new Set(created.steps.map((step) => step.id)).size, 3);
  assert.deepEqual((await flows(workspace, `/${created.id}`)).body, created);

  const list = await flows(workspace);
  assert.equal(list.status, 200);
  assert.deepEqual(list.body, { data: [created], hasMore: false, nextCursor: null });

  // Only the fields given change; steps replace the whole list.
  const patched = await flows(workspace, `/${created.id}`, { method: 'PATCH', body: { name: 'Renamed', steps: [{ stepType: 'exit', config: {} }] } });
  assert.equal(patched.status, 200);
  assert.equal(patched.body.name, 'Renamed');
  assert.equal(patched.body.description, 'Greets new subscribers');
  assert.deepEqual(
    patched.body.steps.map(({ stepOrder, stepType, config }) => ({ stepOrder, stepType, config })),
    [{ stepOrder: 0, stepType: 'exit', config: {} }],
  );
  assert.ok(patched.body.updatedAt > created.updatedAt);

  assert.equal((await flows(workspace, `/${created.id}`, { method: 'DELETE' })).status, 204);
  assert.equal((await flows(workspace, `/${created.id}`)).status, 404);
  assert.deepEqual((await flows(workspace)).body, { data: [], hasMore: false, nextCursor: null });
});

test('pages are newest first with opaque cursors; status filters them; a bad status or cursor is 400', async () => {
  const workspace = await createWorkspace('growth');
  const made: FlowRecord[] = [];
  for (const name of ['one', 'two', 'three']) made.push(await create(workspace, { name }));
  await flows(workspace, `/${made[1]?.id}/activate`, { method: 'POST' });
  const first = await flows(workspace, '?limit=2');
  assert.deepEqual(first.body.data.map((flow) => flow.name), ['three', 'two']);
  assert.equal(first.body.hasMore, true);
  const second = await flows(workspace, `?limit=2&cursor=${encodeURIComponent(first.body.nextCursor ?? '')}`);
  assert.deepEqual([second.body.data.map((flow) => flow.name), second.body.hasMore, second.body.nextCursor], [['one'], false, null]);
  assert.deepEqual((await flows(workspace, '?status=active')).body.data.map((flow) => flow.name), ['two']);
  assert.deepEqual((await flows(workspace, '?status=draft')).body.data.map((flow) => flow.name), ['three', 'one']);
  await assertInvalid(flows(workspace, '?status=running'), [{ field: 'status', problem: 'must be equal to one of the allowed values' }]);
  await assertInvalid(flows(workspace, '?cursor=nonsense'), [{ field: 'cursor', problem: 'is not a cursor returned by this endpoint' }]);
});

test('every bad step is a 400 naming steps[i].config...', async () => {
  const workspace = await createWorkspace('growth');
  const send = (notification: unknown) => ({ stepType: 'send_notification', config: { notification } });
  const delay = (value: unknown, unit: unknown = 'seconds') => ({ stepType: 'delay', config: { delay: { value, unit } } });
  const cases: Array<[unknown[], Array<{ field: string; problem: string }>]> = [
    [[{ stepType: 'send_notification', config: {} }], [{ field: 'steps[0].config.notification', problem: 'is required' }]],
    [[send({ title: 'Hi' })], [{ field: 'steps[0].config.notification.body', problem: 'is required' }]],
    [[send({ title: '', body: 'x' })], [{ field: 'steps[0].config.notification.title', problem: 'must not be empty' }]],
    [[send({ title: 'x'.repeat(257), body: 'x' })], [{ field: 'steps[0].config.notification.title', problem: 'must be at most 256 characters' }]],
    [[send({ title: 'Hi', body: 7 })], [{ field: 'steps[0].config.notification.body', problem: 'must be a string' }]],
    [[send({ title: 'Hi', body: 'x', iconUrl: 'ftp://icon' })], [{ field: 'steps[0].config.notification.iconUrl', problem: 'must be an http(s) URL' }]],
    [[send({ title: 'Hi', body: 'x', color: 'red' })], [{ field: 'steps[0].config.notification.color', problem: 'is not allowed' }]],
    [[send('Hi')], [{ field: 'steps[0].config.notification', problem: 'must be an object' }]],
    [[{ stepType: 'exit', config: {} }, delay(0)], [{ field: 'steps[1].config.delay.value', problem: 'must be greater than 0' }]],
    [[delay(-2, 'hours')], [{ field: 'steps[0].config.delay.value', problem: 'must be greater than 0' }]],
    [[delay('1')], [{ field: 'steps[0].config.delay.value', problem: 'must be a number' }]],
    [[delay(1, 'weeks')], [{ field: 'steps[0].config.delay.unit', problem: 'must be one of seconds, minutes, hours, days' }]],
    [[delay(366, 'days')], [{ field: 'steps[0].config.delay.value', problem: 'must be at most 365 days' }]],
    [[delay(8_761, 'hours')], [{ field: 'steps[0].config.delay.value', problem: 'must be at most 365 days' }]],
    [[{ stepType: 'delay', config: { delay: { value: 1 } } }], [{ field: 'steps[0].config.delay.unit', problem: 'is required' }]],
    [[{ stepType: 'delay', config: { wait: 1 } }], [{ field: 'steps[0].config.delay', problem: 'is required' }, { field: 'steps[0].config.wait', problem: 'is not allowed' }]],
    [[{ stepType: 'exit', config: { now: true } }], [{ field: 'steps[0].config.now', problem: 'is not allowed' }]],
    [[{ stepType: 'wait', config: {} }], [{ field: 'steps[0].stepType', problem: 'must be one of send_notification, delay, exit' }]],
    // Each bad step is named, not only the first.
    [[send({ title: 'Hi' }), delay(0)], [{ field: 'steps[0].config.notification.body', problem: 'is required' }, { field: 'steps[1].config.delay.value', problem: 'must be greater than 0' }]],
  ];
  for (const [steps, fields] of cases) {
    await assertInvalid(flows(workspace, '', { method: 'POST', body: { name: 'bad', triggerType: 'subscription', steps } }), fields);
  }
  // PATCH checks its steps the same way and changes nothing when one is bad.
  const flow = await create(workspace);
  await assertInvalid(flows(workspace, `/${flow.id}`, { method: 'PATCH', body: { name: 'x', steps: [delay(0)] } }), [{ field: 'steps[0].config.delay.value', problem: 'must be greater than 0' }]);
  assert.deepEqual((await flows(workspace, `/${flow.id}`)).body, flow);
  // The boundaries themselves are accepted.
  const longest = await create(workspace, { steps: [delay(365, 'days'), delay(0.5), send({ title: 'x'.repeat(256), body: 'y' })] });
  assert.deepEqual(longest.steps.map((step) => step.config), [{ delay: { value: 365, unit: 'days' } }, { delay: { value: 0.5, unit: 'seconds' } }, { notification: { title: 'x'.repeat(256), body: 'y' } }]);
});

test('a send may come from a template: its content copied with the variables filled when the flow is saved', async () => {
  const workspace = await createWorkspace('growth');
  const template = await call<{ id: string }>(stack.gatewayUrl, `${SERVER_API}/templates`, {
    key: workspace.apiKey,
    method: 'POST',
    body: { name: 'Welcome', title: 'Hello {{firstName|friend}}', body: 'Your {{plan}} plan is ready', actionUrl: 'https://shop.example.test/{{plan}}', iconUrl: 'https://shop.example.test/i.png' },
  });
  assert.equal(template.status, 201);
  const fromTemplate = (config: Record<string, unknown>) => [{ stepType: 'send_notification', config: { templateId: template.body.id, ...config } }];
  const flow = await create(workspace, { steps: fromTemplate({ variables: { plan: 'Pro' } }) });
  assert.deepEqual(flow.steps[0]?.config, {
    templateId: template.body.id,
    variables: { plan: 'Pro' },
    notification: { title: 'Hello friend', body: 'Your Pro plan is ready', iconUrl: 'https://shop.example.test/i.png', actionUrl: 'https://shop.example.test/Pro' },
  });
  // Reading the flow and writing its steps back keeps them: a notification sent along is the template's again.
  const rewritten = await flows(workspace, `/${flow.id}`, { method: 'PATCH', body: { steps: flow.steps.map(({ stepType, config }) => ({ stepType, config })) } });
  assert.deepEqual(rewritten.body.steps[0]?.config, flow.steps[0]?.config);

  const post = (steps: unknown) => flows(workspace, '', { method: 'POST', body: { name: 'x', triggerType: 'subscription', steps } });
  await assertInvalid(post(fromTemplate({})), [
    { field: 'steps[0].config.variables.plan', problem: "is required by the template's body ({{plan}} has no default)" },
    { field: 'steps[0].config.variables.plan', problem: "is required by the template's actionUrl ({{plan}} has no default)" },
  ]);
  await assertInvalid(post(fromTemplate({ templateId: 'tpl_missing' })), [{ field: 'steps[0].config.templateId', problem: 'names no template of this workspace' }]);
  await assertInvalid(post(fromTemplate({ variables: { plan: 3, 'bad name': 'x' } })), [
    { field: 'steps[0].config.variables.plan', problem: 'must be a string' },
    { field: 'steps[0].config.variables.bad name', problem: 'is not a placeholder name (a letter or _, then letters, digits, _ or .)' },
  ]);
  await assertInvalid(post(fromTemplate({ variables: [] })), [{ field: 'steps[0].config.variables', problem: 'must be an object' }]);
  await assertInvalid(post(fromTemplate({ templateId: '', colour: 'red' })), [
    { field: 'steps[0].config.colour', problem: 'is not allowed' },
    { field: 'steps[0].config.templateId', problem: 'must not be empty' },
  ]);
  const other = await createWorkspace('growth');
  await assertInvalid(flows(other, '', { method: 'POST', body: { name: 'x', triggerType: 'subscription', steps: fromTemplate({ variables: { plan: 'Pro' } }) } }), [
    { field: 'steps[0].config.templateId', problem: 'names no template of this workspace' },
  ]);
});

test('the request shape: name and triggerType required, known fields only, limits', async () => {
  const workspace = await createWorkspace('growth');
  const post = (body: unknown) => flows(workspace, '', { method: 'POST', body });
  await assertInvalid(post({ triggerType: 'subscription' }), [{ field: 'name', problem: 'is required' }]);
  await assertInvalid(post({ name: 'x' }), [{ field: 'triggerType', problem: 'is required' }]);
  await assertInvalid(post({ name: 'x', triggerType: 'page_view' }), [{ field: 'triggerType', problem: 'must be equal to one of the allowed values' }]);
  await assertInvalid(post({ name: 'x', triggerType: 'subscription', colour: 'red' }), [{ field: 'colour', problem: 'is not allowed' }]);
  await assertInvalid(post({ name: 'x', triggerType: 'subscription', steps: Array.from({ length: 51 }, () => ({ stepType: 'exit', config: {} })) }), [
    { field: 'steps', problem: 'must NOT have more than 50 items' },
  ]);
  await assertInvalid(post({ name: 'x', triggerType: 'subscription', steps: [{ stepType: 'exit' }] }), [{ field: 'steps.0.config', problem: 'is required' }]);
  const flow = await create(workspace);
  await assertInvalid(flows(workspace, `/${flow.id}`, { method: 'PATCH', body: {} }), [{ field: '(body)', problem: 'must NOT have fewer than 1 properties' }]);
  await assertInvalid(flows(workspace, `/${flow.id}`, { method: 'PATCH', body: { status: 'running' } }), [{ field: 'status', problem: 'must be equal to one of the allowed values' }]);
});

test('triggerCampaignId: notification triggers only, and one of the workspace own campaigns', async () => {
  const workspace = await createWorkspace('growth');
  const campaign = await call<{ id: string }>(stack.gatewayUrl, `${SERVER_API}/campaigns`, {
    key: workspace.apiKey,
    method: 'POST',
    body: { name: 'Launch', title: 'New', body: 'Out now' },
  });
  assert.equal(campaign.status, 201);
  const clicked = await create(workspace, { triggerType: 'notification_click', triggerCampaignId: campaign.body.id });
  assert.deepEqual([clicked.triggerType, clicked.triggerCampaignId], ['notification_click', campaign.body.id]);

  await assertInvalid(flows(workspace, '', { method: 'POST', body: { name: 'x', triggerType: 'subscription', triggerCampaignId: campaign.body.id } }), [
    { field: 'triggerCampaignId', problem: 'is only for the triggers notification_click, notification_impression, notification_dismiss' },
  ]);
  await assertInvalid(flows(workspace, '', { method: 'POST', body: { name: 'x', triggerType: 'notification_dismiss', triggerCampaignId: 'cmp_doesnotexist' } }), [
    { field: 'triggerCampaignId', problem: 'is not a campaign of this workspace' },
  ]);
  const other = await createWorkspace('growth');
  await assertInvalid(flows(other, '', { method: 'POST', body: { name: 'x', triggerType: 'notification_click', triggerCampaignId: campaign.body.id } }), [
    { field: 'triggerCampaignId', problem: 'is not a campaign of this workspace' },
  ]);
  // Moving to a trigger that takes no campaign while keeping one is refused; clearing it with the move is fine.
  await assertInvalid(flows(workspace, `/${clicked.id}`, { method: 'PATCH', body: { triggerType: 'subscription' } }), [
    { field: 'triggerCampaignId', problem: 'is only for the triggers notification_click, notification_impression, notification_dismiss' },
  ]);
  const moved = await flows(workspace, `/${clicked.id}`, { method: 'PATCH', body: { triggerType: 'subscription', triggerCampaignId: null } });
  assert.deepEqual([moved.status, moved.body.triggerType, moved.body.triggerCampaignId], [200, 'subscription', null]);
});

test('states: activate needs steps (409, nothing changes); pause only from active; PATCH status moves as supplied', async () => {
  const workspace = await createWorkspace('growth');
  const empty = await create(workspace, { steps: [] });
  const refused = await flows(workspace, `/${empty.id}/activate`, { method: 'POST' });
  assert.equal(refused.status, 409);
  assert.deepEqual(
    refused.body,
    errorBody('conflict', 409, 'Flow has no steps', `Flow ${empty.id} has no steps; a flow is activated with at least one step.`, 'Give the flow its steps (PATCH /flows/{flowId} with steps), then activate it.'),
  );
  assert.equal((await flows(workspace, `/${empty.id}`, { method: 'PATCH', body: { status: 'active' } })).status, 409);
  assert.deepEqual((await flows(workspace, `/${empty.id}`)).body, empty);

  const pauseDraft = await flows(workspace, `/${empty.id}/pause`, { method: 'POST' });
  assert.equal(pauseDraft.status, 409);
  assert.equal(pauseDraft.body.message, `Flow ${empty.id} is draft; pausing needs it active.`);
  assert.equal(pauseDraft.body.flowStatus, 'draft');

  const flow = await create(workspace);
  const activated = await flows(workspace, `/${flow.id}/activate`, { method: 'POST' });
  assert.deepEqual([activated.status, activated.body.status], [200, 'active']);
  const again = await flows(workspace, `/${flow.id}/activate`, { method: 'POST' });
  assert.deepEqual([again.status, again.body.message], [409, `Flow ${flow.id} is active; activating needs it draft or paused or archived.`]);
  assert.equal((await flows(workspace, `/${flow.id}/pause`, { method: 'POST' })).body.status, 'paused');
  assert.equal((await flows(workspace, `/${flow.id}/activate`, { method: 'POST' })).body.status, 'active');
  assert.equal((await flows(workspace, `/${flow.id}`, { method: 'PATCH', body: { status: 'archived' } })).body.status, 'archived');
  assert.equal((await flows(workspace, `/${flow.id}/activate`, { method: 'POST' })).body.status, 'active');
  // Emptying the steps of an active flow together with leaving active is fine; activating it then is not.
  const emptied = await flows(workspace, `/${flow.id}`, { method: 'PATCH', body: { status: 'draft', steps: [] } });
  assert.deepEqual([emptied.body.status, emptied.body.steps], ['draft', []]);
  assert.equal((await flows(workspace, `/${flow.id}`, { method: 'PATCH', body: { status: 'active' } })).status, 409);
});

test("another workspace's flow is 404 on every route; runtime keys may not use /flows", async () => {
  const owner = await createWorkspace('growth');
  const flow = await create(owner);
  const stranger = await createWorkspace('growth');
  const notFound = errorBody('not_found', 404, 'Not found', `No flow ${flow.id}.`, 'Check the path and the identifier.');
  for (const [method, path, body] of [
    ['GET', '', undefined],
    ['PATCH', '', { name: 'mine now' }],
    ['DELETE', '', undefined],
    ['POST', '/activate', undefined],
    ['POST', '/pause', undefined],
    ['GET', '/runs', undefined],
  ] as const) {
    const response = await flows(stranger, `/${flow.id}${path}`, { method, body });
    assert.deepEqual([response.status, response.body], [404, notFound], `${method} ${path}`);
  }
  assert.deepEqual((await flows(owner, `/${flow.id}`)).body, flow);

  const runtime = await createKey(owner.workspaceId, 'runtime');
  const forbidden = await flows(owner, '', { key: runtime.apiKey });
  assert.deepEqual([forbidden.status, forbidden.body.code], [403, 'forbidden']);
});

test('GET /flows/{id}/runs: an empty page for a flow nothing triggered yet', async () => {
  const workspace = await createWorkspace('growth');
  const flow = await create(workspace);
  const runs = await flows(workspace, `/${flow.id}/runs`);
  assert.deepEqual([runs.status, runs.body], [200, { data: [], hasMore: false, nextCursor: null }]);
});
