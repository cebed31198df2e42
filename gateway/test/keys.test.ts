import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { admin, call, connectDatabase, createKey, createWorkspace, errorBody, SERVER_API, startStack, type Stack } from '@herald/testkit';

// Partner keys bound to one end-user: POST/GET /keys, DELETE /keys/{id}, what a bound key may
// reach, and revocation across two gateway replicas.

const KEY_CACHE_TTL_MS = 1_000;

let stack: Stack;
before(async () => {
  stack = await startStack({ gateways: 2, gatewayEnv: { KEY_CACHE_TTL_MS: String(KEY_CACHE_TTL_MS) }, policy: true });
});
after(() => stack.stop());

interface Summary {
  id: string;
  name: string;
  externalId: string;
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt: string | null;
  revoked: boolean;
  revokedAt: string | null;
}

const mint = (key: string, body: unknown) => call<{ key: Summary; apiKey: string }>(stack.gatewayUrl, `${SERVER_API}/keys`, { method: 'POST', key, body });
const list = (key: string, query = '') => call<{ keys: Summary[] }>(stack.gatewayUrl, `${SERVER_API}/keys${query}`, { key });
const revoke = (key: string, id: string) => call<Summary>(stack.gatewayUrl, `${SERVER_API}/keys/${id}`, { method: 'DELETE', key });
/** The cheapest call a bound key may make (no policy: a deny verdict, 200). */
const authorize = (key: string, url = stack.gatewayUrl) => call(url, `${SERVER_API}/authorize`, { method: 'POST', key, body: { toolName: 'probe' } });

const fullKeyPattern = /^pk_([a-z2-7]{16})\.([A-Za-z0-9_-]{43})$/;
const isoNear = (value: string | null, expectedMs: number, toleranceMs = 5_000) =>
  assert.ok(value !== null && Math.abs(Date.parse(value) - expectedMs) <= toleranceMs, `${value} is not near ${new Date(expectedMs).toISOString()}`);

async function minted(key: string, body: unknown): Promise<{ key: Summary; apiKey: string }> {
  const response = await mint(key, body);
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return response.body;
}

/** Polls until every replica refuses the key; returns how long that took. */
async function untilRefusedEverywhere(apiKey: string, withinMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    const statuses = await Promise.all(stack.gatewayUrls.map((url) => authorize(apiKey, url).then((r) => r.status)));
    if (statuses.every((status) => status === 401)) return Date.now() - started;
    assert.ok(Date.now() - started < withinMs, `still accepted after ${withinMs} ms: ${statuses.join(', ')}`);
    await sleep(100);
  }
}

