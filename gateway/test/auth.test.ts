import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, test } from 'node:test';

import { admin, call, connectDatabase, createKey, createWorkspace, SERVER_API, startStack, type Stack, type TestWorkspace } from '@herald/testkit';
import type pg from 'pg';

// Authentication: missing, malformed, unknown, revoked and expired keys, the older key form,
// and that only hashes of secrets are stored.

let stack: Stack;
let workspace: TestWorkspace;
let db: pg.Client;

before(async () => {
  // A short cache TTL so revocation is observable quickly; production default is 5 s.
  stack = await startStack({ gatewayEnv: { KEY_CACHE_TTL_MS: '1000' } });
  workspace = await createWorkspace('growth');
  db = await connectDatabase();
});

after(async () => {
  await db.end();
  await stack.stop();
});

const identity = (key?: string, headers: Record<string, string> = {}) =>
  call(stack.gatewayUrl, `${SERVER_API}/identity`, { ...(key ? { key } : {}), headers });

function unauthorized(message: string) {
  return {
    error: 'Unauthorized',
    code: 'unauthorized',
    status: 401,
    message,
    hint: 'Send a full API key as "Authorization: Bearer pk_<id>.<secret>".',
    documentation: 'http://localhost:8080/docs/errors#unauthorized',
  };
}

const invalidKey = {
  ...unauthorized('The API key is invalid, revoked or expired.'),
  error: 'Invalid API key',
};

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test('a request without a key is 401 and says to use a Bearer key', async () => {
  const response = await identity();
  assert.equal(response.status, 401);
  assert.deepEqual(response.body, unauthorized('Missing API key. Send it as a Bearer token: "Authorization: Bearer pk_<id>.<secret>".'));
  assert.equal(response.headers.get('x-ratelimit-limit'), null);
});

test('another authorization scheme is treated as missing', async () => {
  const response = await identity(undefined, { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` });
  assert.equal(response.status, 401);
  assert.equal(response.body.code, 'unauthorized');
});

test('malformed keys are 401', async () => {
  for (const key of ['nonsense', 'pk_', 'pk_short.secret', `pk_${'a'.repeat(16)}.tooshort`, `sk_${'a'.repeat(16)}.${'b'.repeat(43)}`]) {
    const response = await identity(key);
    assert.equal(response.status, 401, key);
    assert.deepEqual(response.body, unauthorized('Malformed API key. Use a Bearer key of the form pk_<id>.<secret>.'), key);
  }
});

test('a site key is refused on server endpoints', async () => {
  const response = await identity(workspace.siteKey);
  assert.equal(response.status, 401);
  assert.deepEqual(
    response.body,
    unauthorized('A site key (pk_<id>) only works on the public browser endpoints; use a full API key.'),
  );
});

test('an unknown key and a wrong secret get the same answer', async () => {
  const unknown = await identity(`pk_${'a'.repeat(16)}.${'b'.repeat(43)}`);
  assert.equal(unknown.status, 401);
  assert.deepEqual(unknown.body, invalidKey);
  const wrongSecret = await identity(`pk_${workspace.keyId}.${'c'.repeat(43)}`);
  assert.equal(wrongSecret.status, 401);
  assert.deepEqual(wrongSecret.body, invalidKey);
});

test('the full key works, also in the older pk_<id>.sk_<secret> form', async () => {
  const current = await identity(workspace.apiKey);
  assert.equal(current.status, 200);
  const older = await identity(workspace.apiKey.replace('.', '.sk_'));
  assert.equal(older.status, 200);
  assert.equal((older.body.workspace as { id: string }).id, workspace.workspaceId);
});

test('a revoked key stops working within the cache TTL', async () => {
  const { keyId, apiKey } = await createKey(workspace.workspaceId, 'dashboard');
  assert.equal((await identity(apiKey)).status, 200);
  assert.deepEqual(await admin('key', 'revoke', '--key', keyId), { keyId, revoked: true });
  const revokedAt = Date.now();
  await until(async () => (await identity(apiKey)).status === 401, 3_000);
  assert.ok(Date.now() - revokedAt <= 2_500, 'revocation took effect within TTL plus margin');
  assert.deepEqual((await identity(apiKey)).body, invalidKey);
});

test('an expired key stops working at its expiry, whatever the cache TTL', async () => {
  const { apiKey } = await createKey(workspace.workspaceId, 'runtime', '--expires-in', '2');
  const first = await identity(apiKey);
  assert.equal(first.status, 200);
  assert.ok(typeof (first.body.key as { expiresAt: string }).expiresAt === 'string');
  await until(async () => (await identity(apiKey)).status === 401, 4_000);
});

test('only a SHA-256 hash of the secret is stored, never the secret', async () => {
  const { keyId, apiKey } = await createKey(workspace.workspaceId, 'connector');
  const secret = apiKey.split('.')[1] as string;
  const { rows } = await db.query<{ secret_hash: Buffer; row: string }>(
    'SELECT secret_hash, row_to_json(k)::text AS row FROM account.api_keys k WHERE id = $1',
    [keyId],
  );
  assert.equal(rows.length, 1);
  assert.deepEqual(rows[0]?.secret_hash, createHash('sha256').update(secret).digest());
  assert.ok(!rows[0]?.row.includes(secret));
});

test('lastUsedAt is recorded when a key is used', async () => {
  const { apiKey } = await createKey(workspace.workspaceId, 'dashboard');
  const before = Date.now();
  await identity(apiKey);
  const second = await identity(apiKey);
  const lastUsedAt = Date.parse((second.body.key as { lastUsedAt: string }).lastUsedAt);
  assert.ok(lastUsedAt >= before - 1_000 && lastUsedAt <= Date.now() + 1_000);
});
