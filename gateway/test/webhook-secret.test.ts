import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { HeraldError } from '@herald/errors';
import { createClient, type PromiseClient } from '@herald/grpc';
import { AccountServiceClient } from '@herald/proto/herald/account/v1/account';
import { call, createKey, createWorkspace, freePort, SERVER_API, startStack, type Stack } from '@herald/testkit';

// The workspace webhook secret: GET /webhooks/secret and POST /webhooks/secret/rotate through the
// gateway, and the account service's GetWebhookSecrets (what webhook senders sign with) over gRPC.

type WebhookSecret = { secret: string; createdAt: string; previousSecretExpiresAt: string | null };

let stack: Stack;
let account: PromiseClient<AccountServiceClient>;
before(async () => {
  stack = await startStack();
  // A replica of the account service on a known port, for the gRPC side.
  const port = await freePort();
  await stack.startService('account', { GRPC_PORT: String(port) });
  account = createClient(AccountServiceClient, `127.0.0.1:${port}`);
});
after(async () => {
  account.close();
  await stack.stop();
});

const getSecret = (key: string) => call<WebhookSecret>(stack.gatewayUrl, `${SERVER_API}/webhooks/secret`, { key });
const rotate = (key: string) => call<WebhookSecret>(stack.gatewayUrl, `${SERVER_API}/webhooks/secret/rotate`, { method: 'POST', key });

const DAY_MS = 86_400_000;
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

test('the secret is created on the first call and stays the same after', async () => {
  const { apiKey, workspaceId } = await createWorkspace();
  // Concurrent first calls agree on one secret.
  const first = await Promise.all([getSecret(apiKey), getSecret(apiKey), getSecret(apiKey)]);
  for (const response of first) assert.equal(response.status, 200, JSON.stringify(response.body));
  const { body } = first[0] ?? assert.fail('no response');
  assert.match(body.secret, SECRET);
  assert.equal(Buffer.from(body.secret.slice('whsec_'.length), 'base64').length, 32);
  assert.ok(Math.abs(Date.parse(body.createdAt) - Date.now()) < 60_000, body.createdAt);
  assert.equal(body.previousSecretExpiresAt, null);
  assert.deepEqual(Object.keys(body).sort(), ['createdAt', 'previousSecretExpiresAt', 'secret']);
  for (const response of first) assert.deepEqual(response.body, body);

  const again = await getSecret(apiKey);
  assert.equal(again.status, 200);
  assert.deepEqual(again.body, body);
  assert.deepEqual(await account.getWebhookSecrets({ workspaceId }), { secrets: [body.secret], createdAt: body.createdAt, previousSecretExpiresAt: '' });
});

test('a rotation makes a new secret; the previous one keeps signing for 24 h, an older one stops', async () => {
  const { apiKey, workspaceId } = await createWorkspace();
  const original = (await getSecret(apiKey)).body;

  const rotated = await rotate(apiKey);
  assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
  assert.match(rotated.body.secret, SECRET);
  assert.notEqual(rotated.body.secret, original.secret);
  assert.ok(Date.parse(rotated.body.createdAt) >= Date.parse(original.createdAt));
  assert.ok(rotated.body.previousSecretExpiresAt);
  assert.ok(Math.abs(Date.parse(rotated.body.previousSecretExpiresAt) - (Date.now() + DAY_MS)) < 60_000, rotated.body.previousSecretExpiresAt);
  // GET shows the same; senders sign with both, newest first.
  assert.deepEqual((await getSecret(apiKey)).body, rotated.body);
  assert.deepEqual((await account.getWebhookSecrets({ workspaceId })).secrets, [rotated.body.secret, original.secret]);

  const again = (await rotate(apiKey)).body;
  assert.notEqual(again.secret, rotated.body.secret);
  assert.deepEqual((await account.getWebhookSecrets({ workspaceId })).secrets, [again.secret, rotated.body.secret]);
});

test('a workspace sees and rotates only its own secret; an unknown workspace has none', async () => {
  const [a, b] = await Promise.all([createWorkspace(), createWorkspace()]);
  const secretA = (await getSecret(a.apiKey)).body;
  const secretB = (await getSecret(b.apiKey)).body;
  assert.notEqual(secretA.secret, secretB.secret);
  assert.equal((await rotate(b.apiKey)).status, 200);
  assert.deepEqual((await getSecret(a.apiKey)).body, secretA);
  assert.deepEqual((await account.getWebhookSecrets({ workspaceId: a.workspaceId })).secrets, [secretA.secret]);

  for (const rpc of [() => account.getWebhookSecrets({ workspaceId: 'ws_unknown' }), () => account.rotateWebhookSecret({ workspaceId: 'ws_unknown' })]) {
    await assert.rejects(rpc(), (err: unknown) => err instanceof HeraldError && err.code === 'not_found');
  }
});

test('only dashboard keys reach the secret', async () => {
  // Partner, so a bound key is usable at all.
  const { apiKey, workspaceId } = await createWorkspace('partner');
  const keys = await Promise.all([createKey(workspaceId, 'runtime'), createKey(workspaceId, 'connector'), createKey(workspaceId, 'bound', '--external-id', 'user-1')]);
  for (const { apiKey: key } of keys) {
    for (const response of [await getSecret(key), await rotate(key)]) {
      assert.equal(response.status, 403);
      assert.deepEqual(
        [(response.body as unknown as Record<string, unknown>).code, (response.body as unknown as Record<string, unknown>).message],
        ['forbidden', 'This key cannot access this endpoint'],
      );
    }
  }
  // The refused rotations changed nothing, and no one without a key gets in.
  assert.equal((await getSecret(apiKey)).body.previousSecretExpiresAt, null);
  const anonymous = await call(stack.gatewayUrl, `${SERVER_API}/webhooks/secret`);
  assert.equal(anonymous.status, 401);
  assert.equal(anonymous.body.code, 'unauthorized');
});
