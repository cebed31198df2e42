import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';

import { call, connectDatabase, createKey, createWorkspace, SERVER_API, startStack, type Stack } from '@herald/testkit';

// GET /identity, /site, /channels, /machines and POST /machines, and tenant isolation.

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(() => stack.stop());

const get = (path: string, key: string, headers: Record<string, string> = {}) => call(stack.gatewayUrl, `${SERVER_API}${path}`, { key, headers });

test('GET /identity names the key, its site, workspace and plan', async () => {
  const workspace = await createWorkspace('growth', 'https://Shop.Example.com/');
  const response = await get('/identity', workspace.apiKey);
  assert.equal(response.status, 200);
  const body = response.body as Record<string, Record<string, unknown>>;
  assert.equal(body.key?.id, workspace.keyId);
  assert.equal(body.key?.name, 'Default dashboard key');
  assert.equal(body.key?.origin, 'dashboard');
  assert.equal(body.key?.boundExternalId, null);
  assert.equal(body.key?.expiresAt, null);
  assert.deepEqual(body.site, {
    id: workspace.siteId,
    name: body.workspace?.name,
    slug: workspace.siteSlug,
    domain: 'shop.example.com',
    subscribePageUrl: `http://localhost:8080/s/${workspace.siteSlug}`,
    siteKey: workspace.siteKey,
    vapidPublicKey: body.site?.vapidPublicKey,
    createdAt: body.site?.createdAt,
  });
  // A VAPID public key is an uncompressed P-256 point: 65 bytes starting with 0x04.
  const point = Buffer.from(body.site?.vapidPublicKey as string, 'base64url');
  assert.equal(point.length, 65);
  assert.equal(point[0], 4);
  assert.deepEqual(body.workspace, { id: workspace.workspaceId, name: body.workspace?.name, approvalMode: 'browser' });
  assert.deepEqual(body.plan, {
    name: 'growth',
    active: true,
    apiAccess: true,
    partner: false,
    rateLimitPerMinute: 500,
    monthlyNotificationAllowance: 500_000,
  });
});

test('GET /site returns the site record', async () => {
  const workspace = await createWorkspace('starter', 'localhost:3000');
  const response = await get('/site', workspace.apiKey);
  assert.equal(response.status, 200);
  assert.equal(response.body.id, workspace.siteId);
  assert.equal(response.body.slug, workspace.siteSlug);
  assert.equal(response.body.domain, 'localhost:3000');
  assert.equal(response.body.subscribePageUrl, `http://localhost:8080/s/${workspace.siteSlug}`);
});

test('GET /channels counts live channels, zero while there are none', async () => {
  const workspace = await createWorkspace('growth');
  const response = await get('/channels', workspace.apiKey);
  assert.equal(response.status, 200);
  assert.deepEqual(response.body, {
    keyOwner: { externalId: 'owner', nativeAppDevices: 0, browserSubscriptions: 0, reachable: false },
    site: { nativeAppDevices: 0, browserSubscriptions: 0 },
  });
});

test('machines are reported by header or POST and listed most recent first', async () => {
  const workspace = await createWorkspace('growth');
  const runtime = await createKey(workspace.workspaceId, 'runtime');
  const first = await get('/identity', runtime.apiKey, {
    'x-herald-machine-id': 'build-box',
    'x-herald-machine-name': 'build-box.local',
    'x-herald-machine-platform': 'linux-x64',
  });
  assert.equal(first.status, 200);
  const posted = await call(stack.gatewayUrl, `${SERVER_API}/machines`, {
    method: 'POST',
    key: runtime.apiKey,
    body: { machineId: 'laptop', name: 'Ada’s laptop', platform: 'darwin-arm64' },
  });
  assert.equal(posted.status, 200);
  const machine = posted.body.machine as Record<string, string>;
  assert.deepEqual(machine, {
    id: 'laptop',
    name: 'Ada’s laptop',
    platform: 'darwin-arm64',
    keyId: runtime.keyId,
    firstSeenAt: machine.firstSeenAt,
    lastSeenAt: machine.firstSeenAt,
  });
  const listed = await get('/machines', runtime.apiKey);
  assert.equal(listed.status, 200);
  const list = listed.body.machines as Array<Record<string, string>>;
  assert.deepEqual(
    list.map((entry) => [entry.id, entry.name, entry.platform, entry.keyId]),
    [
      ['laptop', 'Ada’s laptop', 'darwin-arm64', runtime.keyId],
      ['build-box', 'build-box.local', 'linux-x64', runtime.keyId],
    ],
  );
});

