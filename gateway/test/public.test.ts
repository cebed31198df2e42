import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';

import { call, createWorkspace, errorBody, pushSubscription, SERVER_API, startStack } from '@herald/testkit';
import type { ApiResponse, Stack, TestPushSubscription, TestWorkspace } from '@herald/testkit';

// The browser SDK's endpoints under /api/v1: site-key authentication, Origin and CORS, push
// subscription validation, subscribe / subscription-change / unsubscribe, the public site record.

let stack: Stack;
/** ALLOW_LOCALHOST_SITES=false and only real push services: a production gateway. */
let productionUrl: string;
let workspace: TestWorkspace;
const ORIGIN = 'https://example.test';

before(async () => {
  stack = await startStack({ gatewayEnv: { ALLOW_ANY_PUSH_SERVICE: 'true' } });
  productionUrl = await stack.addGateway({ ALLOW_LOCALHOST_SITES: 'false' });
  workspace = await createWorkspace('growth', 'example.test');
});
after(() => stack.stop());

interface BrowserRequest {
  key?: string | undefined;
  origin?: string | undefined;
  url?: string;
}

/** By default the site key and the site's origin; `key: undefined` or `origin: undefined` sends none. */
function post(path: string, body: unknown, request: BrowserRequest = {}) {
  const key = 'key' in request ? request.key : workspace.siteKey;
  const origin = 'origin' in request ? request.origin : ORIGIN;
  return call(request.url ?? stack.gatewayUrl, `/api/v1${path}`, { method: 'POST', key, body, headers: origin === undefined ? {} : { origin } });
}

const subscribe = (body: object, request?: BrowserRequest) => post('/subscribe', body, request);

const originHint = "Call this endpoint from a page on the site's registered domain, over https (http only for localhost sites).";
/** 403 for a page that is not on the site's domain. */
const forbidden = (message: string) => errorBody('forbidden', 403, 'Forbidden', message, originHint);
const siteKeyHint = 'Send the site key (pk_<id>) shown by GET /api/v1/server/site.';

/** 400 naming each bad body field. */
function invalidBody(...fields: Array<[string, string]>) {
  return errorBody(
    'invalid_request',
    400,
    'Invalid request',
    `Invalid request body: ${fields.map(([field, problem]) => `${field} ${problem}`).join('; ')}.`,
    'Fix the request as the message says and send it again.',
    { fields: fields.map(([field, problem]) => ({ field, in: 'body', problem })) },
  );
}

async function subscriber(id: string, apiKey = workspace.apiKey): Promise<ApiResponse> {
  return call(stack.gatewayUrl, `${SERVER_API}/subscribers/${id}`, { key: apiKey });
}

test('subscribe creates a subscriber (201), and the same endpoint again is the same subscriber (200)', async () => {
  const push = pushSubscription();
  const first = await subscribe({
    ...push,
    expirationTime: null,
    externalId: 'user-42',
    tags: ['news', 'vip'],
    browser: 'Firefox 128',
    os: 'Linux',
    language: 'de-DE',
    timezone: 'Europe/Berlin',
  });
  assert.equal(first.status, 201);
  const subscriberId = first.body.subscriberId as string;
  assert.match(subscriberId, /^sub_[a-z2-7]{16}$/);
  assert.deepEqual(first.body, { success: true, subscriberId, created: true });
  assert.equal(first.headers.get('access-control-allow-origin'), ORIGIN);
  assert.equal(first.headers.get('vary'), 'Origin');
  assert.equal(first.headers.get('x-ratelimit-limit'), '500');
  assert.ok(Number(first.headers.get('x-ratelimit-remaining')) < 500);

  const again = await subscribe({ ...push, tags: ['sale'] });
  assert.equal(again.status, 200);
  assert.deepEqual(again.body, { success: true, subscriberId, created: false });

  const stored = await subscriber(subscriberId);
  assert.equal(stored.status, 200);
  assert.deepEqual(stored.body, {
    id: subscriberId,
    siteId: workspace.siteId,
    status: 'active',
    externalId: 'user-42',
    // No proof came with it (approver-devices.test.ts covers proofs).
    externalIdVerified: false,
    tags: ['news', 'vip', 'sale'],
    customData: {},
    browser: 'Firefox 128',
    os: 'Linux',
    country: null,
    createdAt: stored.body.createdAt,
    updatedAt: stored.body.updatedAt,
    delivery: { pushService: 'https://127.0.0.1:9', reachable: true, unsubscribedAt: null },
    device: { browser: 'Firefox 128', os: 'Linux', language: 'de-DE', timezone: 'Europe/Berlin' },
  });
});

