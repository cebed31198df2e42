import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { admin, call, createWorkspace, eventually, firefoxChrome, firefoxPath, firefoxPushPreferences, SERVER_API, type SendingHarness, type TestWorkspace } from '@herald/testkit';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

import { firefoxViolations, newAddress, startConsoleHarness, type ConsoleHarness } from './support.js';

// A member's phone, played by Debian's Firefox ESR (puppeteer-core over WebDriver BiDi): the member
// turns on notifications in the inbox, so the console's service worker subscribes with the site's
// VAPID key through Firefox's push service, which is the strict push peer's WebSocket face
// (testkit's firefoxPushPreferences). An agent asks with approvers [{kind: member}] and waits; the
// delivery fleet pushes to the peer, Firefox wakes the worker, which shows the notification; its
// click (in Firefox's own notification window) lands on the question in the inbox, where the
// member answers, and the waiting /ask returns answeredBy the member. The API side of members'
// devices is gateway/test/member-devices.test.ts.

let harness: ConsoleHarness;
let sending: SendingHarness;
let workspace: TestWorkspace;
let browser: Browser;
let profile: string;

before(async () => {
  harness = await startConsoleHarness({ sending: true, peer: { webSocket: true } });
  assert.ok(harness.sending);
  sending = harness.sending;
  // The harness's workspace is on the Partner plan, which has no /ask.
  workspace = await createWorkspace('growth');
  profile = await mkdtemp(join(tmpdir(), 'herald-console-push-'));
  browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: firefoxPath(),
    headless: true,
    // WebDriver BiDi may then reach Firefox's notification windows (firefoxChrome).
    args: ['--remote-allow-system-access'],
    userDataDir: profile,
    extraPrefsFirefox: firefoxPushPreferences(sending.peer.webSocketUrl ?? ''),
  });
});
after(async () => {
  await browser?.close();
  if (profile) await rm(profile, { recursive: true, force: true });
  await harness?.stop();
});

/** The page's push subscription endpoint, once the console's worker has one. */
const endpointOf = (page: Page) =>
  page.evaluate(() => navigator.serviceWorker.ready.then((registration) => registration.pushManager.getSubscription()).then((subscription) => subscription?.endpoint ?? '')) as Promise<string>;

const shownNotifications = (page: Page) =>
  page.evaluate(() =>
    navigator.serviceWorker.ready.then((registration) => registration.getNotifications()).then((list) => list.map((n) => ({ title: n.title, body: n.body, data: n.data as unknown }))),
  ) as Promise<Array<{ title: string; body: string; data: unknown }>>;

/** The open page whose address is `url`. */
async function pageAt(url: string): Promise<Page> {
  const pages = await eventually(`a page at ${url}`, () => browser.pages(), (list) => list.some((page) => page.url() === url));
  const page = pages.find((entry) => entry.url() === url);
  assert.ok(page);
  return page;
}

/**
 * Presses the button named `from` (by keyboard: focus and Enter; or a click) until the button named
 * `to` replaces it, or the console shows an error (which fails, naming it). A press can land while
 * the section re-renders (its devices query settling) and reach a button that is gone, or find no
 * box to click: the button is pressed again, at most three times.
 */
async function pressUntil(on: Page, from: string, to: string, how: 'keyboard' | 'mouse'): Promise<void> {
  await on.bringToFront();
  for (let attempt = 1; ; attempt += 1) {
    const button = await on.waitForSelector(`button::-p-text(${from}), button::-p-text(${to})`);
    if ((await button?.evaluate((element) => element.textContent)) === to) return;
    try {
      if (how === 'keyboard') {
        await button?.focus();
        await on.keyboard.press('Enter');
      } else await button?.click();
    } catch (err) {
      // The button was replaced or had no box at that instant (puppeteer: "not clickable"): press again.
      if (attempt < 3) continue;
      throw err;
    }
    const after = await on
      .waitForSelector(`button::-p-text(${to}), p.error[role="alert"]`, { timeout: 30_000 })
      .catch((err: unknown) => (attempt < 3 ? undefined : Promise.reject(err)));
    if (!after) continue;
    assert.equal(await after.evaluate((element) => (element.tagName === 'P' ? `the console said: ${element.textContent}` : 'done')), 'done');
    return;
  }
}

