import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { admin, call, connectDatabase, createKey, createWorkspace, errorBody, freePort, pushSubscription, SERVER_API, startStack, type Stack, type TestWorkspace } from '@herald/testkit';

// Enrollment (Partner) and pairing (every plan): POST /enroll and POST /pair make a single-use
// link; its page subscribes the browser under the externalId, verified (an approver device),
// through POST /api/v1/enroll/<token>.

const gatewayEnv = { ALLOW_ANY_PUSH_SERVICE: 'true', IP_RATE_LIMIT_PER_MINUTE: '10000' };

let stack: Stack;
/** A gateway whose account service makes links that live one second. */
let shortLivedUrl: string;
before(async () => {
  stack = await startStack({ gatewayEnv });
  const port = await freePort();
  await stack.startService('account', { GRPC_PORT: String(port), ENROLLMENT_TTL_SECONDS: '1' });
  shortLivedUrl = await stack.addGateway({ ...gatewayEnv, ACCOUNT_GRPC_URL: `127.0.0.1:${port}` });
});
after(() => stack.stop());

interface Link {
  enrollmentUrl: string;
  expiresAt: string;
  externalId: string;
}

/**
 * Until `link` has expired: its own expiresAt has passed (links live ENROLLMENT_TTL_SECONDS, whole
 * seconds, so one second at least). The account service reads the same clock; expiresAt is shown to
 * the millisecond, hence the few milliseconds more.
 */
async function pastExpiry(link: Link): Promise<void> {
  await sleep(Math.max(0, Date.parse(link.expiresAt) + 10 - Date.now()));
}

/** A link, or an error body. */
type EnrollAnswer = Link & { code?: string; message?: string; fields?: unknown };
const enroll = (key: string, body: unknown, url = stack.gatewayUrl) => call<EnrollAnswer>(url, `${SERVER_API}/enroll`, { method: 'POST', key, body });

async function link(key: string, body: unknown, url = stack.gatewayUrl): Promise<{ token: string; body: Link }> {
  const response = await enroll(key, body, url);
  assert.equal(response.status, 200, JSON.stringify(response.body));
  // Links name PUBLIC_ORIGIN (the default here); the test reaches the gateway directly.
  const token = /^http:\/\/localhost:8080\/enroll\/([A-Za-z0-9_-]{43})$/.exec(response.body.enrollmentUrl)?.[1];
  assert.ok(token, response.body.enrollmentUrl);
  return { token, body: response.body };
}

const page = (token: string) => call<string>(stack.gatewayUrl, `/enroll/${token}`);
const use = (token: string, body: unknown) => call(stack.gatewayUrl, `/api/v1/enroll/${token}`, { method: 'POST', body });
const subscribers = (workspace: TestWorkspace, externalId: string) =>
  call<{ data: Array<Record<string, unknown>> }>(stack.gatewayUrl, `${SERVER_API}/subscribers?externalId=${encodeURIComponent(externalId)}`, { key: workspace.apiKey });

const usedError = errorBody('conflict', 409, 'Enrollment link already used', 'This enrollment link has already been used.', 'Each link works once; ask for a new enrollment link.');
const expiredError = errorBody('gone', 410, 'Enrollment link expired', 'This enrollment link has expired.', 'Ask for a new enrollment link.');
const unknownError = errorBody('not_found', 404, 'Enrollment link not found', 'This enrollment link does not exist.', 'Ask for a new enrollment link.');