test('a foreign or missing Origin is 403, and nothing is stored', async () => {
  const push = pushSubscription();
  for (const origin of ['https://evil.example', 'http://example.test', 'https://example.test:8443', 'https://www.example.test']) {
    const response = await subscribe(push, { origin });
    assert.equal(response.status, 403, origin);
    assert.deepEqual(
      response.body,
      forbidden(`Origin ${origin} is not the site's registered domain (example.test); the site key works only from pages on that domain.`),
      origin,
    );
  }
  const missing = await subscribe(push, { origin: undefined });
  assert.equal(missing.status, 403);
  assert.deepEqual(missing.body, forbidden("The Origin header is missing: the site key works only from pages on the site's registered domain (example.test)."));
  assert.equal(missing.headers.get('access-control-allow-origin'), null);
  // None of them stored the subscription: from the site's own origin it is new.
  assert.equal((await subscribe(push)).status, 201);
});

test('a localhost site accepts http from its own port, unless the deployment disallows localhost sites', async () => {
  const local = await createWorkspace('starter', 'localhost:3000');
  const push = pushSubscription();
  const created = await subscribe(push, { key: local.siteKey, origin: 'http://localhost:3000' });
  assert.equal(created.status, 201);
  assert.equal(created.headers.get('access-control-allow-origin'), 'http://localhost:3000');
  assert.equal(created.headers.get('x-ratelimit-limit'), '200');
  const otherPort = await subscribe(push, { key: local.siteKey, origin: 'http://localhost:3001' });
  assert.equal(otherPort.status, 403);

  const production = await subscribe(push, { key: local.siteKey, origin: 'http://localhost:3000', url: productionUrl });
  assert.equal(production.status, 403);
  assert.deepEqual(production.body, forbidden("Localhost sites are disabled on this deployment; register the site's public domain instead of localhost:3000."));
});

test('anything but a known site key is 401', async () => {
  const push = pushSubscription();
  const cases: Array<[string | undefined, string]> = [
    [undefined, 'Missing site key. Send it as a Bearer token: "Authorization: Bearer pk_<id>".'],
    [
      workspace.apiKey,
      'A full API key is secret and must never reach a browser; these endpoints take the site key (pk_<id>). Rotate the key if it was exposed.',
    ],
    ['pk_short', 'Malformed site key. Use a Bearer key of the form pk_<id>.'],
    ['sk_aaaaaaaaaaaaaaaa', 'Malformed site key. Use a Bearer key of the form pk_<id>.'],
  ];
  for (const [key, message] of cases) {
    const response = await subscribe(push, { key });
    assert.equal(response.status, 401, String(key));
    assert.deepEqual(response.body, errorBody('unauthorized', 401, 'Unauthorized', message, siteKeyHint), String(key));
    // The SDK can read the error: the page's origin is allowed to see it.
    assert.equal(response.headers.get('access-control-allow-origin'), ORIGIN);
  }
  const unknown = await subscribe(push, { key: 'pk_aaaaaaaaaaaaaaaa' });
  assert.equal(unknown.status, 401);
  assert.deepEqual(unknown.body, errorBody('unauthorized', 401, 'Unauthorized', 'Unknown site key.', siteKeyHint));
});

