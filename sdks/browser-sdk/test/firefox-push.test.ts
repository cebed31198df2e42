import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import {
  call,
  eventually,
  externalIdProof,
  firefoxChrome,
  firefoxPushPreferences,
  freePort,
  identitySecret,
  SERVER_API,
  startSendingHarness,
  type SendingHarness,
  type Stack,
  type TestWorkspace,
} from '@herald/testkit';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

import { artifactPath, browserPath, campaignCounted, startSiteWorkspace, type CampaignCounts, type TestSite } from './support.js';

// The whole push loop in Debian's Firefox ESR, driven through WebDriver BiDi (puppeteer-core).
// Firefox's push service is the strict push peer's WebSocket face (dom.push.serverURL): the
// page's PushManager.subscribe registers a channel there and gets an endpoint on the peer's
// HTTP/2 face, where Herald's delivery fleet posts exactly as to any push service. The peer checks
// VAPID and the aes128gcm shape, then forwards the encrypted body to Firefox, which decrypts it and
// wakes the site's worker; the peer records Firefox's acknowledgement of each push. Notifications
// are granted by the profile (permissions.default.desktop-notification = 1); they are clicked and
// drawn in Firefox's own notification windows (below).

let harness: SendingHarness;
let stack: Stack;
let workspace: TestWorkspace;
let site: TestSite;
let browser: Browser;
let profile: string;
let page: Page;
let vapidPublicKey: string;

before(async () => {
  harness = await startSendingHarness({}, { webSocket: true });
  stack = harness.stack;
  ({ workspace, site } = await startSiteWorkspace(stack.gatewayUrl));
  vapidPublicKey = (await call<{ vapidPublicKey: string }>(stack.gatewayUrl, `/api/v1/site/${workspace.siteSlug}`)).body.vapidPublicKey;
  profile = await mkdtemp(join(tmpdir(), 'herald-firefox-push-'));
  const debug = Boolean(process.env.HERALD_BROWSER_DEBUG);
  browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: browserPath('HERALD_FIREFOX', '/usr/bin/firefox-esr'),
    headless: true,
    // WebDriver BiDi may then reach Firefox's own windows: the notifications (see notificationWindow).
    args: ['--remote-allow-system-access'],
    userDataDir: profile,
    // HERALD_BROWSER_DEBUG=1 prints Firefox's push service log, for a failing run.
    dumpio: debug,
    extraPrefsFirefox: firefoxPushPreferences(harness.peer.webSocketUrl ?? '', debug),
  });
  ({ inChrome, notificationWindow, setPreference, clickNotification } = firefoxChrome(browser));
});
after(async () => {
  await browser?.close();
  await rm(profile, { recursive: true, force: true });
  await site?.close();
  await harness?.stop();
});

const heraldEvents = (target: Page = page) => target.evaluate('window.heraldEvents') as Promise<unknown[][]>;

const shownNotifications = (target: Page = page) =>
  target.evaluate(`navigator.serviceWorker.ready
    .then((registration) => registration.getNotifications())
    .then((list) => list.map((n) => ({ tag: n.tag, title: n.title, body: n.body, data: n.data })))`) as Promise<Array<Record<string, unknown>>>;

// Firefox's own windows (testkit's firefoxChrome): the notifications, clicked and drawn, and its preferences.
let inChrome: ReturnType<typeof firefoxChrome>['inChrome'];
let notificationWindow: ReturnType<typeof firefoxChrome>['notificationWindow'];
let setPreference: ReturnType<typeof firefoxChrome>['setPreference'];
let clickNotification: ReturnType<typeof firefoxChrome>['clickNotification'];

/** Saves the notification as Firefox draws it (a privileged canvas's drawWindow), once its fade-in is over. */
async function snapshotNotification(title: string, file: string): Promise<void> {
  const context = await notificationWindow(title);
  await eventually('the fade-in', () => inChrome(context, 'getComputedStyle(document.getElementById("alertBox")).opacity'), (opacity) => opacity === '1');
  const png = await inChrome(
    context,
    `(() => {
      const canvas = document.createElementNS('http://www.w3.org/1999/xhtml', 'canvas');
      canvas.width = window.innerWidth;
      canvas.height = window.innerHeight;
      canvas.getContext('2d').drawWindow(window, 0, 0, canvas.width, canvas.height, 'white');
      return canvas.toDataURL('image/png');
    })()`,
  );
  await writeFile(await artifactPath(file), Buffer.from(String(png).replace(/^data:image\/png;base64,/, ''), 'base64'));
}