function assertPage(response: { status: number; headers: Headers; body: string }, status: number, heading: string): void {
  assert.equal(response.status, status, response.body);
  assert.equal(response.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.equal(response.headers.get('cache-control'), 'no-store');
  assert.equal(response.headers.get('referrer-policy'), 'no-referrer');
  assert.match(response.body, /^<!doctype html>\n<html lang="en">/);
  assert.match(response.body, /<meta name="viewport" content="width=device-width, initial-scale=1">/);
  assert.ok(response.body.includes(`<h1>${heading}</h1>`), response.body);
}

test('a link enrolls its end-user once: the page, the subscription under the externalId, then "already used"', async () => {
  const workspace = await createWorkspace('partner');
  const before = Date.now();
  const { token, body } = await link(workspace.apiKey, { externalId: 'user-1' });
  assert.equal(body.externalId, 'user-1');
  // Fifteen minutes.
  assert.ok(Math.abs(Date.parse(body.expiresAt) - before - 900_000) < 5_000, body.expiresAt);

  // Only the token's SHA-256 is stored.
  const db = await connectDatabase();
  try {
    const { rows } = await db.query(`SELECT to_jsonb(e) AS row, token_hash FROM account.enrollments e WHERE workspace_id = $1`, [workspace.workspaceId]);
    assert.equal(rows.length, 1);
    assert.deepEqual(rows[0].token_hash, createHash('sha256').update(token).digest());
    assert.ok(!JSON.stringify(rows[0].row).includes(token));
    assert.equal(rows[0].row.external_id, 'user-1');
  } finally {
    await db.end();
  }

  const site = (await call<{ name: string; vapidPublicKey: string; slug: string }>(stack.gatewayUrl, `${SERVER_API}/site`, { key: workspace.apiKey })).body;
  const fresh = await page(token);
  assertPage(fresh, 200, `Get notifications from ${site.name}`);
  assert.ok(fresh.body.includes(`<button id="enable" type="button">Allow notifications</button>`));
  assert.ok(fresh.body.includes(`data-submit="/api/v1/enroll/${token}" data-key="${site.vapidPublicKey}" data-site="${site.slug}"`));
  assert.ok(fresh.body.includes('pushManager.subscribe'));
  assert.ok(fresh.body.includes('role="status" aria-live="polite"'));
  // The page's script and style run under a per-response nonce, nothing else.
  const nonce = /script-src 'nonce-([A-Za-z0-9+/=]+)'/.exec(fresh.headers.get('content-security-policy') ?? '')?.[1];
  assert.ok(nonce && fresh.body.includes(`<script nonce="${nonce}">`));
  // Opening the page does not use the link up.
  assertPage(await page(token), 200, `Get notifications from ${site.name}`);

  const push = pushSubscription();
  const enrolled = await use(token, { ...push, expirationTime: null, language: 'de-DE', timezone: 'Europe/Berlin' });
  assert.equal(enrolled.status, 201, JSON.stringify(enrolled.body));
  const subscriberId = enrolled.body.subscriberId as string;
  assert.deepEqual(enrolled.body, { success: true, subscriberId, created: true, externalId: 'user-1' });

  const listed = await subscribers(workspace, 'user-1');
  assert.deepEqual(listed.body.data.map((s) => [s.id, s.externalId, s.externalIdVerified, s.status]), [[subscriberId, 'user-1', true, 'active']]);
  const detail = await call<{ device: Record<string, unknown> }>(stack.gatewayUrl, `${SERVER_API}/subscribers/${subscriberId}`, { key: workspace.apiKey });
  assert.deepEqual([detail.body.device.language, detail.body.device.timezone], ['de-DE', 'Europe/Berlin']);

  const again = await use(token, pushSubscription());
  assert.deepEqual([again.status, again.body], [409, usedError]);
  const used = await page(token);
  assertPage(used, 409, 'This link has already been used');
  assert.ok(used.body.includes(`ask ${site.name} for a new link`));
  assert.ok(!used.body.includes('<script') && !used.body.includes('<button'));
  assert.equal((await subscribers(workspace, 'user-1')).body.data.length, 1);
});

test('two concurrent uses of one link: exactly one wins', async () => {
  const workspace = await createWorkspace('partner');
  for (let round = 0; round < 5; round += 1) {
    const externalId = `user-${round}`;
    const { token } = await link(workspace.apiKey, { externalId });
    const responses = await Promise.all([use(token, pushSubscription()), use(token, pushSubscription()), use(token, pushSubscription())]);
    const statuses = responses.map((r) => r.status).sort();
    assert.deepEqual(statuses, [201, 409, 409], JSON.stringify(responses.map((r) => r.body)));
    for (const loser of responses.filter((r) => r.status === 409)) assert.deepEqual(loser.body, usedError);
    const winner = responses.find((r) => r.status === 201);
    assert.deepEqual((await subscribers(workspace, externalId)).body.data.map((s) => s.id), [winner?.body.subscriberId]);
  }
});

test('an expired link answers 410, page and endpoint; the subscription is not stored', async () => {
  const workspace = await createWorkspace('partner');
  const { token, body } = await link(workspace.apiKey, { externalId: 'late-user' }, shortLivedUrl);
  assert.ok(Date.parse(body.expiresAt) - Date.now() <= 1_000);
  await pastExpiry(body);
  const expired = await page(token);
  assertPage(expired, 410, 'This link has expired');
  assert.ok(!expired.body.includes('<script'));
  const late = await use(token, pushSubscription());
  assert.deepEqual([late.status, late.body], [410, expiredError]);
  assert.deepEqual((await subscribers(workspace, 'late-user')).body.data, []);
});

test('unknown and malformed links are 404; a bad subscription is 400 and does not use the link up', async () => {
  const unknown = randomBytes(32).toString('base64url');
  for (const token of [unknown, 'short', `${unknown}x`]) {
    assertPage(await page(token), 404, 'Link not found');
    const response = await use(token, pushSubscription());
    assert.deepEqual([response.status, response.body], [404, unknownError], token);
  }

  const workspace = await createWorkspace('partner');
  const { token } = await link(workspace.apiKey, { externalId: 'user-1' });
  const push = pushSubscription();
  const invalid = await use(token, { ...push, endpoint: 'http://push.example/1', keys: { ...push.keys, auth: 'AAAA' } });
  assert.equal(invalid.status, 400);
  assert.deepEqual(invalid.body.fields, [
    { field: 'endpoint', in: 'body', problem: 'must be an https URL' },
    { field: 'keys.auth', in: 'body', problem: 'must be base64url of exactly 16 bytes' },
  ]);
  // The browser cannot pick the end-user or tag itself: the link decides.
  const widened = await use(token, { ...push, externalId: 'someone-else', tags: ['vip'] });
  assert.equal(widened.status, 400);
  assert.deepEqual((widened.body.fields as { field: string }[]).map((f) => f.field).sort(), ['externalId', 'tags']);
  assert.equal((await page(token)).status, 200);
  assert.equal((await use(token, push)).status, 201);
});

test('POST /enroll: a bound key enrolls only its own end-user; other keys must name one; Partner only', async () => {
  const workspace = await createWorkspace('partner');
  const bound = (await createKey(workspace.workspaceId, 'bound', '--external-id', 'user-7')).apiKey;
  assert.equal((await link(bound, {})).body.externalId, 'user-7');
  assert.equal((await link(bound, { externalId: 'user-7' })).body.externalId, 'user-7');
  const other = await enroll(bound, { externalId: 'user-8' });
  assert.equal(other.status, 403);
  assert.deepEqual([other.body.code, other.body.message], ['forbidden', 'This key may only create enrollment links for its own end-user.']);

  const missing = await enroll(workspace.apiKey, {});
  assert.equal(missing.status, 400);
  assert.deepEqual(missing.body.fields, [{ field: 'externalId', in: 'body', problem: 'is required' }]);
  for (const body of [{ externalId: '' }, { externalId: 'x'.repeat(257) }, { externalId: 'x', ttl: 60 }]) {
    assert.equal((await enroll(workspace.apiKey, body)).status, 400, JSON.stringify(body));
  }
  const runtime = await enroll((await createKey(workspace.workspaceId, 'runtime')).apiKey, { externalId: 'user-1' });
  assert.deepEqual([runtime.status, runtime.body.message], [403, 'This key cannot access this endpoint']);

  const growth = await createWorkspace('growth');
  const refused = await enroll(growth.apiKey, { externalId: 'user-1' });
  assert.deepEqual([refused.status, refused.body.code], [403, 'plan_upgrade_required']);
});

test('a link stops working while its workspace is off the Partner plan, and works again once back', async () => {
  const workspace = await createWorkspace('partner');
  const { token } = await link(workspace.apiKey, { externalId: 'user-1' });
  await admin('workspace', 'set-plan', '--workspace', workspace.workspaceId, '--plan', 'enterprise');
  const unavailable = await page(token);
  assertPage(unavailable, 403, 'Enrollment is not available');
  assert.ok(!unavailable.body.includes('<script'));
  const refused = await use(token, pushSubscription());
  assert.deepEqual([refused.status, refused.body], [
    403,
    errorBody('plan_upgrade_required', 403, 'Plan upgrade required', 'Enrollment requires the Partner plan.', 'Upgrade the workspace to a plan that includes this endpoint (see upgradeUrl).', {
      upgradeUrl: 'https://herald.dev/pricing',
    }),
  ]);
  await admin('workspace', 'set-plan', '--workspace', workspace.workspaceId, '--plan', 'partner');
  assert.equal((await page(token)).status, 200);
  assert.equal((await use(token, pushSubscription())).status, 201);
});

test('an enrollment subscribes to its own workspace\'s site only', async () => {
  const [owner, other] = [await createWorkspace('partner'), await createWorkspace('partner')];
  const { token } = await link(owner.apiKey, { externalId: 'shared-id' });
  const response = await use(token, pushSubscription());
  assert.equal(response.status, 201);
  assert.equal((await subscribers(owner, 'shared-id')).body.data.length, 1);
  assert.deepEqual((await subscribers(other, 'shared-id')).body.data, []);
  const foreign = await call(stack.gatewayUrl, `${SERVER_API}/subscribers/${response.body.subscriberId as string}`, { key: other.apiKey });
  assert.equal(foreign.status, 404);
});

const pair = (key: string, body: unknown, url = stack.gatewayUrl) => call<EnrollAnswer>(url, `${SERVER_API}/pair`, { method: 'POST', key, body });

async function pairing(key: string, body: unknown, url = stack.gatewayUrl): Promise<{ token: string; body: Link }> {
  const response = await pair(key, body, url);
  assert.equal(response.status, 200, JSON.stringify(response.body));
  const token = /^http:\/\/localhost:8080\/enroll\/([A-Za-z0-9_-]{43})$/.exec(response.body.enrollmentUrl)?.[1];
  assert.ok(token, response.body.enrollmentUrl);
  return { token, body: response.body };
}

test('POST /pair on any plan: a single-use link that makes the browser the key owner\'s verified device', async () => {
  const workspace = await createWorkspace('free');
  const before = Date.now();
  const { token, body } = await pairing((await createKey(workspace.workspaceId, 'runtime')).apiKey, {});
  assert.equal(body.externalId, 'owner');
  assert.ok(Math.abs(Date.parse(body.expiresAt) - before - 900_000) < 5_000, body.expiresAt);
  const site = (await call<{ name: string }>(stack.gatewayUrl, `${SERVER_API}/site`, { key: workspace.apiKey })).body;
  assertPage(await page(token), 200, `Receive questions from ${site.name} on this device`);

  const used = await use(token, pushSubscription());
  assert.deepEqual([used.status, used.body.externalId], [201, 'owner']);
  assert.deepEqual((await subscribers(workspace, 'owner')).body.data.map((s) => [s.id, s.externalIdVerified]), [[used.body.subscriberId, true]]);
  // Once only.
  assert.deepEqual([(await use(token, pushSubscription())).status, (await use(token, pushSubscription())).body], [409, usedError]);
  assertPage(await page(token), 409, 'This link has already been used');
  assert.equal((await subscribers(workspace, 'owner')).body.data.length, 1);

  // A dashboard key may pair an end-user's device too; a bound key only its own end-user's.
  assert.equal((await pairing(workspace.apiKey, { externalId: 'user-3' })).body.externalId, 'user-3');
  const partner = await createWorkspace('partner');
  const bound = (await createKey(partner.workspaceId, 'bound', '--external-id', 'user-7')).apiKey;
  assert.equal((await pairing(bound, {})).body.externalId, 'user-7');
  const other = await pair(bound, { externalId: 'user-8' });
  assert.deepEqual([other.status, other.body.message], [403, 'This key may only pair devices for its own end-user.']);
  // A connector key cannot; bad bodies are 400.
  const connector = await pair((await createKey(workspace.workspaceId, 'connector')).apiKey, {});
  assert.deepEqual([connector.status, connector.body.message], [403, 'This key cannot access this endpoint']);
  for (const bad of [{ externalId: '' }, { externalId: 'x'.repeat(257) }, { ttl: 60 }]) assert.equal((await pair(workspace.apiKey, bad)).status, 400, JSON.stringify(bad));
});

test('a pairing link expires (410) and subscribes into its own workspace only', async () => {
  const workspace = await createWorkspace('growth');
  const late = await pairing(workspace.apiKey, {}, shortLivedUrl);
  assert.ok(Date.parse(late.body.expiresAt) - Date.now() <= 1_000);
  await pastExpiry(late.body);
  assertPage(await page(late.token), 410, 'This link has expired');
  assert.deepEqual([(await use(late.token, pushSubscription())).status, (await use(late.token, pushSubscription())).body], [410, expiredError]);
  assert.deepEqual((await subscribers(workspace, 'owner')).body.data, []);

  const other = await createWorkspace('growth');
  const { token } = await pairing(workspace.apiKey, {});
  const used = await use(token, pushSubscription());
  assert.equal(used.status, 201);
  assert.deepEqual((await subscribers(other, 'owner')).body.data, []);
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/subscribers/${used.body.subscriberId as string}`, { key: other.apiKey })).status, 404);
  // Pairing links keep working off the Partner plan: they are not enrollment links.
  const kept = await pairing(workspace.apiKey, {});
  await admin('workspace', 'set-plan', '--workspace', workspace.workspaceId, '--plan', 'starter');
  assert.equal((await use(kept.token, pushSubscription())).status, 201);
});

test('the service worker the page registers shows pushes and opens their url', async () => {
  const response = await call<string>(stack.gatewayUrl, '/enroll/sw.js');
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'text/javascript; charset=utf-8');
  assert.ok(response.body.includes("addEventListener('push'") && response.body.includes('showNotification') && response.body.includes('openWindow'));
});
