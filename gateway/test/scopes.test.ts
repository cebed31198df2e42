import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { KEY_ORIGINS, SCOPES, scopesForOrigin, type KeyOrigin } from '@herald/domain';
import { admin, call, createKey, createWorkspace, SERVER_API, startStack, type Stack } from '@herald/testkit';

// The spec's origin-by-endpoint table, data-driven, and the plan rules.

let stack: Stack;
before(async () => {
  stack = await startStack({ sending: true, services: ['flow'] });
});
after(() => stack.stop());

interface Endpoint {
  method: string;
  path: string;
  body?: unknown;
}

const endpoints: Record<string, Endpoint> = {
  identity: { method: 'GET', path: '/identity' },
  site: { method: 'GET', path: '/site' },
  workspace: { method: 'GET', path: '/workspace' },
  updateWorkspace: { method: 'PATCH', path: '/workspace', body: { approvalMode: 'browser' } },
  channels: { method: 'GET', path: '/channels' },
  listMachines: { method: 'GET', path: '/machines' },
  reportMachine: { method: 'POST', path: '/machines', body: { machineId: 'scope-test' } },
  send: { method: 'POST', path: '/send', body: { title: 'scope', body: 'test' } },
  readNotification: { method: 'GET', path: '/notifications/ntf_00000000000000000000000000000000' },
  listSubscribers: { method: 'GET', path: '/subscribers' },
  countSubscribers: { method: 'GET', path: '/subscribers/count' },
  listTemplates: { method: 'GET', path: '/templates' },
  createTemplate: { method: 'POST', path: '/templates', body: { name: 'scope', title: 'scope', body: 'test' } },
  listSegments: { method: 'GET', path: '/segments' },
  createSegment: { method: 'POST', path: '/segments', body: { name: 'scope', filter: {} } },
  countSegment: { method: 'GET', path: '/segments/seg_000000000000000000000000/count' },
  listFlows: { method: 'GET', path: '/flows' },
  createFlow: { method: 'POST', path: '/flows', body: { name: 'scope', triggerType: 'subscription' } },
};

/** Which endpoints each key origin may call, as the spec's table says. */
const allowed: Record<KeyOrigin, string[]> = {
  dashboard: Object.keys(endpoints),
  runtime: ['identity', 'site', 'workspace', 'channels', 'listMachines', 'reportMachine', 'send'],
  connector: ['identity', 'send'],
  bound: [],
};

const forbidden = {
  error: 'This key cannot access this endpoint',
  code: 'forbidden',
  status: 403,
  message: 'This key cannot access this endpoint',
  documentation: 'http://localhost:8080/docs/errors#forbidden',
};

function request(key: string, endpoint: Endpoint) {
  return call(stack.gatewayUrl, `${SERVER_API}${endpoint.path}`, { method: endpoint.method, key, body: endpoint.body });
}

test('every origin reaches exactly the endpoints of the spec table', async () => {
  // Partner, so bound keys are usable at all.
  const workspace = await createWorkspace('partner');
  const keys: Record<KeyOrigin, string> = {
    dashboard: workspace.apiKey,
    runtime: (await createKey(workspace.workspaceId, 'runtime')).apiKey,
    connector: (await createKey(workspace.workspaceId, 'connector')).apiKey,
    bound: (await createKey(workspace.workspaceId, 'bound', '--external-id', 'user-1')).apiKey,
  };
  for (const origin of KEY_ORIGINS) {
    for (const [name, endpoint] of Object.entries(endpoints)) {
      const response = await request(keys[origin], endpoint);
      if (allowed[origin].includes(name)) {
        // Past the scope check: 200 (201 for a create), or the endpoint's own answer (no subscribers to send to: 400; no such notification: 404).
        assert.ok([200, 201, 400, 404].includes(response.status), `${origin} ${name}: ${response.status} ${JSON.stringify(response.body)}`);
        assert.notEqual(response.body.code, 'forbidden');
      } else {
        assert.equal(response.status, 403, `${origin} ${name}`);
        const { hint, ...rest } = response.body;
        assert.deepEqual(rest, forbidden, `${origin} ${name}`);
        assert.equal(typeof hint, 'string');
      }
    }
  }
});

test('the scope catalogue matches the spec table for endpoints of every capability', () => {
  assert.deepEqual([...scopesForOrigin('dashboard')], [...SCOPES]);
  // Runtime: identity, site, channels, machines, send, ask, Partner decisions; never campaigns,
  // templates, flows or the subscriber list.
  assert.deepEqual([...scopesForOrigin('runtime')].sort(), ['account', 'ask', 'decisions', 'identity', 'notifications:send']);
  assert.deepEqual([...scopesForOrigin('connector')].sort(), ['identity', 'notifications:send']);
  assert.deepEqual([...scopesForOrigin('bound')].sort(), ['authorize', 'decisions', 'enroll']);
});

test('a workspace without an active plan gets 403 subscription_required with upgradeUrl everywhere', async () => {
  const workspace = await createWorkspace('starter');
  assert.deepEqual(await admin('workspace', 'set-plan', '--workspace', workspace.workspaceId, '--plan', 'none'), {
    workspaceId: workspace.workspaceId,
    plan: 'none',
    previousPlan: 'starter',
  });
  for (const endpoint of Object.values(endpoints)) {
    const response = await request(workspace.apiKey, endpoint);
    assert.equal(response.status, 403);
    assert.deepEqual(response.body, {
      error: 'Subscription required',
      code: 'subscription_required',
      status: 403,
      message: 'This workspace has no active plan.',
      hint: 'Choose a plan for this workspace.',
      documentation: 'http://localhost:8080/docs/errors#subscription_required',
      upgradeUrl: 'https://herald.dev/pricing',
    });
    // Still counted against the key's limit (as Free).
    assert.equal(response.headers.get('x-ratelimit-limit'), '100');
  }
});

test('bound keys stop working when the workspace leaves the Partner plan', async () => {
  const workspace = await createWorkspace('partner');
  const bound = await createKey(workspace.workspaceId, 'bound', '--external-id', 'user-2');
  await admin('workspace', 'set-plan', '--workspace', workspace.workspaceId, '--plan', 'enterprise');
  for (const endpoint of Object.values(endpoints)) {
    const response = await request(bound.apiKey, endpoint);
    assert.equal(response.status, 403);
    assert.deepEqual(response.body, {
      error: 'Plan upgrade required',
      code: 'plan_upgrade_required',
      status: 403,
      message: 'This endpoint requires the Partner plan.',
      hint: 'Upgrade the workspace to a plan that includes this endpoint (see upgradeUrl).',
      documentation: 'http://localhost:8080/docs/errors#plan_upgrade_required',
      upgradeUrl: 'https://herald.dev/pricing',
    });
  }
});
