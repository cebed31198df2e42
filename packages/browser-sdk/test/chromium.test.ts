import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { call, createWorkspace, eventually, freePort, startStack, type Stack, type TestWorkspace } from '@herald/testkit';
import { chromium, type BrowserContext, type CDPSession, type Page, type Request, type Worker } from 'playwright-core';

import { artifactPath, browserPath, startSite, type TestSite } from './support.js';

// The SDK and its service worker in Debian's Chromium (playwright-core, no browser download).
// Chromium's PushManager.subscribe needs Google's push service, which this machine cannot reach,
// so what needs no push service is tested here: feature detection, the permission paths, the
// worker's push handling (pushes delivered through the DevTools protocol's
// ServiceWorker.deliverPushMessage), clicks and the pending navigation, the retry queue offline.
// DevTools has no command that clicks a notification: a click is a NotificationEvent dispatched
// inside the worker, on the notification the worker showed, so it carries no user activation
// (the browser refuses focus() and openWindow() for it).

let stack: Stack;
let workspace: TestWorkspace;
let site: TestSite;
let context: BrowserContext;
let profile: string;
let page: Page;
let cdp: CDPSession;
/** The engagement reports sent to Herald (by the worker, or replayed by the page), in order. */
const workerCalls: Array<{ url: string; body: string; status: number | 'failed'; from: 'worker' | 'page' }> = [];

before(async () => {
  stack = await startStack({ gatewayEnv: { ALLOW_ANY_PUSH_SERVICE: 'true' } });
  const port = await freePort();
  workspace = await createWorkspace('growth', `localhost:${port}`);
  const manifest = await call<{ files: Record<string, { integrity: string }> }>(stack.gatewayUrl, '/sdk/v1/manifest.json');
  const download = async (file: string) => Buffer.from(await (await fetch(`${stack.gatewayUrl}/sdk/v1/${file}`)).arrayBuffer());
  site = await startSite({
    port,
    gatewayUrl: stack.gatewayUrl,
    siteKey: workspace.siteKey,
    sdkUrl: `${stack.gatewayUrl}/sdk/v1/herald.js`,
    sdkIntegrity: manifest.body.files['herald.js']?.integrity ?? '',
    serviceWorker: await download('herald-sw.js'),
    sdk: await download('herald.js'),
  });
  profile = await mkdtemp(join(tmpdir(), 'herald-chromium-'));
  // A persistent profile: Chromium has no Push API in incognito contexts.
  context = await chromium.launchPersistentContext(profile, {
    executablePath: browserPath('HERALD_CHROMIUM', '/usr/bin/chromium'),
    headless: true,
    args: ['--no-sandbox'],
  });
  if (process.env.HERALD_BROWSER_DEBUG) {
    context.on('console', (message) => console.log(`[${message.worker()?.url() ?? message.page()?.url()}] ${message.text()}`));
  }
  const record = async (request: Request, status: number | 'failed') => {
    if (request.method() === 'POST' && request.url() === eventsUrl()) {
      workerCalls.push({ url: request.url(), body: request.postData() ?? '', status, from: request.serviceWorker() ? 'worker' : 'page' });
    }
  };
  context.on('requestfinished', async (request) => record(request, (await request.response())?.status() ?? 'failed'));
  context.on('requestfailed', (request) => record(request, 'failed'));
});
after(async () => {
  await context?.close();
  await rm(profile, { recursive: true, force: true });
  await site?.close();
  await stack?.stop();
});

/** What the page's SDK callbacks received so far. */
const heraldEvents = (target: Page = page) => target.evaluate('window.heraldEvents') as Promise<unknown[][]>;

async function openSite(path = '/'): Promise<Page> {
  const opened = await context.newPage();
  await opened.goto(`${site.origin}${path}`);
  return opened;
}

/** The worker's registration id, for deliverPushMessage. */
async function registrationId(session: CDPSession): Promise<string> {
  const found = new Promise<string>((resolve) => {
    session.on('ServiceWorker.workerRegistrationUpdated', ({ registrations }) => {
      const registration = registrations.find((entry) => entry.scopeURL === `${site.origin}/` && !entry.isDeleted);
      if (registration) resolve(registration.registrationId);
    });
  });
  await session.send('ServiceWorker.enable');
  return found;
}

async function push(payload: object): Promise<void> {
  const id = await registrationId(cdp);
  await cdp.send('ServiceWorker.deliverPushMessage', { origin: site.origin, registrationId: id, data: JSON.stringify(payload) });
}