test('a workspace without an active plan cannot subscribe browsers', async () => {
  const inactive = await createWorkspace('none', 'example.test');
  const response = await subscribe(pushSubscription(), { key: inactive.siteKey });
  assert.equal(response.status, 403);
  assert.deepEqual(
    response.body,
    errorBody('subscription_required', 403, 'Subscription required', 'This workspace has no active plan.', 'Choose a plan for this workspace.', {
      upgradeUrl: 'https://herald.dev/pricing',
    }),
  );
});

test('push subscriptions are validated: P-256 point, 16-byte auth, https endpoint on a push service', async () => {
  const valid = pushSubscription();
  const withKeys = (keys: Partial<TestPushSubscription['keys']>) => ({ ...valid, keys: { ...valid.keys, ...keys } });
  const notAPoint = 'must be base64url of a 65-byte uncompressed P-256 point';
  const cases: Array<[unknown, Array<[string, string]>]> = [
    [withKeys({ p256dh: randomBytes(64).toString('base64url') }), [['keys.p256dh', notAPoint]]],
    [withKeys({ p256dh: Buffer.concat([Buffer.from([2]), randomBytes(64)]).toString('base64url') }), [['keys.p256dh', notAPoint]]],
    [withKeys({ p256dh: 'not base64url!' }), [['keys.p256dh', notAPoint]]],
    // 0x04 followed by 64 zero bytes: the right shape, but not on the curve.
    [withKeys({ p256dh: Buffer.concat([Buffer.from([4]), Buffer.alloc(64)]).toString('base64url') }), [['keys.p256dh', 'is not a point on the P-256 curve']]],
    [withKeys({ auth: randomBytes(15).toString('base64url') }), [['keys.auth', 'must be base64url of exactly 16 bytes']]],
    [withKeys({ auth: randomBytes(17).toString('base64url') }), [['keys.auth', 'must be base64url of exactly 16 bytes']]],
    [{ ...valid, endpoint: 'http://127.0.0.1:9/push/1' }, [['endpoint', 'must be an https URL']]],
    [{ ...valid, endpoint: 'not a url' }, [['endpoint', 'must be an https URL']]],
    [{ ...valid, endpoint: 'https://user:pass@127.0.0.1/push/1' }, [['endpoint', 'must not carry credentials']]],
    [
      { endpoint: 'http://127.0.0.1/x', keys: { p256dh: 'AAAA', auth: 'AAAA' } },
      [
        ['endpoint', 'must be an https URL'],
        ['keys.p256dh', notAPoint],
        ['keys.auth', 'must be base64url of exactly 16 bytes'],
      ],
    ],
  ];
  for (const [body, fields] of cases) {
    const response = await subscribe(body as object);
    assert.equal(response.status, 400, JSON.stringify(body));
    assert.deepEqual(response.body, invalidBody(...fields), JSON.stringify(body));
  }
  // Shapes the schema refuses.
  const tooLong = await subscribe({ ...valid, endpoint: `https://127.0.0.1/${'x'.repeat(2_048)}` });
  assert.deepEqual(tooLong.body, invalidBody(['endpoint', 'must NOT have more than 2048 characters']));
  const missing = await subscribe({ endpoint: valid.endpoint, keys: { p256dh: valid.keys.p256dh }, colour: 'blue' });
  assert.deepEqual(missing.body, invalidBody(['colour', 'is not allowed'], ['keys.auth', 'is required']));
  const badTag = await subscribe({ ...valid, tags: ['a,b'] });
  assert.deepEqual(badTag.body, invalidBody(['tags.0', 'must match pattern "^[^,]*$"']));

  // Padded base64url is accepted and stored unpadded.
  const padded = pushSubscription();
  const accepted = await subscribe({ ...padded, keys: { p256dh: `${padded.keys.p256dh}=`, auth: `${padded.keys.auth}==` } });
  assert.equal(accepted.status, 201);
});

