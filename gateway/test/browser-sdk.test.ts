import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';

import { call, connectDatabase, createWorkspace, pushSubscription, startStack } from '@herald/testkit';
import type { Stack, TestWorkspace } from '@herald/testkit';
import type pg from 'pg';

// The browser SDK's files (/sdk/...), the hosted subscribe page (/s/<slug>) and its service
// worker, and GET /api/v1/sdk-config, through HTTP.

let stack: Stack;
let workspace: TestWorkspace;
let db: pg.Client;
const ORIGIN = 'https://example.test';
const bundleFile = (name: string) => readFileSync(fileURLToPath(import.meta.resolve(`@herald/browser-sdk/bundle/${name}`)));
const { version } = JSON.parse(readFileSync(fileURLToPath(import.meta.resolve('@herald/browser-sdk/package.json')), 'utf8')) as { version: string };
const sri = (body: Buffer) => `sha384-${createHash('sha384').update(body).digest('base64')}`;

before(async () => {
  stack = await startStack({ gatewayEnv: { ALLOW_ANY_PUSH_SERVICE: 'true' } });
  workspace = await createWorkspace('growth', 'example.test');
  db = await connectDatabase();
});
after(async () => {
  await db.end();
  await stack.stop();
});

const get = (path: string, headers: Record<string, string> = {}) => fetch(`${stack.gatewayUrl}${path}`, { headers });