test("a key never sees another workspace's data", async () => {
  const [a, b] = await Promise.all([createWorkspace('growth'), createWorkspace('growth')]);
  await call(stack.gatewayUrl, `${SERVER_API}/machines`, { method: 'POST', key: b.apiKey, body: { machineId: 'b-only' } });
  const aMachines = await get('/machines', a.apiKey);
  assert.deepEqual(aMachines.body, { machines: [] });
  const aSite = await get('/site', a.apiKey);
  assert.equal(aSite.body.id, a.siteId);
  const aIdentity = await get('/identity', a.apiKey);
  assert.equal((aIdentity.body.workspace as { id: string }).id, a.workspaceId);
  // Reporting a machine id that exists in B creates A's own record and leaves B's untouched.
  await call(stack.gatewayUrl, `${SERVER_API}/machines`, { method: 'POST', key: a.apiKey, body: { machineId: 'b-only', name: 'A' } });
  const bMachines = await get('/machines', b.apiKey);
  assert.deepEqual(
    (bMachines.body.machines as Array<Record<string, string>>).map((entry) => [entry.id, entry.name]),
    [['b-only', '']],
  );
});

test('GET /channels counts live subscriptions and paired devices, for the key owner and the whole site', async () => {
  const [workspace, other] = await Promise.all([createWorkspace('growth'), createWorkspace('growth')]);
  // Seeded directly: the ways in for subscribers and devices belong to other capabilities.
  const db = await connectDatabase();
  try {
    // `verified`: the external id was proven; only such browsers count as the key owner's.
    const subscriber = (workspaceId: string, siteId: string, externalId: string | null, status: string, verified = externalId !== null) =>
      db.query(
        `INSERT INTO audience.subscribers (id, workspace_id, site_id, status, external_id, external_id_verified, endpoint, p256dh, auth)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'p', 'a')`,
        [`sub_${randomUUID()}`, workspaceId, siteId, status, externalId, verified, `https://push.example/${randomUUID()}`],
      );
    await subscriber(workspace.workspaceId, workspace.siteId, 'owner', 'active');
    await subscriber(workspace.workspaceId, workspace.siteId, 'owner', 'active');
    await subscriber(workspace.workspaceId, workspace.siteId, 'owner', 'active', false);
    await subscriber(workspace.workspaceId, workspace.siteId, 'someone-else', 'active');
    await subscriber(workspace.workspaceId, workspace.siteId, 'owner', 'unsubscribed');
    await subscriber(workspace.workspaceId, workspace.siteId, null, 'expired');
    await subscriber(other.workspaceId, other.siteId, 'owner', 'active');
    const device = (workspaceId: string, externalId: string, revoked: boolean) =>
      db.query(`INSERT INTO account.devices (id, workspace_id, external_id, platform, revoked_at) VALUES ($1, $2, $3, 'ios', $4)`, [
        `dev_${randomUUID()}`,
        workspaceId,
        externalId,
        revoked ? new Date() : null,
      ]);
    await device(workspace.workspaceId, 'owner', false);
    await device(workspace.workspaceId, 'owner', true);
    await device(workspace.workspaceId, 'someone-else', false);
    await device(other.workspaceId, 'owner', false);
  } finally {
    await db.end();
  }
  const response = await get('/channels', workspace.apiKey);
  assert.equal(response.status, 200);
  assert.deepEqual(response.body, {
    // The unproven "owner" is not the key owner's browser; the site's audience counts it.
    keyOwner: { externalId: 'owner', nativeAppDevices: 1, browserSubscriptions: 2, reachable: true },
    site: { nativeAppDevices: 2, browserSubscriptions: 4 },
  });
});
