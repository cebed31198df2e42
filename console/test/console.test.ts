import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, chromiumPath, eventually, pushSubscription, SERVER_API } from '@herald/testkit';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

import { csrfOf, fetchFromPage, forbiddenForRole, newAddress, ownerPage as signedInOwner, screenshotPath, seriousViolations, signInLinkFromMail, signInThroughConsole, SITE_DOMAIN, startConsoleHarness, type ConsoleHarness } from './support.js';

// The console in Debian's Chromium (playwright-core, no browser download) on the real
// stack: served by the gateway under /console, signed in by an email link read from Mailpit, every
// call through the public REST API with the session cookie and the CSRF header.

let harness: ConsoleHarness;
let browser: Browser;
before(async () => {
  harness = await startConsoleHarness();
  browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: ['--no-sandbox'] });
});
after(async () => {
  await browser?.close();
  await harness?.stop();
});

const ownerPage = () => signedInOwner(browser, harness);

test('the gateway serves the console: index.html on every console path (no-cache, strict CSP), hashed assets immutable, unknown assets 404', async () => {
  const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: https:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
  const pages = await Promise.all(['/console', '/console/', '/console/keys', '/console/no/such/page'].map((path) => fetch(`${harness.origin}${path}`)));
  const html = await pages[0]?.text();
  for (const response of pages) {
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.equal(response.headers.get('cache-control'), 'no-cache');
    assert.equal(response.headers.get('content-security-policy'), csp);
    assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
  }
  assert.ok(html);
  // No inline script or style: two files, by hashed name.
  const script = /<script type="module" src="(\/console\/assets\/main-[A-Z0-9]{8}\.js)" integrity="sha384-[A-Za-z0-9+/=]+"><\/script>/.exec(html)?.[1];
  const style = /<link rel="stylesheet" href="(\/console\/assets\/main-[A-Z0-9]{8}\.css)" integrity="sha384-[A-Za-z0-9+/=]+">/.exec(html)?.[1];
  assert.ok(script && style, html);
  assert.doesNotMatch(html, /<script>|<style|style=/);

  for (const [path, type] of [
    [script, 'text/javascript; charset=utf-8'],
    [style, 'text/css; charset=utf-8'],
  ] as const) {
    const asset = await fetch(`${harness.origin}${path}`);
    assert.equal(asset.status, 200);
    assert.equal(asset.headers.get('content-type'), type);
    assert.equal(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal(asset.headers.get('x-content-type-options'), 'nosniff');
    const etag = asset.headers.get('etag') ?? '';
    assert.match(etag, /^"[A-Za-z0-9_-]{27}"$/);
    const again = await fetch(`${harness.origin}${path}`, { headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
  }
  const missing = await fetch(`${harness.origin}/console/assets/main-NOSUCH00.js`);
  assert.equal(missing.status, 404);
  assert.equal(((await missing.json()) as { code: string }).code, 'not_found');
});

test('sign in by an email link read from Mailpit: the overview, then sign out; no serious axe violation on the sign-in page or the overview', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${harness.origin}/console/`);
  await page.getByRole('heading', { name: 'Sign in to Herald', level: 1 }).waitFor();
  assert.deepEqual(await seriousViolations(page), []);
  await page.screenshot({ path: await screenshotPath('console-sign-in.png') });

  // An address that is no member's gets the same answer, and no mail.
  const stranger = newAddress('stranger');
  await page.getByLabel('Email address').fill(stranger);
  await page.getByRole('button', { name: 'Email me a sign-in link' }).click();
  await page.getByRole('heading', { name: 'Check your mail' }).waitFor();
  await page.getByRole('button', { name: 'Use another address' }).click();

  // A draft campaign, made with the workspace's key, is on the overview.
  const draft = await call(harness.origin, `${SERVER_API}/campaigns`, { method: 'POST', key: harness.workspace.apiKey, body: { name: 'Spring sale', title: 'Spring sale', body: '20% off today' } });
  assert.equal(draft.status, 201, JSON.stringify(draft.body));
  // A decision waiting for a person is on it too.
  const decision = await call(harness.origin, `${SERVER_API}/decisions`, { method: 'POST', key: harness.workspace.apiKey, body: { question: 'Deploy release 4.2?', agentName: 'release-bot' } });
  assert.equal(decision.status, 200, JSON.stringify(decision.body));

  const before = (await harness.mailpit.messagesTo(harness.ownerEmail)).length;
  await signInThroughConsole(page, harness, harness.ownerEmail, before);
  assert.deepEqual(await harness.mailpit.messagesTo(stranger), []);
  await page.getByText(`${harness.ownerEmail} (owner)`).waitFor();
  await page.getByRole('heading', { name: 'Recent campaigns' }).waitFor();
  assert.equal(await page.getByRole('row', { name: /Spring sale/ }).innerText(), 'Spring sale\tdraft\tNot started\t0\t0\t0\t–\t–');
  // The subscribers' count can arrive after the campaigns ('…' until then).
  const figures = await eventually('the figures', () => page.getByRole('definition').allTextContents(), (shown) => !shown.includes('…'));
  assert.deepEqual(figures, ['0', '–', '–', '0']);
  const waiting = await page.getByRole('table', { name: 'Pending decisions' }).getByRole('row', { name: /Deploy release 4\.2\?/ }).innerText();
  assert.match(waiting, /^Deploy release 4\.2\?\trelease-bot\t/);
  assert.equal(await page.getByRole('navigation', { name: 'Console' }).getByRole('link').allTextContents().then((names) => names.join(', ')), 'Overview, Decisions, Subscribers, Segments, Campaigns, Templates, Flows, Policy, API keys, Members, Settings');
  assert.deepEqual(await seriousViolations(page), []);
  await page.screenshot({ path: await screenshotPath('console-overview.png'), fullPage: true });

  await page.getByRole('button', { name: 'Sign out', exact: true }).click();
  await page.getByRole('heading', { name: 'Sign in to Herald', level: 1 }).waitFor();
  const cookies = await context.cookies();
  assert.deepEqual(cookies.filter((cookie) => cookie.name === 'herald_session'), []);
  await context.close();
});

test('API keys by keyboard alone: create (origin and scopes shown, the secret once), use it against the API, see its last use, revoke it', async () => {
  const { context, page } = await ownerPage();
  await page.getByRole('link', { name: 'API keys' }).click();
  await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
  await page.getByText('No key yet.').waitFor();
  assert.deepEqual(await seriousViolations(page), []);

  // From the heading, Tab reaches "Create key"; Enter opens the dialog with focus in its first field.
  const focused = () => page.evaluate(() => (document.activeElement?.id || document.activeElement?.textContent) ?? '');
  let tabs = 0;
  while ((await focused()) !== 'Create key') {
    await page.keyboard.press('Tab');
    tabs += 1;
    assert.ok(tabs < 20, 'Tab never reached "Create key"');
  }
  await page.keyboard.press('Enter');
  await page.getByRole('dialog', { name: 'Create an API key' }).waitFor();
  assert.equal(await focused(), 'key-name');
  assert.deepEqual(await seriousViolations(page), []);
  await page.keyboard.type('Checkout server');
  await page.keyboard.press('Tab');
  assert.equal(await focused(), 'key-external-id');
  await page.keyboard.type('user-42');
  await page.keyboard.press('Tab');
  assert.equal(await focused(), 'key-expiry');
  await page.keyboard.press('ArrowDown'); // 1 day
  await page.keyboard.press('Tab');
  assert.equal(await focused(), 'Create');
  await page.screenshot({ path: await screenshotPath('console-create-key.png') });
  await page.keyboard.press('Enter');

  await page.getByRole('dialog', { name: 'Your new key' }).waitFor();
  assert.equal(await focused(), 'new-key-secret');
  const apiKey = await page.getByLabel('API key').inputValue();
  assert.match(apiKey, /^pk_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
  await page.keyboard.press('Tab');
  assert.equal(await focused(), 'Copy');
  await page.keyboard.press('Tab');
  assert.equal(await focused(), 'Done');
  await page.keyboard.press('Enter');
  await page.getByRole('dialog').waitFor({ state: 'hidden' });
  // Focus goes back to what opened the dialog; the secret is nowhere on the page any more.
  assert.equal(await focused(), 'Create key');
  assert.equal(await page.getByText(apiKey).count(), 0);

  const row = page.getByRole('row', { name: /Checkout server/ });
  assert.match(await row.innerText(), /user-42\s+bound/);
  assert.match(await row.innerText(), /Never\s+.+\s+Active/);

  // The key works against the API, as curl would use it; its scopes are the bound origin's.
  const headers = { authorization: `Bearer ${apiKey}` };
  const reach = await fetch(`${harness.origin}${SERVER_API}/reachability`, { headers });
  assert.equal(reach.status, 200);
  assert.deepEqual(await reach.json(), { externalId: 'user-42', reachable: false, browserSubscriptions: 0, nativeAppDevices: 0, channels: [] });
  const identity = await fetch(`${harness.origin}${SERVER_API}/identity`, { headers });
  assert.equal(identity.status, 403);

  const lastUsed = await eventually(
    'the key list shows its last use',
    async () => {
      await page.reload();
      return page.getByRole('row', { name: /Checkout server/ }).innerText();
    },
    (text) => !/\tNever\t/.test(text),
  );
  assert.doesNotMatch(lastUsed, /Never/);
  await page.screenshot({ path: await screenshotPath('console-keys.png'), fullPage: true });

  await page.getByRole('button', { name: 'Revoke Checkout server' }).click();
  const confirm = page.getByRole('dialog', { name: 'Revoke this key?' });
  await confirm.getByRole('button', { name: 'Revoke' }).click();
  await confirm.waitFor({ state: 'hidden' });
  await page.getByRole('row', { name: /Checkout server/ }).getByText('Revoked').waitFor();
  // Refused once the gateway's verified-key cache (1 s here) lets go of it.
  await eventually('the revoked key is refused', async () => (await fetch(`${harness.origin}${SERVER_API}/reachability`, { headers })).status, (status) => status === 401, 5_000);
  await context.close();
});

test('members: the owner invites a viewer; the viewer sees no admin page or button, and the API refuses them with 403; the owner removes them', async () => {
  const { context, page } = await ownerPage();
  await page.getByRole('link', { name: 'Members' }).click();
  await page.getByRole('heading', { name: 'Members', level: 1 }).waitFor();
  const viewerEmail = newAddress('viewer');
  await page.getByLabel('Email address').fill(viewerEmail);
  await page.getByLabel('Name (optional)').fill('Vera Viewer');
  await page.getByLabel('Role').selectOption('viewer');
  await page.getByRole('button', { name: 'Invite' }).click();
  await page.getByText(`Invited ${viewerEmail}: a sign-in link is on its way to them.`).waitFor();
  const invitedRow = page.getByRole('row', { name: /Vera Viewer/ });
  assert.match(await invitedRow.innerText(), new RegExp(`Vera Viewer\\s+${viewerEmail.replace(/[.]/g, '\\.')}\\s+viewer\\s+invited\\s+Never`));
  assert.deepEqual(await seriousViolations(page), []);
  await page.screenshot({ path: await screenshotPath('console-members.png'), fullPage: true });

  // The viewer signs in with the invite's link (the first mail), in a browser of their own.
  const viewerContext = await browser.newContext();
  const viewer = await viewerContext.newPage();
  await viewer.goto(await signInLinkFromMail(harness, viewerEmail, 0));
  await viewer.getByRole('button', { name: 'Sign in' }).click();
  await viewer.getByRole('link', { name: 'Open the Herald Console' }).click();
  await viewer.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
  assert.deepEqual(await viewer.getByRole('navigation', { name: 'Console' }).getByRole('link').allTextContents(), ['Overview', 'Decisions', 'Subscribers', 'Segments', 'Campaigns', 'Templates', 'Flows', 'Policy', 'Settings']);
  assert.deepEqual(await seriousViolations(viewer), []);
  // The viewer reads campaigns and flows, with nothing to compose, create or move.
  for (const [link, heading, hidden] of [['Campaigns', 'Campaigns', 'New campaign'], ['Flows', 'Flows', 'New flow']] as const) {
    await viewer.getByRole('link', { name: link }).click();
    await viewer.getByRole('heading', { name: heading, level: 2 }).waitFor();
    assert.equal(await viewer.getByRole('heading', { name: hidden }).count(), 0);
  }

  // Typed in, the keys page shows what the API said; the API refuses the viewer's admin action.
  await viewer.goto(`${harness.origin}/console/keys`);
  await viewer.getByRole('alert').getByText('Your role cannot access this endpoint').waitFor();
  assert.equal(await viewer.getByRole('button', { name: 'Create key' }).count(), 0);
  const created = await fetchFromPage(viewer, 'POST', '/keys', { externalId: 'user-1' }, await csrfOf(viewer));
  assert.deepEqual(created, { status: 403, body: forbiddenForRole(harness, 'viewer', 'change', 'keys') });
  // Without the CSRF token the session changes nothing either.
  const noCsrf = await fetchFromPage(page, 'POST', '/members', { email: newAddress('x'), role: 'viewer' });
  assert.equal(noCsrf.status, 403);
  assert.equal((noCsrf.body as { message: string }).message, 'Cross-site request refused.');

  // The owner removes the viewer: their open console is signed out at its next call.
  await page.reload();
  await page.getByRole('button', { name: `Remove ${viewerEmail}` }).click();
  const confirm = page.getByRole('dialog', { name: 'Remove this member?' });
  await confirm.getByRole('button', { name: 'Remove' }).click();
  await confirm.waitFor({ state: 'hidden' });
  await page.getByRole('row', { name: /Vera Viewer/ }).waitFor({ state: 'detached' });
  await viewer.reload();
  await viewer.getByRole('heading', { name: 'Sign in to Herald', level: 1 }).waitFor();
  await viewerContext.close();
  await context.close();
});

/** A browser subscribes to the workspace's site through the public SDK endpoint. */
async function subscribe(externalId: string, tags: readonly string[]): Promise<void> {
  const subscribed = await call(harness.origin, '/api/v1/subscribe', {
    method: 'POST',
    key: harness.workspace.siteKey,
    headers: { origin: `https://${SITE_DOMAIN}` },
    body: { ...pushSubscription(), externalId, tags },
  });
  assert.equal(subscribed.status, 201, JSON.stringify(subscribed.body));
}

test('subscribers: search by external id, tags and status, with the counts; no serious axe violation', async () => {
  await subscribe('user-1', ['vip', 'beta']);
  await subscribe('user-2', ['vip']);
  await subscribe('user-3', []);
  const { context, page } = await ownerPage();
  await page.getByRole('link', { name: 'Subscribers' }).click();
  await page.getByRole('heading', { name: 'Subscribers', level: 1 }).waitFor();
  await page.getByText('3 active of 3 subscribers (0 unsubscribed).').waitFor();
  const externalIds = async () => {
    await page.getByRole('table').or(page.getByText('No subscriber matches.')).waitFor();
    return (await page.locator('tbody tr td:nth-child(2)').allTextContents()).sort();
  };
  assert.deepEqual(await externalIds(), ['user-1', 'user-2', 'user-3']);
  assert.deepEqual(await seriousViolations(page), []);
  await page.screenshot({ path: await screenshotPath('console-subscribers.png'), fullPage: true });

  const search = page.getByRole('search', { name: 'Subscribers' });
  const searchFor = async (fields: { externalId?: string; tags?: string; status?: string }) => {
    await search.getByLabel('External id').fill(fields.externalId ?? '');
    await search.getByLabel('Tags').fill(fields.tags ?? '');
    await search.getByLabel('Status').selectOption(fields.status ?? '');
    const answered = page.waitForResponse((response) => response.url().includes(`${SERVER_API}/subscribers?`));
    await search.getByRole('button', { name: 'Search' }).click();
    assert.equal((await answered).status(), 200);
    return externalIds();
  };
  assert.deepEqual(await searchFor({ tags: 'vip' }), ['user-1', 'user-2']);
  assert.deepEqual(await searchFor({ tags: 'vip, beta' }), ['user-1']);
  assert.deepEqual(await searchFor({ externalId: 'user-3', status: 'active' }), ['user-3']);
  assert.deepEqual(await searchFor({ status: 'unsubscribed' }), []);
  await page.getByRole('status').getByText('No subscriber matches.').waitFor();
  await context.close();
});

test('segments: create one by tags, its count is live (a new subscriber shows up without a reload); no serious axe violation', async () => {
  await subscribe('segment-1', ['autumn']);
  await subscribe('segment-2', ['autumn', 'gold']);
  const { context, page } = await ownerPage();
  await page.getByRole('link', { name: 'Segments' }).click();
  await page.getByRole('heading', { name: 'Segments', level: 1 }).waitFor();
  await page.getByLabel('Name').fill('Autumn gold');
  await page.getByLabel('Subscribers with all of these tags').fill('autumn, gold');
  await page.getByRole('button', { name: 'Create segment' }).click();
  const row = page.getByRole('row', { name: /Autumn gold/ });
  await row.getByRole('cell', { name: 'tags all of autumn, gold' }).waitFor();
  const counts = async () => (await row.getByRole('cell').allTextContents()).slice(1, 3);
  assert.deepEqual(await eventually('the first count', counts, (cells) => cells[0] !== '…'), ['1', '1']);
  assert.deepEqual(await seriousViolations(page), []);
  await page.screenshot({ path: await screenshotPath('console-segments.png'), fullPage: true });

  await subscribe('segment-3', ['gold', 'autumn', 'vip']);
  // The page asks again every 15 s.
  assert.deepEqual(await eventually('the live count', counts, (cells) => cells[0] === '2', 20_000), ['2', '2']);
  await context.close();
});

test('templates: the workspace\'s templates, as the API lists them; no serious axe violation', async () => {
  const created = await call(harness.origin, `${SERVER_API}/templates`, {
    method: 'POST',
    key: harness.workspace.apiKey,
    body: { name: 'Welcome', title: 'Hello {{name|there}}', body: 'Thanks for subscribing.', actionUrl: 'https://shop.example.test/welcome' },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const { context, page } = await ownerPage();
  await page.getByRole('link', { name: 'Templates' }).click();
  await page.getByRole('heading', { name: 'Templates', level: 1 }).waitFor();
  const row = page.getByRole('row', { name: /Welcome/ });
  await row.waitFor();
  assert.deepEqual((await row.getByRole('cell').allTextContents()).slice(0, 3), ['Hello {{name|there}}', 'Thanks for subscribing.', 'https://shop.example.test/welcome']);
  assert.deepEqual(await seriousViolations(page), []);
  await context.close();
});

test('sign out everywhere ends every session of the member, in every browser', async () => {
  const first = await ownerPage();
  const second = await ownerPage();
  await second.page.getByRole('button', { name: 'Sign out everywhere' }).click();
  await second.page.getByRole('heading', { name: 'Sign in to Herald', level: 1 }).waitFor();
  await first.page.reload();
  await first.page.getByRole('heading', { name: 'Sign in to Herald', level: 1 }).waitFor();
  await first.context.close();
  await second.context.close();
});