/** The push the worker shows for a notification: its tag is the notification id. */
const shown = (tag: string, target: Page = page) =>
  eventually(`notification ${tag}`, () => shownNotifications(target), (list) => list.some((entry) => entry.tag === tag));

/**
 * Waits until Firefox acknowledged every push the peer accepted for `endpoint`, and returns them.
 * Alone it takes a second; a CI run with four test files and other browsers at once (load 35) saw
 * Firefox take over 30 s, so the bound is a minute.
 */
const acknowledged = (count: number, at = endpoint) =>
  eventually(`${count} pushes acknowledged at ${at}`, async () => harness.peer.browserMessages(at), (list) => list.length === count && list.every((message) => message.ackCode !== undefined), 60_000);

const subscriber = async (id: string) => (await call<Record<string, unknown>>(stack.gatewayUrl, `${SERVER_API}/subscribers/${id}`, { key: workspace.apiKey })).body;

const counted = (campaignId: string, expected: CampaignCounts) => campaignCounted(stack.gatewayUrl, workspace, campaignId, expected);

let subscriberId = '';
let endpoint = '';
let firstNotification = '';
let campaignId = '';

test('Firefox: subscribe() registers a channel with the push peer over WebSocket, with the site’s VAPID key; Herald stores the subscriber; onSubscribe gets it', async () => {
  page = await browser.newPage();
  await page.goto(`${site.origin}/`);
  await page.waitForFunction('window.herald !== undefined');
  assert.equal(await page.evaluate('Notification.permission'), 'granted');
  const subscribed = (await page.evaluate('window.herald.subscribe().then((s) => ({ subscriberId: s.subscriberId, endpoint: s.endpoint }))')) as { subscriberId: string; endpoint: string };
  ({ subscriberId, endpoint } = subscribed);
  assert.match(subscriberId, /^sub_/);
  assert.match(endpoint, new RegExp(`^${harness.peer.origin.replace(/[.]/g, '\\.')}/push/w[0-9a-f]{32}$`));
  assert.deepEqual(await heraldEvents(), [['subscribe', subscriberId, endpoint]]);
  // The register message carried the site's VAPID key: the endpoint takes no other.
  const channels = harness.peer.browserChannels();
  assert.equal(channels.length, 1);
  assert.deepEqual(channels[0], { ...channels[0], endpoint, applicationServerKey: vapidPublicKey, state: 'registered', unregisterCode: undefined });
  const stored = await subscriber(subscriberId);
  assert.deepEqual(
    { status: stored['status'], externalId: stored['externalId'], tags: stored['tags'], browser: stored['browser'], os: stored['os'], delivery: stored['delivery'] },
    { status: 'active', externalId: null, tags: [], browser: 'Firefox', os: 'Linux', delivery: { pushService: harness.peer.origin, reachable: true, unsubscribedAt: null } },
  );
});

test('Firefox: setExternalId and setTags reach the live subscriber', async () => {
  await page.evaluate("window.herald.setExternalId('firefox-user-1')");
  await page.evaluate("window.herald.setTags({ plan: 'pro', lang: 'de' })");
  const { body } = await call<{ data: Array<Record<string, unknown>> }>(stack.gatewayUrl, `${SERVER_API}/subscribers?externalId=firefox-user-1`, { key: workspace.apiKey });
  assert.deepEqual(
    body.data.map((entry) => [entry['id'], entry['externalId'], entry['tags'], entry['status']]),
    [[subscriberId, 'firefox-user-1', ['plan:pro', 'lang:de'], 'active']],
  );
  // Without a proof the id is unverified; with the site backend's proof this browser becomes the
  // user's approver device.
  assert.equal((await subscriber(subscriberId))['externalIdVerified'], false);
  const proof = externalIdProof(await identitySecret(stack.gatewayUrl, workspace), 'firefox-user-1');
  await page.evaluate(`window.herald.setExternalId('firefox-user-1', { proof: '${proof}' })`);
  assert.deepEqual([(await subscriber(subscriberId))['externalId'], (await subscriber(subscriberId))['externalIdVerified']], ['firefox-user-1', true]);
});

