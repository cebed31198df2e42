import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { call, eventually, SERVER_API, startSendingHarness, type SendingHarness, type Stack, type TestWorkspace } from '@herald/testkit';
import { chromium, type BrowserContext, type CDPSession, type Page, type Request, type Worker } from 'playwright-core';

import { artifactPath, browserPath, campaignCounted, startSiteWorkspace, type CampaignCounts, type TestSite } from './support.js';

// The SDK and its service worker in Debian's Chromium (playwright-core, no browser download).
// Chromium's PushManager.subscribe needs Google's push service, which this machine cannot reach,
// so what needs no push service is tested here: feature detection, the permission paths, the
// worker's push handling, clicks and the pending navigation, the retry queue offline. The
// campaigns' pushes are real: sent by Herald's fleet to the strict push peer, which decrypts them
// for a subscription stored through the public subscribe endpoint; the decrypted payload (with
// its engagement token) is handed to the worker through the DevTools protocol's
// ServiceWorker.deliverPushMessage, and the campaign's stats count what the worker reports.
// DevTools has no command that clicks a notification: a click is a NotificationEvent dispatched
// inside the worker, on the notification the worker showed, so it carries no user activation
// (the browser refuses focus() and openWindow() for it).

/** The spec: a click's pending navigation stays valid for 30 seconds. */
const PENDING_NAVIGATION_VALID_MS = 30_000;

let harness: SendingHarness;
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
  harness = await startSendingHarness();
  stack = harness.stack;
  ({ workspace, site } = await startSiteWorkspace(stack.gatewayUrl));
  profile = await mkdtemp(join(tmpdir(), 'herald-chromium-'));
  // A persistent profile: Chromium has no Push API in incognito contexts.
  context = await chromium.launchPersistentContext(profile, {
    executablePath: browserPath('HERALD_CHROMIUM', '/usr/bin/chromium'),
    headless: true,
    args: ['--no-sandbox'],
  });
  // HERALD_BROWSER_DEBUG=1 prints what the pages and the worker log, for a failing run.
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
  await harness?.stop();
});

/** What the page's SDK callbacks received so far. */
const heraldEvents = (target: Page = page) => target.evaluate('window.heraldEvents') as Promise<unknown[][]>;

async function openSite(path = '/'): Promise<Page> {
  const opened = await context.newPage();
  await opened.goto(`${site.origin}${path}`);
  return opened;
}

/** The DevTools session that delivers pushes, and the worker's registration id it found. */
let pushSession: { page: Page; session: CDPSession; registrationId: string } | undefined;

