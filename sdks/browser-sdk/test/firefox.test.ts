import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { eventually, startStack, type Stack, type TestWorkspace } from '@herald/testkit';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

import { artifactPath, browserPath, startSiteWorkspace, type TestSite } from './support.js';

// The SDK and the hosted subscribe page in Debian's Firefox ESR, driven through WebDriver BiDi
// (puppeteer-core, no browser download). Notifications are refused by the profile
// (permissions.default.desktop-notification = 2), as a visitor who blocked them. The full push
// loop in Firefox is firefox-push.test.ts.

let stack: Stack;
let workspace: TestWorkspace;
let site: TestSite;
let browser: Browser;
let profile: string;

before(async () => {
  stack = await startStack({ gatewayEnv: { ALLOW_ANY_PUSH_SERVICE: 'true' } });
  ({ workspace, site } = await startSiteWorkspace(stack.gatewayUrl));
  profile = await mkdtemp(join(tmpdir(), 'herald-firefox-'));
  browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: browserPath('HERALD_FIREFOX', '/usr/bin/firefox-esr'),
    headless: true,
    userDataDir: profile,
    extraPrefsFirefox: { 'permissions.default.desktop-notification': 2 },
  });
});
after(async () => {
  await browser?.close();
  await rm(profile, { recursive: true, force: true });
  await site?.close();
  await stack?.stop();
});

const heraldEvents = (page: Page) => page.evaluate('window.heraldEvents') as Promise<unknown[][]>;

test('Firefox: the SDK is supported on the site; a refused permission calls onPermissionDenied and subscribe() refuses', async () => {
  const page = await browser.newPage();
  await page.goto(`${site.origin}/`);
  await page.waitForFunction('window.herald !== undefined');
  assert.equal(await page.evaluate('window.herald.isSupported()'), true);
  assert.equal(await page.evaluate('window.herald.promptForPermission()'), null);
  assert.deepEqual(await heraldEvents(page), [['permissionDenied']]);
  await assert.rejects(page.evaluate('window.herald.subscribe()'), /Notification permission is denied; call promptForPermission\(\) first\./);
  await page.close();
});

test('Firefox: a page that is not a secure context gets onNotSupported', async () => {
  const page = await browser.newPage();
  await page.goto(site.insecureUrl());
  await eventually('onNotSupported', () => heraldEvents(page), (events) => events.length > 0);
  assert.deepEqual(await heraldEvents(page), [['notSupported']]);
  assert.equal(await page.evaluate('window.herald.isSupported()'), false);
  await page.close();
});

test('Firefox: the hosted subscribe page shows the blocked state', async () => {
  const page = await browser.newPage();
  await page.goto(`${stack.gatewayUrl}/s/${workspace.siteSlug}`);
  await page.waitForSelector('main[data-state="blocked"]');
  assert.equal(
    await page.$eval('#status', (element) => element.textContent),
    'Notifications are blocked for this page. Allow them in the browser’s site settings, then reload.',
  );
  assert.equal(await page.$eval('#subscribe', (element) => (element as { hidden: boolean }).hidden), true);
  await page.screenshot({ path: await artifactPath('firefox-subscribe-page-blocked.png') });
  await page.close();
});