test('POST /keys shows the full key once; GET /keys lists bound keys newest first, never a secret', async () => {
  const workspace = await createWorkspace('partner');
  const before = Date.now();
  const first = await minted(workspace.apiKey, { externalId: 'user-1', name: 'Alice laptop' });
  const [, id, secret] = fullKeyPattern.exec(first.apiKey) ?? [];
  assert.ok(id && secret, first.apiKey);
  const { createdAt, ...rest } = first.key;
  assert.deepEqual(rest, { id, name: 'Alice laptop', externalId: 'user-1', lastUsedAt: null, expiresAt: null, revoked: false, revokedAt: null });
  isoNear(createdAt, before);

  // It works at once, as a bound key: policy evaluation yes, the audience no.
  assert.equal((await authorize(first.apiKey)).status, 200);
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/subscribers`, { key: first.apiKey })).status, 403);

  const second = await minted(workspace.apiKey, { externalId: 'user-2' });
  assert.equal(second.key.name, 'bound key');
  assert.notEqual(second.apiKey, first.apiKey);

  const listed = await list(workspace.apiKey);
  assert.equal(listed.status, 200);
  // The workspace's dashboard key is no bound key; the one just used shows when.
  assert.deepEqual(listed.body.keys.map((key) => key.id), [second.key.id, first.key.id]);
  const used = listed.body.keys[1] as Summary;
  isoNear(used.lastUsedAt, Date.now());
  assert.deepEqual({ ...used, lastUsedAt: null }, first.key);
  const text = JSON.stringify(listed.body);
  for (const full of [first.apiKey, second.apiKey]) assert.ok(!text.includes(full.split('.')[1] as string));
  assert.deepEqual(Object.keys(used).sort(), ['createdAt', 'expiresAt', 'externalId', 'id', 'lastUsedAt', 'name', 'revoked', 'revokedAt']);

  const ofUser = await list(workspace.apiKey, '?externalId=user-2');
  assert.deepEqual(ofUser.body.keys, [second.key]);
  assert.equal((await list(workspace.apiKey, '?owner=me')).status, 400);

  // Stored: the SHA-256 of the secret, never the secret.
  const db = await connectDatabase();
  try {
    const { rows } = await db.query(`SELECT to_jsonb(k) AS row, secret_hash FROM account.api_keys k WHERE id = $1`, [id]);
    assert.deepEqual(rows[0].secret_hash, createHash('sha256').update(secret).digest());
    assert.ok(!JSON.stringify(rows[0].row).includes(secret));
    assert.equal(rows[0].row.origin, 'bound');
    assert.equal(rows[0].row.bound_external_id, 'user-1');
  } finally {
    await db.end();
  }
});

test('DELETE /keys/{id} revokes at once on every gateway replica, idempotently', async () => {
  const workspace = await createWorkspace('partner');
  const { key, apiKey } = await minted(workspace.apiKey, { externalId: 'user-1' });
  // Both replicas have the key verified and cached.
  for (const url of stack.gatewayUrls) assert.equal((await authorize(apiKey, url)).status, 200);

  const revoked = await revoke(workspace.apiKey, key.id);
  assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
  assert.equal(revoked.body.revoked, true);
  isoNear(revoked.body.revokedAt, Date.now());
  assert.deepEqual({ ...revoked.body, revoked: false, revokedAt: null, lastUsedAt: null }, { ...key, lastUsedAt: null });

  const again = await revoke(workspace.apiKey, key.id);
  assert.deepEqual([again.status, again.body], [200, revoked.body]);

  // The cache TTL bounds how long a replica may still accept it.
  const tookMs = await untilRefusedEverywhere(apiKey, KEY_CACHE_TTL_MS + 2_000);
  assert.ok(tookMs <= KEY_CACHE_TTL_MS + 2_000);
  const refused = await authorize(apiKey, stack.gatewayUrls[1]);
  assert.deepEqual([refused.status, refused.body.code], [401, 'unauthorized']);
  // Still listed, as revoked.
  assert.deepEqual((await list(workspace.apiKey)).body.keys.map((k) => [k.id, k.revoked]), [[key.id, true]]);
});

test('expiresInSeconds sets expiresAt; an expired bound key answers 401 on every replica', async () => {
  const workspace = await createWorkspace('partner');
  const { key } = await minted(workspace.apiKey, { externalId: 'user-1', expiresInSeconds: 60 });
  isoNear(key.expiresAt, Date.parse(key.createdAt) + 60_000, 1_000);
  const longest = await minted(workspace.apiKey, { externalId: 'user-1', expiresInSeconds: 31_536_000 });
  isoNear(longest.key.expiresAt, Date.parse(longest.key.createdAt) + 31_536_000_000, 1_000);

  // The API's shortest lifetime is a minute; the operator CLI issues a 2-second one.
  const brief = await createKey(workspace.workspaceId, 'bound', '--external-id', 'user-1', '--expires-in', '2');
  for (const url of stack.gatewayUrls) assert.equal((await authorize(brief.apiKey, url)).status, 200);
  const tookMs = await untilRefusedEverywhere(brief.apiKey, 2_000 + 2_000);
  assert.ok(tookMs >= 500, `refused after ${tookMs} ms, before it expired`);
  const listed = (await list(workspace.apiKey)).body.keys.find((k) => k.id === brief.keyId);
  assert.ok(listed && listed.expiresAt !== null && Date.parse(listed.expiresAt) <= Date.now() && !listed.revoked);
});

test('the request body is validated with limits; every bad field is named', async () => {
  const workspace = await createWorkspace('partner');
  const fields = async (body: unknown): Promise<string[]> => {
    const response = await mint(workspace.apiKey, body);
    assert.equal(response.status, 400, JSON.stringify(body));
    const error = response.body as unknown as { code: string; fields: { field: string; in: string; problem: string }[] };
    assert.equal(error.code, 'invalid_request');
    return error.fields.map((field) => `${field.in} ${field.field} ${field.problem}`);
  };
  assert.deepEqual(await fields({}), ['body externalId is required']);
  assert.deepEqual(await fields({ externalId: '' }), ['body externalId must NOT have fewer than 1 characters']);
  assert.deepEqual(await fields({ externalId: 'u'.repeat(257) }), ['body externalId must NOT have more than 256 characters']);
  assert.deepEqual(await fields({ externalId: 'u', name: '' }), ['body name must NOT have fewer than 1 characters']);
  assert.deepEqual(await fields({ externalId: 'u', name: 'n'.repeat(101) }), ['body name must NOT have more than 100 characters']);
  assert.deepEqual(await fields({ externalId: 'u', expiresInSeconds: 59 }), ['body expiresInSeconds must be >= 60']);
  assert.deepEqual(await fields({ externalId: 'u', expiresInSeconds: 31_536_001 }), ['body expiresInSeconds must be <= 31536000']);
  assert.deepEqual(await fields({ externalId: 'u', expiresInSeconds: 90.5 }), ['body expiresInSeconds must be integer']);
  assert.deepEqual((await fields({ externalId: 7, scopes: ['keys'] })).sort(), ['body externalId must be string', 'body scopes is not allowed']);
  // The limits themselves are accepted.
  await minted(workspace.apiKey, { externalId: 'u'.repeat(256), name: 'n'.repeat(100) });
  // Nothing was stored for the refused ones.
  assert.equal((await list(workspace.apiKey)).body.keys.length, 1);
});

const planUpgradeRequired = errorBody(
  'plan_upgrade_required',
  403,
  'Plan upgrade required',
  'This endpoint requires the Partner plan.',
  'Upgrade the workspace to a plan that includes this endpoint (see upgradeUrl).',
  { upgradeUrl: 'https://herald.dev/pricing' },
);

test('keys are Partner-only, minted only by dashboard keys, and another workspace cannot see or revoke them', async () => {
  const growth = await createWorkspace('growth');
  for (const [method, path, body] of [['POST', '/keys', { externalId: 'u' }], ['GET', '/keys', undefined], ['DELETE', '/keys/aaaaaaaaaaaaaaaa', undefined], ['POST', '/enroll', { externalId: 'u' }]] as const) {
    const response = await call(stack.gatewayUrl, `${SERVER_API}${path}`, { method, key: growth.apiKey, body });
    assert.equal(response.status, 403, `${method} ${path}`);
    assert.deepEqual(response.body, planUpgradeRequired);
  }

  const owner = await createWorkspace('partner');
  const other = await createWorkspace('partner');
  const { key, apiKey } = await minted(owner.apiKey, { externalId: 'user-1' });
  const notFound = errorBody('not_found', 404, `No bound key ${key.id} in this workspace.`, `No bound key ${key.id} in this workspace.`, 'Check the path and the identifier.');
  const foreign = await revoke(other.apiKey, key.id);
  assert.deepEqual([foreign.status, foreign.body], [404, notFound]);
  assert.deepEqual((await list(other.apiKey)).body, { keys: [] });
  assert.equal((await authorize(apiKey)).status, 200);
  // Only bound keys are managed here: the workspace's own dashboard key is not one.
  const dashboardId = /^pk_([a-z2-7]{16})\./.exec(owner.apiKey)?.[1] as string;
  assert.equal((await revoke(owner.apiKey, dashboardId)).status, 404);
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/identity`, { key: owner.apiKey })).status, 200);
  assert.equal((await revoke(owner.apiKey, 'no-such-key')).status, 404);

  // Runtime, connector and bound keys cannot mint, list or revoke keys.
  const keys = [
    (await createKey(owner.workspaceId, 'runtime')).apiKey,
    (await createKey(owner.workspaceId, 'connector')).apiKey,
    apiKey,
  ];
  for (const caller of keys) {
    for (const response of [await mint(caller, { externalId: 'user-9' }), await list(caller), await revoke(caller, key.id)]) {
      assert.equal(response.status, 403);
      assert.deepEqual([(response.body as unknown as Record<string, unknown>).code, (response.body as unknown as Record<string, unknown>).message], ['forbidden', 'This key cannot access this endpoint']);
    }
  }
  assert.deepEqual((await list(owner.apiKey)).body.keys.map((k) => [k.id, k.revoked]), [[key.id, false]]);
});