/** Delivers a push to the site's worker through the DevTools protocol. */
async function push(payload: object): Promise<void> {
  if (pushSession?.page !== page) {
    const session = await context.newCDPSession(page);
    const found = new Promise<string>((resolve) => {
      session.on('ServiceWorker.workerRegistrationUpdated', ({ registrations }) => {
        const registration = registrations.find((entry) => entry.scopeURL === `${site.origin}/` && !entry.isDeleted);
        if (registration) resolve(registration.registrationId);
      });
    });
    await session.send('ServiceWorker.enable');
    pushSession = { page, session, registrationId: await found };
  }
  const { session, registrationId } = pushSession;
  const tag = String((payload as { notificationId?: unknown }).notificationId);
  // DevTools sometimes drops a push to a worker Chromium is starting or stopping (seen under load):
  // delivered again, at most twice, when the notification has not appeared within 5 seconds.
  for (let attempt = 1; ; attempt += 1) {
    await session.send('ServiceWorker.deliverPushMessage', { origin: site.origin, registrationId, data: JSON.stringify(payload) });
    try {
      await eventually(`notification ${tag}`, () => shownNotifications(), (list) => list.some((entry) => entry.tag === tag), 5000);
      return;
    } catch (err) {
      if (attempt === 3) throw err;
    }
  }
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

const READ_PENDING_NAVIGATION = `new Promise((resolve) => {
  const open = indexedDB.open('herald');
  open.onsuccess = () => {
    const read = open.result.transaction('values').objectStore('values').get('pendingNavigation');
    read.onsuccess = () => { resolve(read.result ? read.result.url : null); open.result.close(); };
  };
})`;

/** The url of the pending navigation the worker left in its IndexedDB (read in the worker, or in `page` when given; not taken), or null. */
const pendingNavigationUrl = (target?: Page) =>
  (target ? target.evaluate(READ_PENDING_NAVIGATION) : serviceWorker().evaluate(READ_PENDING_NAVIGATION)) as Promise<string | null>;

const shownNotifications = (target: Page = page) =>
  target.evaluate(`navigator.serviceWorker.ready
    .then((registration) => registration.getNotifications())
    .then((list) => list.map((n) => ({ tag: n.tag, title: n.title, body: n.body, icon: n.icon, image: n.image, actions: n.actions.map((a) => ({ action: a.action, title: a.title })), data: n.data })))`) as Promise<
    Array<Record<string, unknown>>
  >;

/** Waits until the worker shows the notification tagged `tag` (a notification's tag is its id). */
const shown = (tag: string) => eventually(`notification ${tag}`, () => shownNotifications(), (list) => list.some((entry) => entry.tag === tag));

const eventsUrl = () => `${stack.gatewayUrl}/api/v1/events`;

/** The strict peer's subscription, stored through the public endpoint as the site's page would. */
let subscribed = false;
async function subscribePeer(): Promise<void> {
  if (subscribed) return;
  const { body } = await call<{ vapidPublicKey: string }>(stack.gatewayUrl, `/api/v1/site/${workspace.siteSlug}`);
  const subscription = harness.peer.createSubscription({ applicationServerKey: body.vapidPublicKey });
  const stored = await call(stack.gatewayUrl, '/api/v1/subscribe', {
    method: 'POST',
    key: workspace.siteKey,
    headers: { origin: site.origin },
    body: { endpoint: subscription.endpoint, keys: subscription.keys },
  });
  assert.equal(stored.status, 201);
  subscribed = true;
}

/** Sends a campaign and returns its id and the push as decrypted by the peer (token included). */
async function campaign(content: Record<string, string>): Promise<{ campaignId: string; payload: Record<string, unknown> }> {
  await subscribePeer();
  const created = await call<{ id: string }>(stack.gatewayUrl, `${SERVER_API}/campaigns`, { method: 'POST', key: workspace.apiKey, body: { name: content.title, ...content } });
  assert.equal(created.status, 201);
  const campaignId = created.body.id;
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/campaigns/${campaignId}/send`, { method: 'POST', key: workspace.apiKey })).status, 200);
  const [message] = await eventually(
    'the campaign reached the peer',
    async () => harness.peer.received().filter((entry) => harness.openPush(entry).payload.notificationId === campaignId),
    (found) => found.length === 1,
  );
  assert.ok(message);
  return { campaignId, payload: JSON.parse(message.plaintext.toString()) as Record<string, unknown> };
}

const countedOnce = (campaignId: string, expected: CampaignCounts) => campaignCounted(stack.gatewayUrl, workspace, campaignId, expected);
let firstCampaign = '';

test('autoPrompt: an undecided visitor is asked once promptDelay has passed (headless Chromium answers a prompt with denied)', async () => {
  const prompted = await openSite('/?autoPrompt&promptDelay=3000');
  // Loaded, and the delay not yet over: not asked yet.
  assert.equal(await prompted.evaluate('Notification.permission'), 'default');
  assert.deepEqual(await heraldEvents(prompted), []);
  await eventually('the prompt', () => heraldEvents(prompted), (events) => events.length > 0);
  assert.deepEqual(await heraldEvents(prompted), [['permissionDenied']]);
  assert.equal(await prompted.evaluate('Notification.permission'), 'denied');
  // Decided now: a later page with autoPrompt asks nothing (no second prompt, no second callback).
  await prompted.goto(`${site.origin}/?autoPrompt&promptDelay=0`);
  await prompted.waitForFunction('window.herald !== undefined');
  await prompted.evaluate('new Promise((resolve) => setTimeout(resolve, 0))');
  assert.deepEqual(await heraldEvents(prompted), []);
  await prompted.close();
});

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

test('setExternalId and setTags refuse bad values at once; unsubscribe() without a subscription is false', async () => {
  await assert.rejects(page.evaluate("window.herald.setExternalId('')"), /The external id must be a string of 1 to 256 characters\./);
  await assert.rejects(page.evaluate("window.herald.setExternalId('x'.repeat(257))"), /The external id must be a string of 1 to 256 characters\./);
  await assert.rejects(page.evaluate("window.herald.setExternalId('user-42', { proof: 'not-hex' })"), /The proof must be 64 hex characters \(HMAC-SHA256 of the external id\)\./);
  await assert.rejects(page.evaluate("window.herald.setTags({ plan: 'a,b' })"), /The tag "plan:a,b" contains a comma; tags cannot\./);
  await assert.rejects(page.evaluate("window.herald.setTags({ '': 'x' })"), /setTags takes a map of non-empty string keys to string values\./);
  await assert.rejects(page.evaluate("window.herald.setTags({ k: 'v'.repeat(70) })"), /is longer than 64 characters\./);
  // Not subscribed (permission denied): kept for the next subscribe, nothing sent.
  const before = workerCalls.length;
  assert.equal(await page.evaluate("window.herald.setExternalId('user-42').then(() => window.herald.setTags({ plan: 'pro' })).then(() => 'kept')"), 'kept');
  assert.equal(await page.evaluate('window.herald.unsubscribe()'), false);
  assert.equal(workerCalls.length, before);
  await assert.rejects(page.evaluate("Herald.createHerald({})"), /createHerald needs the site key: createHerald\(\{ siteKey: "pk_\.\.\." \}\)\./);
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

test('a campaign’s push shows its notification; the impression is reported with its token and counted', async () => {
  const before = workerCalls.length;
  const { campaignId, payload } = await campaign({
    title: 'Release 2.0',
    body: 'Out now',
    actionUrl: `${site.origin}/news`,
    iconUrl: `${site.origin}/icon.png`,
    imageUrl: `${site.origin}/image.png`,
  });
  firstCampaign = campaignId;
  const token = String(payload.token);
  await push(payload);
  await shown(campaignId);
  assert.deepEqual(await shownNotifications(), [
    {
      tag: campaignId,
      title: 'Release 2.0',
      body: 'Out now',
      icon: `${site.origin}/icon.png`,
      image: `${site.origin}/image.png`,
      actions: [],
      data: { herald: 1, notificationId: campaignId, url: `${site.origin}/news`, token, answerUrl: '' },
    },
  ]);
  await eventually('the report', async () => workerCalls.length, (count) => count === before + 1);
  assert.deepEqual(workerCalls.slice(before), [{ url: eventsUrl(), body: JSON.stringify({ type: 'impression', token }), status: 202, from: 'worker' }]);
  await countedOnce(campaignId, { totalSent: 1, totalDelivered: 1, totalClicked: 0 });
});

test('a click goes to the open page’s onNotificationClick (returning false keeps the page), and is counted', async () => {
  const before = workerCalls.length;
  await dispatch('notificationclick', firstCampaign);
  await eventually('onNotificationClick', () => heraldEvents(), (events) => events.length === 2);
  assert.deepEqual((await heraldEvents())[1], [
    'click',
    `${site.origin}/news`,
    { notificationId: firstCampaign, action: '', title: 'Release 2.0', body: 'Out now', opened: false },
  ]);
  await eventually('the report', async () => workerCalls.length, (count) => count === before + 1);
  assert.equal(workerCalls[before]?.status, 202);
  assert.match(workerCalls[before]?.body ?? '', /^\{"type":"click","token":"[^"]+"\}$/);
  assert.deepEqual(await shownNotifications(), [], 'a clicked notification is closed');
  assert.equal(page.url(), `${site.origin}/?navigate=no`);
  await countedOnce(firstCampaign, { totalSent: 1, totalDelivered: 1, totalClicked: 1 });
});

test('without a false from onNotificationClick the page navigates to the notification’s url', async () => {
  await page.goto(`${site.origin}/`);
  await push({ notificationId: 'ntf_two', title: 'Two', body: 'Second', url: `${site.origin}/two`, token: 'not-a-token' });
  await shown('ntf_two');
  const navigated = page.waitForURL(`${site.origin}/two`);
  await dispatch('notificationclick', 'ntf_two');
  await navigated;
  assert.equal(page.url(), `${site.origin}/two`);
  // A token Herald did not sign is refused for good (400), not retried.
  const reportsOf = () => workerCalls.filter((entry) => entry.body.includes('not-a-token'));
  const reports = await eventually('both reports', async () => reportsOf(), (found) => found.length === 2);
  assert.deepEqual(
    reports.map((entry) => [entry.body, entry.status]),
    [
      ['{"type":"impression","token":"not-a-token"}', 400],
      ['{"type":"click","token":"not-a-token"}', 400],
    ],
  );
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
  });
  await shown('ntf_question');
  assert.deepEqual((await shownNotifications())[0]?.actions, [
    { action: 'yes', title: 'Yes' },
    { action: 'no', title: 'No' },
  ]);
  await dispatch('notificationclick', 'ntf_question', 'yes');
  await eventually('the answer', async () => site.answers.length, (count) => count > 0);
  assert.deepEqual(site.answers, ['{"answer":"yes"}']);
  assert.equal(page.url(), `${site.origin}/two`);
});

test('a click with no page open leaves a pending navigation the next page takes within 30 seconds, once', async () => {
  await push({ notificationId: 'ntf_closed', title: 'Closed', body: 'No page open', url: `${site.origin}/landing` });
  await shown('ntf_closed');
  // No page of the site is open once this one has left it.
  await page.goto('about:blank');
  await dispatch('notificationclick', 'ntf_closed');
  // The worker's openWindow needs the click's user activation; the page is opened as the browser would,
  // once the worker has left the pending navigation (read in the worker, not taken).
  await eventually('the pending navigation', pendingNavigationUrl, (url) => url !== null);
  assert.equal(await pendingNavigationUrl(), `${site.origin}/landing`);
  await page.goto(`${site.origin}/landing`);
  await eventually('the pending click', () => heraldEvents(), (events) => events.length > 0);
  assert.deepEqual(await heraldEvents(), [
    ['click', `${site.origin}/landing`, { notificationId: 'ntf_closed', action: '', title: 'Closed', body: 'No page open', opened: true }],
  ]);
  // Taken once: the next page finds none (and its SDK has started: it replayed its queue).
  await page.reload();
  await page.waitForFunction('window.herald !== undefined');
  assert.equal(await pendingNavigationUrl(), null);
  assert.deepEqual(await heraldEvents(), []);
});

test('a pending navigation older than 30 seconds is dropped by the next page, not handed to onNotificationClick', async () => {
  await push({ notificationId: 'ntf_stale', title: 'Stale', body: 'Clicked long ago', url: `${site.origin}/stale` });
  await shown('ntf_stale');
  await page.goto('about:blank');
  await dispatch('notificationclick', 'ntf_stale');
  await eventually('the pending navigation', pendingNavigationUrl, (url) => url === `${site.origin}/stale`);
  // The next page comes 31 seconds later by its clock: the worker stamped the navigation with the
  // real time, the page's Date.now() runs 31 s ahead (set before any of its scripts run).
  const later = await context.newPage();
  try {
    await later.addInitScript(`{ const now = Date.now; Date.now = () => now() + ${PENDING_NAVIGATION_VALID_MS + 1_000}; }`);
    await later.goto(`${site.origin}/stale`);
    assert.ok((await later.evaluate('Date.now()')) as number >= Date.now() + PENDING_NAVIGATION_VALID_MS);
    // The SDK has taken the navigation once the page itself reads it gone: that read's transaction
    // starts only after the SDK's delete completed, and the SDK drops or hands it over right then.
    await eventually('the stale navigation taken', () => pendingNavigationUrl(later), (url) => url === null);
    assert.equal(await pendingNavigationUrl(), null);
    assert.deepEqual(await heraldEvents(later), []);
  } finally {
    await later.close();
    // The next tests go on in the shared page, on the site.
    await page.goto(`${site.origin}/stale`);
  }
});

test('offline, the worker’s reports wait in the retry queue; processRetryQueue() sends them once, in order, and they count', async () => {
  const { campaignId, payload } = await campaign({ title: 'Offline', body: 'Queued' });
  const token = String(payload.token);
  await context.setOffline(true);
  try {
    const before = workerCalls.length;
    await push(payload);
    await shown(campaignId);
    await dispatch('notificationclose', campaignId);
    await eventually('the failed reports', async () => workerCalls.length, (count) => count === before + 2);
    assert.deepEqual(
      workerCalls.slice(before).map((entry) => [entry.body, entry.status]),
      [
        [JSON.stringify({ type: 'impression', token }), 'failed'],
        [JSON.stringify({ type: 'impression', token }), 'failed'],
      ],
      'the dismissal waits behind the impression: the replay before it failed, and it was queued unsent',
    );
  } finally {
    await context.setOffline(false);
  }
  const replayedFrom = workerCalls.length;
  assert.deepEqual(await page.evaluate('window.herald.processRetryQueue()'), { sent: 2, dropped: 0, remaining: 0 });
  assert.deepEqual(await page.evaluate('window.herald.processRetryQueue()'), { sent: 0, dropped: 0, remaining: 0 });
  await eventually('the replayed reports', async () => workerCalls.length, (count) => count >= replayedFrom + 2);
  assert.deepEqual(workerCalls.slice(replayedFrom), [
    { url: eventsUrl(), body: JSON.stringify({ type: 'impression', token }), status: 202, from: 'page' },
    { url: eventsUrl(), body: JSON.stringify({ type: 'dismiss', token }), status: 202, from: 'page' },
  ]);
  await countedOnce(campaignId, { totalSent: 1, totalDelivered: 1, totalClicked: 0 });
});

test('the hosted subscribe page: the button, then the blocked state', async () => {
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
  const insecure = await context.newPage();
  // The SDK from the page's own origin: Chromium keeps pages on other addresses from loopback ones.
  await insecure.goto(site.insecureUrl());
  await eventually('onNotSupported', () => heraldEvents(insecure), (events) => events.length > 0);
  assert.deepEqual(await heraldEvents(insecure), [['notSupported']]);
  assert.equal(await insecure.evaluate('window.herald.isSupported()'), false);
  assert.equal(await insecure.evaluate('window.herald.promptForPermission()'), null);
  assert.deepEqual(await heraldEvents(insecure), [['notSupported'], ['notSupported']]);
  await insecure.close();
});