function serviceWorker(): Worker {
  const [worker] = context.serviceWorkers().filter((entry) => entry.url().startsWith(`${site.origin}/herald-sw.js`));
  assert.ok(worker, 'the site has a running service worker');
  return worker;
}

/** Dispatches notificationclick (or notificationclose) on the notification tagged `tag`, in the worker. */
async function dispatch(kind: 'notificationclick' | 'notificationclose', tag: string, action = ''): Promise<void> {
  const outcome = await serviceWorker().evaluate(`(async () => {
    const [notification] = await self.registration.getNotifications({ tag: ${JSON.stringify(tag)} });
    if (!notification) return 'no notification ' + ${JSON.stringify(tag)};
    self.dispatchEvent(new NotificationEvent(${JSON.stringify(kind)}, { notification, action: ${JSON.stringify(action)} }));
    return 'dispatched';
  })()`);
  assert.equal(outcome, 'dispatched');
}

const shownNotifications = (target: Page = page) =>
  target.evaluate(`navigator.serviceWorker.ready
    .then((registration) => registration.getNotifications())
    .then((list) => list.map((n) => ({ tag: n.tag, title: n.title, body: n.body, icon: n.icon, image: n.image, actions: n.actions.map((a) => ({ action: a.action, title: a.title })), data: n.data })))`) as Promise<
    Array<Record<string, unknown>>
  >;

const eventsUrl = () => `${stack.gatewayUrl}/api/v1/events`;

test('denied permission: promptForPermission() resolves null and calls onPermissionDenied; subscribe() refuses', async () => {
  // This page's onNotificationClick returns false (see support.ts).
  page = await openSite('/?navigate=no');
  cdp = await context.newCDPSession(page);
  await cdp.send('Browser.setPermission', { permission: { name: 'notifications' }, setting: 'denied', origin: site.origin });
  assert.equal(await page.evaluate('window.herald.isSupported()'), true);
  assert.equal(await page.evaluate('window.herald.promptForPermission()'), null);
  assert.deepEqual(await heraldEvents(), [['permissionDenied']]);
  await assert.rejects(page.evaluate('window.herald.subscribe()'), /Notification permission is denied; call promptForPermission\(\) first\./);
});

test('granted permission: subscribing registers the site’s worker with Herald’s origin and the site key, and reads the VAPID key', async () => {
  await cdp.send('Browser.setPermission', { permission: { name: 'notifications' }, setting: 'granted', origin: site.origin });
  const config = page.waitForResponse(`${stack.gatewayUrl}/api/v1/sdk-config`);
  // Chromium's PushManager.subscribe then waits for Google's push service, unreachable here.
  void page.evaluate('window.herald.subscribe().catch(() => undefined), true');
  const answer = await config;
  assert.equal(answer.status(), 200);
  const site_ = await call(stack.gatewayUrl, `/api/v1/site/${workspace.siteSlug}`);
  assert.deepEqual(await answer.json(), { vapidPublicKey: site_.body.vapidPublicKey });
  const scriptUrl = await page.evaluate('navigator.serviceWorker.ready.then((registration) => registration.active.scriptURL)');
  const expected = new URL(`${site.origin}/herald-sw.js`);
  expected.searchParams.set('api', stack.gatewayUrl);
  expected.searchParams.set('siteKey', workspace.siteKey);
  assert.equal(scriptUrl, expected.href);
});

test('a push shows the notification from its payload and reports the impression with its token', async () => {
  const before = workerCalls.length;
  await push({
    notificationId: 'ntf_one',
    title: 'Release 2.0',
    body: 'Out now',
    url: `${site.origin}/news`,
    icon: `${site.origin}/icon.png`,
    image: `${site.origin}/image.png`,
    actions: [
      { action: 'open', title: 'Open' },
      { action: 'later', title: 'Later' },
    ],
    token: 'token-one',
  });
  await eventually('the notification', () => shownNotifications(), (shown) => shown.length === 1);
  assert.deepEqual(await shownNotifications(), [
    {
      tag: 'ntf_one',
      title: 'Release 2.0',
      body: 'Out now',
      icon: `${site.origin}/icon.png`,
      image: `${site.origin}/image.png`,
      actions: [
        { action: 'open', title: 'Open' },
        { action: 'later', title: 'Later' },
      ],
      data: { herald: 1, notificationId: 'ntf_one', url: `${site.origin}/news`, token: 'token-one', answerUrl: '' },
    },
  ]);
  await eventually('the report', async () => workerCalls.length, (count) => count === before + 1);
  assert.deepEqual(workerCalls.slice(before), [{ url: eventsUrl(), body: '{"type":"impression","token":"token-one"}', status: 202, from: 'worker' }]);
});