interface Probe {
  method: string;
  path: string;
  body?: unknown;
}

/** One call of every endpoint group, and what a bound key for user-1 gets from it. */
const boundKeyTable: Array<[group: string, probe: Probe, status: number]> = [
  ['identity', { method: 'GET', path: '/identity' }, 403],
  ['site', { method: 'GET', path: '/site' }, 403],
  ['channels', { method: 'GET', path: '/channels' }, 403],
  ['machines (list)', { method: 'GET', path: '/machines' }, 403],
  ['machines (report)', { method: 'POST', path: '/machines', body: { machineId: 'm-1' } }, 403],
  ['send', { method: 'POST', path: '/send', body: { title: 't', body: 'b' } }, 403],
  ['notifications', { method: 'GET', path: '/notifications/ntf_00000000000000000000000000000000' }, 403],
  ['subscribers (list)', { method: 'GET', path: '/subscribers' }, 403],
  ['subscribers (count)', { method: 'GET', path: '/subscribers/count' }, 403],
  ['policy (read)', { method: 'GET', path: '/policy' }, 403],
  ['policy (write)', { method: 'PUT', path: '/policy', body: { policy: 'permit(principal, action, resource);' } }, 403],
  ['keys (mint)', { method: 'POST', path: '/keys', body: { externalId: 'user-1' } }, 403],
  ['keys (list)', { method: 'GET', path: '/keys' }, 403],
  ['keys (revoke)', { method: 'DELETE', path: '/keys/aaaaaaaaaaaaaaaa' }, 403],
  ['enroll (own end-user)', { method: 'POST', path: '/enroll', body: {} }, 200],
  ['enroll (own end-user, named)', { method: 'POST', path: '/enroll', body: { externalId: 'user-1' } }, 200],
  ['enroll (another end-user)', { method: 'POST', path: '/enroll', body: { externalId: 'user-2' } }, 403],
  ['authorize (own end-user)', { method: 'POST', path: '/authorize', body: { toolName: 'x' } }, 200],
  ['authorize (another end-user)', { method: 'POST', path: '/authorize', body: { toolName: 'x', externalId: 'user-2' } }, 403],
];

