import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { firefoxPath } from '@herald/testkit';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

import { firefoxViolations as seriousViolations, signInLinkFromMail, startConsoleHarness, type ConsoleHarness } from './support.js';

// The console in Debian's Firefox ESR. playwright-core drives only its own patched Firefox, so
// Debian's is driven by puppeteer-core over WebDriver BiDi (as the browser SDK's Firefox tests do);
// axe-core's own script is run in the page by the driver (not by the page: the CSP stays strict).

let harness: ConsoleHarness;
let browser: Browser;
let profile: string;
before(async () => {
  harness = await startConsoleHarness();
  profile = await mkdtemp(join(tmpdir(), 'herald-console-firefox-'));
  browser = await puppeteer.launch({ browser: 'firefox', executablePath: firefoxPath(), headless: true, userDataDir: profile });
});
after(async () => {
  await browser?.close();
  if (profile) await rm(profile, { recursive: true, force: true });
  await harness?.stop();
});

const focused = (page: Page) => page.evaluate(() => (document.activeElement?.id || document.activeElement?.textContent) ?? '');

test('Firefox: sign in by an email link read from Mailpit, the overview, the keys page and its dialog, the campaigns and flows pages by keyboard; no serious axe violation', async () => {
  const page = await browser.newPage();
  await page.goto(`${harness.origin}/console/`);
  await page.waitForSelector('h1::-p-text(Sign in to Herald)');
  assert.deepEqual(await seriousViolations(page), []);
  await page.type('#sign-in-email', harness.ownerEmail);
  await page.click('button[type=submit]');
  await page.waitForSelector('h2::-p-text(Check your mail)');

  await page.goto(await signInLinkFromMail(harness, harness.ownerEmail, 0));
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  await Promise.all([page.waitForNavigation(), page.click('a::-p-text(Open the Herald Console)')]);
  await page.waitForSelector('h1::-p-text(Overview)');
  await page.waitForSelector('h2::-p-text(Recent campaigns)');
  assert.deepEqual(await seriousViolations(page), []);

  // The navigation by keyboard: the link moves to the page and focus to its heading.
  await page.focus('nav a[href="/console/keys"]');
  await page.keyboard.press('Enter');
  await page.waitForSelector('h1::-p-text(API keys)');
  assert.equal(await focused(page), 'API keys');
  assert.equal(await page.evaluate(() => document.activeElement?.tagName), 'H1');
  await page.keyboard.press('Tab');
  assert.equal(await focused(page), 'Create key');
  await page.keyboard.press('Enter');
  await page.waitForSelector('dialog[open]');
  assert.equal(await focused(page), 'key-name');
  assert.deepEqual(await seriousViolations(page), []);
  // Escape closes the dialog and gives focus back to its opener.
  await page.keyboard.press('Escape');
  await page.waitForSelector('dialog[open]', { hidden: true });
  assert.equal(await focused(page), 'Create key');

  // The campaigns page by keyboard: the composer's preview follows each keystroke.
  await page.focus('nav a[href="/console/campaigns"]');
  await page.keyboard.press('Enter');
  await page.waitForSelector('h1::-p-text(Campaigns)');
  await page.focus('#campaign-name');
  await page.keyboard.type('Firefox launch');
  await page.keyboard.press('Tab');
  await page.keyboard.type('Hello from Firefox');
  await page.keyboard.press('Tab');
  await page.keyboard.type('Sent from the console.');
  await page.waitForSelector('.notification-title::-p-text(Hello from Firefox)');
  await page.waitForSelector('.notification-body::-p-text(Sent from the console.)');
  assert.deepEqual(await seriousViolations(page), []);
  // The flows page: a step added to the editor by keyboard, its fields focusable.
  await page.focus('nav a[href="/console/flows"]');
  await page.keyboard.press('Enter');
  await page.waitForSelector('h1::-p-text(Flows)');
  await page.focus('button::-p-text(Add a delay)');
  await page.keyboard.press('Enter');
  await page.waitForSelector('label::-p-text(Wait in step 1)');
  assert.deepEqual(await seriousViolations(page), []);

  await page.click('button::-p-text(Sign out everywhere)');
  await page.waitForSelector('h1::-p-text(Sign in to Herald)');
  await page.close();
});