test('the SDK files under their exact version are immutable, with the SRI hashes the manifest lists', async () => {
  const manifest = await call(stack.gatewayUrl, `/sdk/v${version}/manifest.json`);
  assert.equal(manifest.status, 200);
  assert.equal(manifest.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  const files = ['herald.js', 'herald.mjs', 'herald-sw.js', 'herald-page.js'];
  assert.deepEqual(manifest.body, {
    version,
    files: Object.fromEntries(files.map((name) => [name, { url: `/sdk/v${version}/${name}`, integrity: sri(bundleFile(name)), bytes: bundleFile(name).length }])),
  });
  for (const name of files) {
    const response = await get(`/sdk/v${version}/${name}`);
    const body = Buffer.from(await response.arrayBuffer());
    assert.equal(response.status, 200, name);
    assert.deepEqual(body, bundleFile(name), name);
    assert.equal(response.headers.get('content-type'), 'text/javascript; charset=utf-8');
    assert.equal(response.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal(response.headers.get('access-control-allow-origin'), '*');
    assert.equal(response.headers.get('cross-origin-resource-policy'), 'cross-origin');
    assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
    const etag = response.headers.get('etag') ?? '';
    assert.match(etag, /^"[A-Za-z0-9+/]{27}"$/);
    const again = await get(`/sdk/v${version}/${name}`, { 'if-none-match': etag });
    assert.equal(again.status, 304, name);
    assert.equal(await again.text(), '');
  }
});

test('the major version serves the same files for an hour; other versions and files are 404', async () => {
  const response = await get('/sdk/v1/herald.js');
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('cache-control'), 'public, max-age=3600');
  assert.deepEqual(Buffer.from(await response.arrayBuffer()), bundleFile('herald.js'));

  const otherVersion = await call(stack.gatewayUrl, '/sdk/v9.9.9/herald.js');
  assert.equal(otherVersion.status, 404);
  assert.equal(otherVersion.body.code, 'not_found');
  assert.equal(otherVersion.body.message, `No browser SDK v9.9.9; this server has v${version} (also as v1).`);
  const otherFile = await call(stack.gatewayUrl, `/sdk/v${version}/evil.js`);
  assert.equal(otherFile.status, 404);
  assert.equal(otherFile.body.message, 'No file evil.js in the browser SDK; it has herald.js, herald.mjs, herald-sw.js, herald-page.js and manifest.json.');
});

test('the subscribe page shows the site, escaped, under a strict policy, with Herald’s script only', async () => {
  await db.query(`UPDATE account.sites SET name = $2, logo_url = $3, primary_color = $4, button_text = $5 WHERE id = $1`, [
    workspace.siteId,
    'Tom & Jerry\'s <script>alert(1)</script> "News"',
    'https://cdn.example.test/logo.png?a=1&b="2"',
    'red;}body{display:none',
    '<b>Allow</b>',
  ]);
  const response = await get(`/s/${workspace.siteSlug}`);
  const html = await response.text();
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.equal(response.headers.get('cache-control'), 'no-store');
  assert.equal(response.headers.get('referrer-policy'), 'no-referrer');
  assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
  const nonce = /<style nonce="([A-Za-z0-9+/=]{24})">/.exec(html)?.[1];
  assert.ok(nonce, 'the style element carries the nonce');
  assert.equal(
    response.headers.get('content-security-policy'),
    `default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; script-src 'self'; style-src 'nonce-${nonce}'; img-src https://cdn.example.test; connect-src 'self'; worker-src 'self'; manifest-src 'none'`,
  );
  assert.ok(html.includes('<title>Notifications from Tom &amp; Jerry&#39;s &lt;script&gt;alert(1)&lt;/script&gt; &quot;News&quot;</title>'));
  assert.ok(html.includes('<h1>Get notifications from Tom &amp; Jerry&#39;s &lt;script&gt;alert(1)&lt;/script&gt; &quot;News&quot;</h1>'));
  assert.ok(html.includes('<img class="logo" src="https://cdn.example.test/logo.png?a=1&amp;b=%222%22" alt="">'));
  assert.ok(html.includes('<button id="subscribe" type="button" hidden>&lt;b&gt;Allow&lt;/b&gt;</button>'));
  // A colour that is not a plain hex colour never reaches the style sheet.
  assert.ok(!html.includes('display:none'));
  assert.ok(html.includes('background:#1f6feb'));
  assert.ok(
    html.includes(
      `<main data-state="loading" data-site-key="${workspace.siteKey}" data-service-worker="/s/${workspace.siteSlug}/sw.js" data-scope="/s/${workspace.siteSlug}">`,
    ),
  );
  assert.ok(html.includes(`<script src="/sdk/v${version}/herald-page.js" integrity="${sri(bundleFile('herald-page.js'))}"></script>`));
  assert.equal((html.match(/<script/g) ?? []).length, 1, 'one script element, no inline script');
});

test('a logo that is not https is left out, and the policy then allows no images', async () => {
  await db.query(`UPDATE account.sites SET logo_url = 'http://cdn.example.test/logo.png', primary_color = '#aa3300' WHERE id = $1`, [workspace.siteId]);
  const response = await get(`/s/${workspace.siteSlug}`);
  const html = await response.text();
  assert.equal(response.status, 200);
  assert.ok(!html.includes('<img'));
  assert.match(response.headers.get('content-security-policy') ?? '', /; img-src 'none'; /);
  assert.ok(html.includes('background:#aa3300'));
});

test('an unknown or impossible slug is a 404 page', async () => {
  for (const slug of ['no-such-site-here', 'Bad_Slug', 'x'.repeat(101)]) {
    const response = await get(`/s/${slug}`);
    const html = await response.text();
    assert.equal(response.status, 404, slug);
    assert.equal(response.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.equal(response.headers.get('content-security-policy'), "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    assert.ok(html.includes('<h1>No such site</h1>'));
  }
  const worker = await call(stack.gatewayUrl, '/s/no-such-site-here/sw.js');
  assert.equal(worker.status, 404);
  assert.equal(worker.body.message, 'No site no-such-site-here.');
});

test('the page’s service worker is Herald’s, allowed the page’s scope and revalidated on each update check', async () => {
  const response = await get(`/s/${workspace.siteSlug}/sw.js`);
  assert.equal(response.status, 200);
  assert.deepEqual(Buffer.from(await response.arrayBuffer()), bundleFile('herald-sw.js'));
  assert.equal(response.headers.get('content-type'), 'text/javascript; charset=utf-8');
  assert.equal(response.headers.get('service-worker-allowed'), `/s/${workspace.siteSlug}`);
  assert.equal(response.headers.get('cache-control'), 'no-cache');
});

test('GET /api/v1/sdk-config gives the site’s VAPID key to its own pages and to the hosted page', async () => {
  const site = await call(stack.gatewayUrl, `/api/v1/site/${workspace.siteSlug}`);
  // The test stack's PUBLIC_ORIGIN is http://localhost:8080: where its hosted pages are.
  for (const origin of [ORIGIN, 'http://localhost:8080']) {
    const response = await call(stack.gatewayUrl, '/api/v1/sdk-config', { key: workspace.siteKey, headers: { origin } });
    assert.equal(response.status, 200, origin);
    assert.deepEqual(response.body, { vapidPublicKey: site.body.vapidPublicKey });
    assert.equal(response.headers.get('access-control-allow-origin'), origin);
  }
  // The hosted page's own GET carries no Origin (same-origin), only its Fetch metadata (sent with
  // node:http: fetch will not send another Host).
  const withoutOrigin = (headers: Record<string, string>) =>
    new Promise<{ status: number; body: { message?: string; vapidPublicKey?: string } }>((resolve, reject) => {
      httpGet(`${stack.gatewayUrl}/api/v1/sdk-config`, { headers: { authorization: `Bearer ${workspace.siteKey}`, ...headers } }, (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) as { message?: string } }));
      }).on('error', reject);
    });
  assert.deepEqual(await withoutOrigin({ host: 'localhost:8080', 'sec-fetch-site': 'same-origin' }), { status: 200, body: { vapidPublicKey: site.body.vapidPublicKey } });
  for (const headers of [{ host: 'other.test', 'sec-fetch-site': 'same-origin' } as Record<string, string>, { host: 'localhost:8080', 'sec-fetch-site': 'cross-site' }, { host: 'localhost:8080' }]) {
    const refused = await withoutOrigin(headers);
    assert.equal(refused.status, 403, JSON.stringify(headers));
    assert.equal(refused.body.message, "The Origin header is missing: the site key works only from pages on the site's registered domain (example.test).");
  }
  const elsewhere = await call(stack.gatewayUrl, '/api/v1/sdk-config', { key: workspace.siteKey, headers: { origin: 'https://other.test' } });
  assert.equal(elsewhere.status, 403);
  assert.equal(elsewhere.body.message, "Origin https://other.test is not the site's registered domain (example.test); the site key works only from pages on that domain.");
  const noKey = await call(stack.gatewayUrl, '/api/v1/sdk-config', { headers: { origin: ORIGIN } });
  assert.equal(noKey.status, 401);
  assert.equal(noKey.body.message, 'Missing site key. Send it as a Bearer token: "Authorization: Bearer pk_<id>".');
  const preflight = await fetch(`${stack.gatewayUrl}/api/v1/sdk-config`, { method: 'OPTIONS', headers: { origin: ORIGIN, 'access-control-request-method': 'GET' } });
  assert.equal(preflight.status, 204);
  assert.equal(preflight.headers.get('access-control-allow-methods'), 'GET, OPTIONS');
});

test('the hosted page’s origin (Herald’s own) may subscribe with the site key', async () => {
  const hosted = await call(stack.gatewayUrl, '/api/v1/subscribe', {
    method: 'POST',
    key: workspace.siteKey,
    body: pushSubscription(),
    headers: { origin: 'http://localhost:8080' },
  });
  assert.equal(hosted.status, 201);
  assert.equal(hosted.body.created, true);
});