test('a bound key reaches only policy evaluation and enrollment, for its own end-user', async () => {
  const workspace = await createWorkspace('partner');
  const { apiKey } = await minted(workspace.apiKey, { externalId: 'user-1' });
  for (const [group, probe, status] of boundKeyTable) {
    const response = await call(stack.gatewayUrl, `${SERVER_API}${probe.path}`, { method: probe.method, key: apiKey, body: probe.body });
    assert.equal(response.status, status, `${group}: ${JSON.stringify(response.body)}`);
    if (status === 403) {
      const message = group.includes('another end-user') ? /^This key may only .+ for its own end-user\.$/ : /^This key cannot access this endpoint$/;
      assert.equal(response.body.code, 'forbidden', group);
      assert.match(String(response.body.message), message, group);
    }
  }
  // Leaving the Partner plan disables it everywhere, even where it was allowed.
  await admin('workspace', 'set-plan', '--workspace', workspace.workspaceId, '--plan', 'enterprise');
  // The gateway sees the change once its cached verification of the key lapses (KEY_CACHE_TTL_MS).
  const changed = Date.now();
  const policyProbe = () => call(stack.gatewayUrl, `${SERVER_API}/authorize`, { method: 'POST', key: apiKey, body: { toolName: 'x' } });
  for (let response = await policyProbe(); response.status === 200; response = await policyProbe()) {
    assert.ok(Date.now() - changed < KEY_CACHE_TTL_MS + 2_000, `the plan change is not seen after ${Date.now() - changed} ms`);
    await sleep(100);
  }
  for (const [group, probe] of boundKeyTable) {
    const response = await call(stack.gatewayUrl, `${SERVER_API}${probe.path}`, { method: probe.method, key: apiKey, body: probe.body });
    assert.deepEqual([response.status, response.body.code], [403, 'plan_upgrade_required'], group);
  }
});