test('Firefox: POST /send goes through the fleet and the peer to Firefox, which decrypts it, shows it and acknowledges it; the impression is counted', async () => {
  const sent = await call<{ campaignId: string; sent: number }>(stack.gatewayUrl, `${SERVER_API}/send`, {
    method: 'POST',
    key: workspace.apiKey,
    body: { title: 'Hello Firefox', body: 'Through the WebSocket', url: `${site.origin}/news`, externalIds: ['firefox-user-1'] },
  });
  assert.equal(sent.status, 200);
  assert.equal(sent.body.sent, 1);
  const notificationId = sent.body.campaignId;
  firstNotification = notificationId;
  const [push] = await acknowledged(1);
  // Decrypted and handed to the worker (ack 100), and the worker's push handler settled (no nack).
  assert.deepEqual([push?.ackCode, push?.nackCode, push?.ttl, push?.replaced], [100, undefined, 86_400, false]);
  await shown(notificationId);
  const [notification] = await shownNotifications();
  assert.deepEqual(notification, {
    tag: notificationId,
    title: 'Hello Firefox',
    body: 'Through the WebSocket',
    data: { herald: 1, notificationId, url: `${site.origin}/news`, token: (notification?.data as { token: string }).token, answerUrl: '' },
  });
  assert.match((notification?.data as { token: string }).token, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
  await snapshotNotification('Hello Firefox', 'firefox-notification.png');
  await eventually(
    'the notification counted',
    async () => (await call<{ counts: Record<string, number> }>(stack.gatewayUrl, `${SERVER_API}/notifications/${notificationId}`, { key: workspace.apiKey })).body.counts,
    (counts) => counts['delivered'] === 1 && counts['pending'] === 0,
  );
  // Its impression, reported by the worker with the push's token, is the campaign's delivered count.
  await counted(notificationId, { totalSent: 1, totalDelivered: 1, totalClicked: 0 });
  assert.deepEqual(harness.peer.browserProtocolErrors(), []);
});

test('Firefox: a campaign reaches the subscriber the same way and its impression is counted once', async () => {
  const created = await call<{ id: string }>(stack.gatewayUrl, `${SERVER_API}/campaigns`, {
    method: 'POST',
    key: workspace.apiKey,
    body: { name: 'Firefox campaign', title: 'Release 2.0', body: 'Out now', actionUrl: `${site.origin}/release` },
  });
  assert.equal(created.status, 201);
  campaignId = created.body.id;
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/campaigns/${campaignId}/send`, { method: 'POST', key: workspace.apiKey })).status, 200);
  const pushes = await acknowledged(2);
  assert.deepEqual([pushes[1]?.ackCode, pushes[1]?.nackCode], [100, undefined]);
  await shown(campaignId);
  assert.deepEqual(
    // getNotifications() has no fixed order in Firefox.
    (await shownNotifications()).map((entry) => [entry.tag, entry.title, entry.body]).sort((a, b) => String(a[1]).localeCompare(String(b[1]))),
    [
      [firstNotification, 'Hello Firefox', 'Through the WebSocket'],
      [campaignId, 'Release 2.0', 'Out now'],
    ],
  );
  await counted(campaignId, { totalSent: 1, totalDelivered: 1, totalClicked: 0 });
});

test('Firefox: clicking a notification in Firefox’s notification window hands the click to the open page’s onNotificationClick (false: the page stays), counts it and closes the notification', async () => {
  await page.goto(`${site.origin}/?navigate=no`);
  await page.waitForFunction('window.herald !== undefined');
  await clickNotification('Release 2.0');
  await eventually('onNotificationClick', () => heraldEvents(), (events) => events.length > 0);
  assert.deepEqual(await heraldEvents(), [['click', `${site.origin}/release`, { notificationId: campaignId, action: '', title: 'Release 2.0', body: 'Out now', opened: false }]]);
  await counted(campaignId, { totalSent: 1, totalDelivered: 1, totalClicked: 1 });
  assert.deepEqual(
    (await shownNotifications()).map((entry) => entry.tag),
    [firstNotification],
    'the clicked notification is closed',
  );
  assert.equal(page.url(), `${site.origin}/?navigate=no`);
});

test('Firefox: a click with no page of the site open opens the notification’s URL, whose page gets the click (opened: true), counted once', async () => {
  await page.goto('about:blank');
  await clickNotification('Hello Firefox');
  const target = `${site.origin}/news`;
  const opened = await eventually('the opened page', async () => (await browser.pages()).find((entry) => entry.url() === target), (found) => found !== undefined);
  assert.ok(opened);
  await opened.waitForFunction('window.herald !== undefined');
  await eventually('the pending click', () => heraldEvents(opened), (events) => events.length > 0);
  assert.deepEqual(await heraldEvents(opened), [['click', target, { notificationId: firstNotification, action: '', title: 'Hello Firefox', body: 'Through the WebSocket', opened: true }]]);
  await counted(firstNotification, { totalSent: 1, totalDelivered: 1, totalClicked: 1 });
  await opened.close();
  await page.goto(`${site.origin}/`);
  await page.waitForFunction('window.herald !== undefined');
});

test('Firefox: a push sent while Firefox is away from its push service is accepted, kept, and shown once Firefox is back', async () => {
  // dom.push.connection.enabled off: Firefox closes its connection to the push service.
  await setPreference('dom.push.connection.enabled', false);
  await eventually('Firefox disconnected', async () => harness.peer.connectedBrowsers(), (uaids) => uaids.length === 0);
  const sent = await call<{ campaignId: string }>(stack.gatewayUrl, `${SERVER_API}/send`, {
    method: 'POST',
    key: workspace.apiKey,
    body: { title: 'While away', body: 'Kept for you', externalIds: ['firefox-user-1'] },
  });
  const notificationId = sent.body.campaignId;
  const stored = await eventually('accepted and stored', async () => harness.peer.browserMessages(endpoint), (list) => list.length === 3);
  assert.deepEqual([stored[2]?.forwardedAt, stored[2]?.ackCode], [undefined, undefined]);
  // Herald counts it delivered: the push service accepted it (201), as any push service would.
  await eventually(
    'the push accepted',
    async () => (await call<{ counts: Record<string, number> }>(stack.gatewayUrl, `${SERVER_API}/notifications/${notificationId}`, { key: workspace.apiKey })).body.counts,
    (counts) => counts['delivered'] === 1 && counts['pending'] === 0,
  );
  await setPreference('dom.push.connection.enabled', true);
  const [, , kept] = await acknowledged(3);
  assert.deepEqual([kept?.ackCode, kept?.nackCode], [100, undefined]);
  await shown(notificationId);
  await counted(notificationId, { totalSent: 1, totalDelivered: 1, totalClicked: 0 });
});

test('Firefox: the hosted subscribe page subscribes with its own worker and shows the subscribed state', async () => {
  // The page's calls are from Herald's own origin, which may use any site key: a gateway whose
  // PUBLIC_ORIGIN is its own address serves it.
  const port = await freePort();
  const herald = await stack.addGateway({ ALLOW_ANY_PUSH_SERVICE: 'true', PUBLIC_ORIGIN: `http://127.0.0.1:${port}` }, port);
  const hosted = await browser.newPage();
  await hosted.goto(`${herald}/s/${workspace.siteSlug}`);
  await hosted.waitForSelector('main[data-state="ready"]');
  await hosted.screenshot({ path: await artifactPath('firefox-subscribe-page-ready.png') });
  await hosted.click('#subscribe');
  await hosted.waitForSelector('main[data-state="subscribed"], main[data-state="failed"]');
  assert.equal(await hosted.$eval('#status', (element) => element.textContent), 'You are subscribed. You can close this page.');
  await hosted.screenshot({ path: await artifactPath('firefox-subscribe-page-subscribed.png') });
  const channels = harness.peer.browserChannels();
  assert.equal(channels.length, 2);
  assert.deepEqual(channels[1], { ...channels[1], applicationServerKey: vapidPublicKey, state: 'registered' });
  const count = await call<{ total: number; active: number }>(stack.gatewayUrl, `${SERVER_API}/subscribers/count`, { key: workspace.apiKey });
  assert.deepEqual([count.body.total, count.body.active], [2, 2]);
  await hosted.close();
});

test('Firefox: a push service that answers hello with a new UAID makes Firefox fire pushsubscriptionchange; each worker moves its subscriber to the new endpoint', async () => {
  const { body: listed } = await call<{ data: Array<{ id: string; updatedAt: string }> }>(stack.gatewayUrl, `${SERVER_API}/subscribers`, { key: workspace.apiKey });
  const updatedBefore = new Map(listed.data.map((entry) => [entry.id, entry.updatedAt]));
  assert.equal(updatedBefore.size, 2);
  const before = harness.peer.browserChannels();
  // The peer forgets the browser's UAID and drops the connection; Firefox reconnects a second
  // later, gets a new UAID, drops both registrations and wakes both workers, which subscribe again
  // (with the old subscription's options: the same VAPID key) and tell Herald.
  harness.peer.rotateUaids();
  const renewed = await eventually(
    'both workers subscribed again',
    async () => harness.peer.browserChannels().filter((channel) => channel.state === 'registered'),
    (list) => list.length === 2,
    60_000,
  );
  assert.deepEqual(
    harness.peer.browserChannels().map((channel) => channel.state),
    ['dropped', 'dropped', 'registered', 'registered'],
  );
  assert.ok(renewed.every((channel) => channel.uaid !== before[0]?.uaid && channel.applicationServerKey === vapidPublicKey));
  // Firefox records the new subscription a moment after the peer answered its register.
  const current = await eventually(
    'the site’s worker holds one of the new endpoints',
    async () => (await page.evaluate("navigator.serviceWorker.ready.then((r) => r.pushManager.getSubscription()).then((s) => (s && s.endpoint) || '')")) as string,
    (held) => renewed.some((channel) => channel.endpoint === held),
    // On a machine running four test files at once Firefox took longer than 20 s to record it.
    60_000,
  );
  // Both subscribers moved (kept their ids: subscription-change updates them in place).
  await eventually(
    'both subscribers moved',
    async () => (await call<{ data: Array<{ id: string; updatedAt: string; status: string }> }>(stack.gatewayUrl, `${SERVER_API}/subscribers`, { key: workspace.apiKey })).body.data,
    (list) => list.length === 2 && list.every((entry) => entry.status === 'active' && updatedBefore.has(entry.id) && updatedBefore.get(entry.id) !== entry.updatedAt),
  );
  const moved = await subscriber(subscriberId);
  assert.deepEqual([moved['status'], moved['externalId'], moved['tags']], ['active', 'firefox-user-1', ['plan:pro', 'lang:de']]);
  // Herald now sends to the new endpoints: one push each, acknowledged by Firefox.
  const pushedBefore = harness.peer.browserMessages().length;
  const sent = await call<{ sent: number }>(stack.gatewayUrl, `${SERVER_API}/send`, { method: 'POST', key: workspace.apiKey, body: { title: 'After the move', body: 'New endpoints' } });
  assert.equal(sent.body.sent, 2);
  for (const channel of renewed) await acknowledged(1, channel.endpoint);
  assert.equal(harness.peer.browserMessages().length, pushedBefore + 2);
  endpoint = current;
  assert.deepEqual(harness.peer.browserProtocolErrors(), []);
});

test('Firefox: unsubscribe() unregisters the channel with the push peer and makes the subscriber unsubscribed', async () => {
  assert.equal(await page.evaluate('window.herald.unsubscribe()'), true);
  const channel = harness.peer.browserChannels().find((entry) => entry.endpoint === endpoint);
  assert.deepEqual([channel?.state, channel?.unregisterCode], ['unregistered', 200]);
  const gone = await subscriber(subscriberId);
  assert.deepEqual([gone['status'], (gone['delivery'] as { reachable: boolean }).reachable], ['unsubscribed', false]);
  assert.equal(await page.evaluate('window.herald.unsubscribe()'), false);
  assert.deepEqual(harness.peer.browserProtocolErrors(), []);
});
