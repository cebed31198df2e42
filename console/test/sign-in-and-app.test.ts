import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import AxeBuilder from '@axe-core/playwright';
import { admin, chromiumPath, SERVER_API } from '@herald/testkit';
import { chromium, type Browser } from 'playwright-core';

import { newAddress, startConsoleHarness, type ConsoleHarness } from './support.js';

// The console's sign-in page beside the email link: "Sign in with a passkey" (WebAuthn through the
// bundled @simplewebauthn/browser, Chromium's virtual authenticator over the DevTools protocol) and
// "Sign in with SSO" (to the workspace's GET /sign-in/sso/{workspaceId}); and the installable app
// (its manifest, service worker and icons, as Chromium judges them, and an offline start).

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

test('a member with a passkey signs in from the console’s sign-in page; no CSP violation, no serious axe violation', async () => {
  const email = newAddress('marketer');
  const invited = await admin<{ memberId: string; signInUrl: string }>('member', 'invite', '--workspace', harness.workspace.workspaceId, '--email', email, '--role', 'marketer', '--name', 'Mara');
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (message) => {
    // Signed out, the console's GET /me is a 401, which Chromium logs, as it logs the /passkeys page's
    // missing /favicon.ico; anything else (a CSP violation) is a problem.
    const expected = message.text().includes('status of 401') || new URL(message.location().url || 'about:blank').pathname === '/favicon.ico';
    if (message.type() === 'error' && !expected) problems.push(`console: ${message.text()} (${message.location().url})`);
  });
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });
  try {
    // A passkey registered on the /passkeys page while signed in by the invite's link, then signed out everywhere.
    await page.goto(invited.signInUrl.replace(/^https?:\/\/[^/]+/, harness.origin));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'You are signed in' }).waitFor();
    await page.goto(`${harness.origin}/passkeys`);
    await page.locator('body[data-ready="true"]').waitFor();
    await page.getByLabel('Name of a new passkey').fill('Laptop');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await page.getByRole('button', { name: 'Delete Laptop' }).waitFor();
    assert.equal((await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials.length, 1);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in with a passkey' }).waitFor();
    const linkSession = (await context.cookies(harness.origin)).find((cookie) => cookie.name === 'herald_session');
    assert.equal(linkSession, undefined);

    await page.goto(`${harness.origin}/console/`);
    await page.getByRole('heading', { name: 'Sign in to Herald', level: 1 }).waitFor();
    assert.deepEqual(
      (await new AxeBuilder({ page }).analyze()).violations.filter((violation) => violation.impact === 'serious' || violation.impact === 'critical').map((violation) => violation.id),
      [],
    );
    const signInPost = page.waitForResponse((response) => response.request().method() === 'POST' && response.url().endsWith(`${SERVER_API}/sign-in/passkey`));
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    assert.equal((await signInPost).status(), 200);
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    assert.match(await page.getByRole('banner').innerText(), new RegExp(`${email.replace(/[.+]/g, '\\$&')} \\(marketer\\)`));
    const session = (await context.cookies(harness.origin)).find((cookie) => cookie.name === 'herald_session');
    assert.deepEqual([session?.httpOnly, session?.sameSite], [true, 'Lax']);
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
  }
});

test('"Sign in with SSO" takes the browser to the workspace’s single sign-on, remembering the workspace; one without SSO answers 404', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  try {
    await page.goto(`${harness.origin}/console/`);
    await page.getByLabel('Workspace id').fill(harness.workspace.workspaceId);
    const started = page.waitForResponse((response) => new URL(response.url()).pathname === `/sign-in/sso/${harness.workspace.workspaceId}`);
    await page.getByLabel('Workspace id').press('Enter');
    const response = await started;
    // The harness's workspace has no provider configured (gateway/test/sso.test.ts follows a configured one to the end).
    assert.equal(response.status(), 404);
    assert.equal(response.request().method(), 'GET');

    await page.goto(`${harness.origin}/console/`);
    assert.equal(await page.getByLabel('Workspace id').inputValue(), harness.workspace.workspaceId);
  } finally {
    await context.close();
  }
});

test('the console is an installable app: its manifest and service worker as Chromium reads them, the files as the gateway serves them, and an offline start', async () => {
  for (const [path, type] of [
    ['/console/app.webmanifest', 'application/manifest+json'],
    ['/console/sw.js', 'text/javascript; charset=utf-8'],
    ['/console/icon-192.png', 'image/png'],
    ['/console/icon-512.png', 'image/png'],
    ['/console/apple-touch-icon.png', 'image/png'],
  ] as const) {
    const response = await fetch(`${harness.origin}${path}`);
    assert.equal(response.status, 200, path);
    assert.deepEqual([response.headers.get('content-type'), response.headers.get('cache-control'), response.headers.get('x-content-type-options')], [type, 'no-cache', 'nosniff'], path);
    const etag = response.headers.get('etag');
    assert.ok(etag);
    await response.arrayBuffer();
    assert.equal((await fetch(`${harness.origin}${path}`, { headers: { 'if-none-match': etag } })).status, 304, path);
  }

  const context = await browser.newContext();
  const page = await context.newPage();
  try {
    await page.goto(`${harness.origin}/console/`);
    await page.getByRole('heading', { name: 'Sign in to Herald', level: 1 }).waitFor();
    const scope = await page.evaluate(async () => (await navigator.serviceWorker.ready).scope);
    assert.equal(scope, `${harness.origin}/console/`);

    const cdp = await context.newCDPSession(page);
    const manifest = await cdp.send('Page.getAppManifest');
    assert.equal(manifest.url, `${harness.origin}/console/app.webmanifest`);
    assert.deepEqual(manifest.errors, []);
    const parsed = JSON.parse(manifest.data ?? '{}') as { name: string; start_url: string; scope: string; display: string };
    assert.deepEqual([parsed.name, parsed.start_url, parsed.scope, parsed.display], ['Herald Console', '/console/inbox', '/console/', 'standalone']);
    // A Playwright context is an incognito profile, where Chromium installs nothing: that is the only objection.
    assert.deepEqual((await cdp.send('Page.getInstallabilityErrors')).installabilityErrors.map((error) => error.errorId), ['in-incognito']);

    // Offline, the installed app still opens: the cached page, which says it cannot reach Herald.
    await context.setOffline(true);
    await page.goto(`${harness.origin}/console/inbox`);
    await page.getByRole('heading', { name: 'The console cannot reach Herald', level: 1 }).waitFor();
    await context.setOffline(false);
  } finally {
    await context.close();
  }
});