test('a click goes to the open page’s onNotificationClick; returning false keeps the page where it is', async () => {
  const before = workerCalls.length;
  await dispatch('notificationclick', 'ntf_one', 'open');
  await eventually('onNotificationClick', () => heraldEvents(), (events) => events.length === 2);
  assert.deepEqual((await heraldEvents())[1], [
    'click',
    `${site.origin}/news`,
    { notificationId: 'ntf_one', action: 'open', title: 'Release 2.0', body: 'Out now', opened: false },
  ]);
  await eventually('the report', async () => workerCalls.length, (count) => count === before + 1);
  assert.deepEqual(workerCalls.slice(before), [{ url: eventsUrl(), body: '{"type":"click","token":"token-one","action":"open"}', status: 202, from: 'worker' }]);
  assert.deepEqual(await shownNotifications(), [], 'a clicked notification is closed');
  assert.equal(page.url(), `${site.origin}/?navigate=no`);
});

test('without a false from onNotificationClick the page navigates to the notification’s url', async () => {
  await page.goto(`${site.origin}/`);
  await push({ notificationId: 'ntf_two', title: 'Two', body: 'Second', url: `${site.origin}/two`, token: 'token-two' });
  await eventually('the notification', () => shownNotifications(), (shown) => shown.length === 1);
  const navigated = page.waitForURL(`${site.origin}/two`);
  await dispatch('notificationclick', 'ntf_two');
  await navigated;
  assert.equal(page.url(), `${site.origin}/two`);
});

test('a question’s button posts the answer to its answer URL and opens nothing', async () => {
  await push({
    notificationId: 'ntf_question',
    title: 'Agent asks',
    body: 'Deploy?',
    url: `${site.origin}/a/page`,
    actions: [
      { action: 'yes', title: 'Yes' },
      { action: 'no', title: 'No' },
    ],
    answerUrl: `${site.origin}/answer`,
    token: 'token-question',
  });
  await eventually('the notification', () => shownNotifications(), (shown) => shown.length === 1);
  await dispatch('notificationclick', 'ntf_question', 'yes');
  await eventually('the answer', async () => site.answers.length, (count) => count > 0);
  assert.deepEqual(site.answers, ['{"answer":"yes"}']);
  assert.equal(page.url(), `${site.origin}/two`);
  assert.deepEqual(
    workerCalls.filter((entry) => entry.body.includes('token-question')).map((entry) => entry.body),
    ['{"type":"impression","token":"token-question"}', '{"type":"click","token":"token-question","action":"yes"}'],
  );
});

test('dismissing reports dismiss', async () => {
  await push({ notificationId: 'ntf_dismiss', title: 'Dismiss me', body: '', token: 'token-dismiss' });
  await eventually('the notification', () => shownNotifications(), (shown) => shown.length === 1);
  await dispatch('notificationclose', 'ntf_dismiss');
  const reports = () => workerCalls.filter((entry) => entry.body.includes('token-dismiss')).map((entry) => entry.body);
  await eventually('the dismiss report', async () => reports(), (bodies) => bodies.length === 2);
  assert.deepEqual(reports(), ['{"type":"impression","token":"token-dismiss"}', '{"type":"dismiss","token":"token-dismiss"}']);
});

test('a click with no page open leaves a pending navigation the next page takes within 30 seconds, once', async () => {
  await push({ notificationId: 'ntf_closed', title: 'Closed', body: 'No page open', url: `${site.origin}/landing`, token: 'token-closed' });
  await eventually('the notification', () => shownNotifications(), (shown) => shown.length === 1);
  await page.close();
  await dispatch('notificationclick', 'ntf_closed');
  // The worker's openWindow needs the click's user activation; the page is opened as the browser would,
  // once the worker has left the pending navigation (read in the worker, not taken).
  const pending = () =>
    serviceWorker().evaluate(`new Promise((resolve) => {
      const open = indexedDB.open('herald');
      open.onsuccess = () => {
        const read = open.result.transaction('values').objectStore('values').get('pendingNavigation');
        read.onsuccess = () => { resolve(read.result ? read.result.url : null); open.result.close(); };
      };
    })`);
  await eventually('the pending navigation', pending, (url) => url !== null);
  assert.equal(await pending(), `${site.origin}/landing`);
  const landing = await openSite('/landing');
  await eventually('the pending click', () => heraldEvents(landing), (events) => events.length > 0);
  assert.deepEqual(await heraldEvents(landing), [
    ['click', `${site.origin}/landing`, { notificationId: 'ntf_closed', action: '', title: 'Closed', body: 'No page open', opened: true }],
  ]);
  await landing.close();
  page = await openSite('/landing');
  cdp = await context.newCDPSession(page);
  // Taken once: the next page finds none.
  await page.waitForFunction('window.herald !== undefined');
  assert.deepEqual(await heraldEvents(), []);
});