test('a production gateway accepts endpoints of real push services only', async () => {
  const keys = pushSubscription().keys;
  const elsewhere = await subscribe({ endpoint: 'https://push.example.net/abc', keys }, { url: productionUrl });
  assert.equal(elsewhere.status, 400);
  assert.deepEqual(
    elsewhere.body,
    invalidBody([
      'endpoint',
      'is not on a known push service (fcm.googleapis.com, updates.push.services.mozilla.com, push.services.mozilla.com, web.push.apple.com, notify.windows.com, push.apple.com)',
    ]),
  );
  // A look-alike host is not a subdomain of a push service.
  const lookalike = await subscribe({ endpoint: 'https://evilfcm.googleapis.com.example/abc', keys }, { url: productionUrl });
  assert.equal(lookalike.status, 400);
  for (const endpoint of [
    `https://fcm.googleapis.com/fcm/send/${randomBytes(8).toString('hex')}`,
    `https://updates.push.services.mozilla.com/wpush/v2/${randomBytes(8).toString('hex')}`,
    `https://web.push.apple.com/${randomBytes(8).toString('hex')}`,
    `https://wns2-by3p.notify.windows.com/w/?token=${randomBytes(8).toString('hex')}`,
  ]) {
    const response = await subscribe({ endpoint, keys }, { url: productionUrl });
    assert.equal(response.status, 201, endpoint);
  }
});

test('subscription-change moves the subscriber to the new endpoint', async () => {
  const [old, next] = [pushSubscription(), pushSubscription()];
  const created = await subscribe({ ...old, externalId: 'mover' });
  const subscriberId = created.body.subscriberId as string;
  const changed = await post('/subscription-change', { oldEndpoint: old.endpoint, newSubscription: { ...next, expirationTime: null } });
  assert.equal(changed.status, 200);
  assert.deepEqual(changed.body, { success: true, subscriberId });
  // The new endpoint is that subscriber now; the old one is not known any more.
  assert.deepEqual((await subscribe(next)).body, { success: true, subscriberId, created: false });
  const unknown = await post('/subscription-change', { oldEndpoint: old.endpoint, newSubscription: pushSubscription() });
  assert.equal(unknown.status, 404);
  assert.deepEqual(unknown.body, errorBody('not_found', 404, 'Not found', 'No subscriber with this oldEndpoint.', 'Check the path and the identifier.'));
  const invalid = await post('/subscription-change', { oldEndpoint: next.endpoint, newSubscription: { ...next, keys: { ...next.keys, auth: 'AAAA' } } });
  assert.deepEqual(invalid.body, invalidBody(['newSubscription.keys.auth', 'must be base64url of exactly 16 bytes']));
  const foreign = await post('/subscription-change', { oldEndpoint: next.endpoint, newSubscription: pushSubscription() }, { origin: 'https://evil.example' });
  assert.equal(foreign.status, 403);
});

test('unsubscribe ends the subscription; an unknown endpoint is 404', async () => {
  const push = pushSubscription();
  const subscriberId = (await subscribe(push)).body.subscriberId as string;
  const response = await post('/unsubscribe', { endpoint: push.endpoint });
  assert.equal(response.status, 200);
  assert.deepEqual(response.body, { success: true });
  assert.equal(response.headers.get('access-control-allow-origin'), ORIGIN);
  const stored = await subscriber(subscriberId);
  assert.equal(stored.body.status, 'unsubscribed');
  const delivery = stored.body.delivery as { reachable: boolean; unsubscribedAt: string };
  assert.equal(delivery.reachable, false);
  assert.ok(Date.parse(delivery.unsubscribedAt) > Date.now() - 60_000);
  // Again: still the same state, still 200.
  assert.deepEqual((await post('/unsubscribe', { endpoint: push.endpoint })).body, { success: true });
  const unknown = await post('/unsubscribe', { endpoint: 'https://127.0.0.1:9/push/unknown' });
  assert.equal(unknown.status, 404);
  assert.deepEqual(unknown.body, errorBody('not_found', 404, 'Not found', 'No subscriber with this endpoint.', 'Check the path and the identifier.'));
  // Another site's key cannot unsubscribe this site's subscribers.
  const other = await createWorkspace('growth', 'example.test');
  const resubscribed = await subscribe(push);
  assert.equal(resubscribed.status, 200);
  assert.equal((await post('/unsubscribe', { endpoint: push.endpoint }, { key: other.siteKey })).status, 404);
  assert.equal((await subscriber(subscriberId)).body.status, 'active');
});