test('Firefox: a member turns on notifications, a question addressed to them is pushed, its notification opens it in the inbox, the answer reaches the waiting agent', async () => {
  const invited = await admin<{ memberId: string; signInUrl: string }>('member', 'invite', '--workspace', workspace.workspaceId, '--email', newAddress('phone'), '--role', 'approver', '--name', 'Pat Phone');
  const page = await browser.newPage();
  await page.goto(invited.signInUrl.replace(/^https?:\/\/[^/]+/, harness.origin));
  await Promise.all([page.waitForNavigation(), page.click('button::-p-text(Sign in)')]);
  await Promise.all([page.waitForNavigation(), page.click('a::-p-text(Open the Herald Console)')]);
  await page.waitForSelector('h1::-p-text(Overview)');
  await page.click('nav a[href="/console/inbox"]');
  await page.waitForSelector('h1::-p-text(Decisions)');

  // Turned on by keyboard (a user gesture, which the permission prompt needs; this profile grants it).
  await pressUntil(page, 'Turn on notifications on this device', 'Turn off notifications on this device', 'keyboard');
  await page.waitForSelector('th::-p-text(Firefox on Linux \\(this device\\))');
  assert.deepEqual(await firefoxViolations(page), []);
  const endpoint = await endpointOf(page);
  assert.ok(endpoint.startsWith('https://'), endpoint);

  // The agent asks the member and waits.
  const question = 'Rotate the production database password?';
  const waiting = call<Record<string, unknown>>(harness.origin, `${SERVER_API}/ask`, {
    method: 'POST',
    key: workspace.apiKey,
    body: { question, agentName: 'ops-bot', timeoutSeconds: 50, approvers: [{ kind: 'member', id: invited.memberId }] },
  });
  let early: unknown;
  void waiting.then((response) => (early = response.body));
  // The peer accepted it for Firefox's channel, forwarded it, and Firefox acknowledged it decrypted.
  const pushed = await eventually(
    'the push acknowledged by Firefox',
    async () => {
      assert.equal(early, undefined, 'the agent waits for the answer');
      return sending.peer.browserMessages(endpoint);
    },
    (messages) => messages.length === 1 && messages[0]?.ackCode !== undefined,
  );
  assert.equal(pushed[0]?.ackCode, 100);
  // The worker showed it, with the address of the question in the inbox to open.
  const [shown] = await eventually('the notification shown', () => shownNotifications(page), (list) => list.length === 1);
  const data = shown?.data as { console: number; url: string; token: string };
  assert.deepEqual([shown?.title, shown?.body, data.console], ['ops-bot asks', question, 1]);
  assert.match(data.url, new RegExp(`^${harness.origin}/console/inbox\\?question=ask_[0-9a-f]{32}$`));
  assert.ok(data.token.length > 20, data.token);
  const url = data.url;

  // Clicked in Firefox's notification window: the worker brings the console to the question.
  await page.goto(`${harness.origin}/console/`);
  await page.waitForSelector('h1::-p-text(Overview)');
  await firefoxChrome(browser).clickNotification('ops-bot asks');
  const opened = await pageAt(url);
  const card = await opened.waitForSelector('article.opened[aria-current="true"]');
  assert.ok(card);
  // Focus on the question, for a screen reader and the keyboard.
  await opened.waitForFunction((text) => document.activeElement?.textContent === text, {}, question);
  await opened.click('article.opened button::-p-text(Approve)');

  const answered = await waiting;
  assert.equal(answered.status, 200, JSON.stringify(answered.body));
  const { at, ...answeredBy } = answered.body.answeredBy as Record<string, string>;
  assert.deepEqual([answered.body.status, answered.body.value, answeredBy], ['answered', 'yes', { kind: 'member', id: invited.memberId, displayName: 'Pat Phone', channel: 'console' }]);
  assert.ok(at && Date.parse(at) > 0);

  // Turned off: the browser unsubscribes and the device is gone.
  await pressUntil(opened, 'Turn off notifications on this device', 'Turn on notifications on this device', 'mouse');
  assert.equal(await endpointOf(opened), '');
  const devices = await opened.evaluate(() => fetch('/api/v1/server/me/devices').then((response) => response.json()));
  assert.deepEqual(devices, { devices: [] });
});