test('offline, the worker’s reports wait in the retry queue; processRetryQueue() sends them once, in order', async () => {
  await context.setOffline(true);
  const before = workerCalls.length;
  await push({ notificationId: 'ntf_offline', title: 'Offline', body: 'Queued', token: 'token-offline' });
  await eventually('the notification', () => shownNotifications(), (shown) => shown.length === 1);
  await dispatch('notificationclose', 'ntf_offline');
  await eventually('the failed reports', async () => workerCalls.length, (count) => count >= before + 2);
  assert.deepEqual(
    workerCalls.slice(before).map((entry) => entry.status),
    workerCalls.slice(before).map(() => 'failed'),
  );
  await page.screenshot({ path: await artifactPath('chromium-offline-site.png') });
  await context.setOffline(false);
  const replayedFrom = workerCalls.length;
  assert.deepEqual(await page.evaluate('window.herald.processRetryQueue()'), { sent: 2, dropped: 0, remaining: 0 });
  assert.deepEqual(await page.evaluate('window.herald.processRetryQueue()'), { sent: 0, dropped: 0, remaining: 0 });
  assert.deepEqual(workerCalls.slice(replayedFrom), [
    { url: eventsUrl(), body: '{"type":"impression","token":"token-offline"}', status: 202, from: 'page' },
    { url: eventsUrl(), body: '{"type":"dismiss","token":"token-offline"}', status: 202, from: 'page' },
  ]);
});

test('the hosted subscribe page: the button, and the blocked and unsupported states', async () => {
  const hosted = await context.newPage();
  await hosted.goto(`${stack.gatewayUrl}/s/${workspace.siteSlug}`);
  await hosted.waitForSelector('main[data-state="ready"]');
  assert.equal(await hosted.isVisible('#subscribe'), true);
  await hosted.screenshot({ path: await artifactPath('subscribe-page-ready.png') });
  const hostedSession = await context.newCDPSession(hosted);
  await hostedSession.send('Browser.setPermission', { permission: { name: 'notifications' }, setting: 'denied', origin: new URL(stack.gatewayUrl).origin });
  await hosted.reload();
  await hosted.waitForSelector('main[data-state="blocked"]');
  assert.equal(await hosted.textContent('#status'), 'Notifications are blocked for this page. Allow them in the browser’s site settings, then reload.');
  assert.equal(await hosted.isVisible('#subscribe'), false);
  await hosted.screenshot({ path: await artifactPath('subscribe-page-blocked.png') });
  await hosted.close();
});

test('a page that is not a secure context has no push: onNotSupported is called, isSupported() is false', async () => {
  // The site's page from a non-local address over http: Chromium gives it no service workers.
  const address = (await import('node:os')).networkInterfaces();
  const external = Object.values(address)
    .flat()
    .find((entry) => entry && entry.family === 'IPv4' && !entry.internal);
  assert.ok(external, 'the machine has a non-loopback IPv4 address to open the page from');
  const insecure = await context.newPage();
  // The SDK from the page's own origin: Chromium keeps pages on other addresses from loopback ones.
  await insecure.goto(`http://${external.address}:${site.port}/?local-sdk`);
  await eventually('onNotSupported', () => heraldEvents(insecure), (events) => events.length > 0);
  assert.deepEqual(await heraldEvents(insecure), [['notSupported']]);
  assert.equal(await insecure.evaluate('window.herald.isSupported()'), false);
  assert.equal(await insecure.evaluate('window.herald.promptForPermission()'), null);
  assert.deepEqual(await heraldEvents(insecure), [['notSupported'], ['notSupported']]);
  await insecure.close();
});