test('GET /api/v1/site/{slug} is public, readable from any page, and limited per IP', async () => {
  const response = await call(stack.gatewayUrl, `/api/v1/site/${workspace.siteSlug}`, { headers: { origin: 'https://anywhere.example' } });
  assert.equal(response.status, 200);
  const site = await call(stack.gatewayUrl, `${SERVER_API}/site`, { key: workspace.apiKey });
  assert.deepEqual(response.body, {
    name: site.body.name,
    logoUrl: null,
    domain: 'example.test',
    siteKey: workspace.siteKey,
    branding: { primaryColor: '#1f6feb', buttonText: 'Allow notifications' },
    vapidPublicKey: site.body.vapidPublicKey,
  });
  assert.equal(response.headers.get('access-control-allow-origin'), '*');
  assert.equal(response.headers.get('x-ratelimit-limit'), '100');
  const unknown = await call(stack.gatewayUrl, '/api/v1/site/no-such-site');
  assert.equal(unknown.status, 404);
  assert.deepEqual(unknown.body, errorBody('not_found', 404, 'No site no-such-site.', 'No site no-such-site.', 'Check the path and the identifier.'));
  const badSlug = await call(stack.gatewayUrl, '/api/v1/site/Bad%20Slug');
  assert.equal(badSlug.status, 400);
});

test('CORS preflights admit origins that can be a site, with the allowed methods and headers', async () => {
  const preflight = (path: string, origin: string | undefined, url = stack.gatewayUrl) =>
    call(url, `/api/v1${path}`, {
      method: 'OPTIONS',
      headers: {
        ...(origin ? { origin } : {}),
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
  for (const path of ['/subscribe', '/subscription-change', '/unsubscribe']) {
    const response = await preflight(path, ORIGIN);
    assert.equal(response.status, 204, path);
    assert.equal(response.body, '');
    assert.equal(response.headers.get('access-control-allow-origin'), ORIGIN);
    assert.equal(response.headers.get('access-control-allow-methods'), 'POST, OPTIONS');
    assert.equal(response.headers.get('access-control-allow-headers'), 'authorization, content-type');
    assert.equal(response.headers.get('access-control-max-age'), '600');
    assert.equal(response.headers.get('vary'), 'Origin');
  }
  assert.equal((await preflight('/subscribe', 'http://localhost:3000')).status, 204);
  for (const [origin, url, message] of [
    ['http://example.test', stack.gatewayUrl, "Origin http://example.test cannot be a site's: pages must be served over https (http only on localhost)."],
    ['null', stack.gatewayUrl, "Origin null cannot be a site's: pages must be served over https (http only on localhost)."],
    ['http://localhost:3000', productionUrl, "Origin http://localhost:3000 cannot be a site's: pages must be served over https (http only on localhost)."],
    [undefined, stack.gatewayUrl, 'A CORS preflight needs an Origin header.'],
  ] as const) {
    const response = await preflight('/subscribe', origin, url);
    assert.equal(response.status, 403, origin);
    assert.equal(response.headers.get('access-control-allow-origin'), null, origin);
    assert.equal(response.headers.get('access-control-allow-methods'), null, origin);
    assert.deepEqual(response.body, forbidden(message), origin);
  }
  const site = await call(stack.gatewayUrl, `/api/v1/site/${workspace.siteSlug}`, { method: 'OPTIONS', headers: { origin: 'http://anything.example' } });
  assert.equal(site.status, 204);
  assert.equal(site.headers.get('access-control-allow-origin'), '*');
  assert.equal(site.headers.get('access-control-allow-methods'), 'GET, OPTIONS');
});
