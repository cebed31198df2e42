import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, chromiumPath, eventually, SERVER_API, subscribeBrowser, type OpenedPush, type SendingHarness } from '@herald/testkit';
import { chromium, type Browser, type Page } from 'playwright-core';

import { ownerPage as signedInOwner, screenshotPath, seriousViolations, startConsoleHarness, type ConsoleHarness } from './support.js';

// The campaigns and flows pages in Debian's Chromium on a real sending stack: the delivery fleet
// pushes to the strict push peer (VAPID checked, payloads decrypted with each subscriber's key), the
// recipients' impressions are reported with their pushes' tokens, and the page's chart follows.

let harness: ConsoleHarness;
let sending: SendingHarness;
let browser: Browser;
before(async () => {
  harness = await startConsoleHarness({ sending: true });
  if (!harness.sending) throw new Error('the console harness started without the sending stack');
  sending = harness.sending;
  browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: ['--no-sandbox'] });
});
after(async () => {
  await browser?.close();
  await harness?.stop();
});

const ownerPage = () => signedInOwner(browser, harness);

const api = <T>(path: string, init: { method?: string; body?: unknown } = {}) => call<T>(harness.origin, `${SERVER_API}${path}`, { key: harness.workspace.apiKey, ...init });

/** `count` browsers subscribed to the console's workspace through the strict push peer. */
async function subscribeBrowsers(prefix: string, count: number): Promise<void> {
  const site = await api<{ vapidPublicKey: string }>('/site');
  // The stack's one gateway is the console's (added after the stack started, on the origin's port).
  const viaConsoleGateway = { ...sending, stack: { ...sending.stack, gatewayUrl: harness.origin } };
  for (let index = 0; index < count; index += 1) {
    await subscribeBrowser(viaConsoleGateway, { workspace: harness.workspace, vapidPublicKey: site.body.vapidPublicKey }, { externalId: `${prefix}-${index}`, tags: [prefix] });
  }
}

const pushesOf = (notificationId: string): OpenedPush[] =>
  sending.peer.received().map((message) => sending.openPush(message)).filter((opened) => opened.payload.notificationId === notificationId);

/** The chart's legend: each series' total in the window, as the page shows it. */
async function legend(page: Page): Promise<Record<string, string>> {
  const items = await page.getByRole('list', { name: 'Totals in this window' }).getByRole('listitem').allTextContents();
  return Object.fromEntries(items.map((item) => item.split(' ') as [string, string]));
}

test('compose a campaign with its live preview, send it by keyboard to push-peer subscribers, and see the chart move as impressions are reported; no serious axe violation', async () => {
  await subscribeBrowsers('chart', 3);
  const { context, page } = await ownerPage();
  await page.getByRole('link', { name: 'Campaigns' }).click();
  await page.getByRole('heading', { name: 'Campaigns', level: 1 }).waitFor();

  // Composing by keyboard; the preview follows each keystroke.
  await page.getByLabel('Name').focus();
  await page.keyboard.type('Autumn launch');
  await page.keyboard.press('Tab');
  await page.keyboard.type('New in autumn');
  await page.keyboard.press('Tab');
  await page.keyboard.type('Coats are in.');
  await page.keyboard.press('Tab');
  await page.keyboard.type('https://shop.example.test/icon.png');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Tab');
  await page.keyboard.type('https://shop.example.test/coats');
  const preview = page.getByRole('group', { name: 'The notification as a browser shows it' });
  // The test's site does not resolve: the preview names the icon it could not load.
  await preview.getByText('The browser could not load https://shop.example.test/icon.png.').waitFor();
  assert.deepEqual(
    [
      await preview.locator('.notification-origin').textContent(),
      await preview.locator('.notification-title').textContent(),
      await preview.locator('.notification-body').textContent(),
      await preview.locator('.notification-action').allTextContents(),
    ],
    [
      'shop.example.test',
      'New in autumn',
      'Coats are in.',
      ['The browser could not load https://shop.example.test/icon.png.', 'A click opens https://shop.example.test/coats'],
    ],
  );
  assert.deepEqual(await seriousViolations(page), []);
  await page.screenshot({ path: await screenshotPath('console-campaigns.png'), fullPage: true });

  await page.getByRole('button', { name: 'Send now', exact: true }).focus();
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Autumn launch', level: 2 }).waitFor();
  const campaignId = new URL(page.url()).searchParams.get('campaign') ?? '';
  assert.match(campaignId, /^\S+$/);
  const pushes = await eventually('every subscriber got the campaign', async () => pushesOf(campaignId), (found) => found.length === 3);
  assert.deepEqual([pushes[0]?.payload.title, pushes[0]?.payload.body, pushes[0]?.payload.url], ['New in autumn', 'Coats are in.', 'https://shop.example.test/coats']);

  // The chart (read again every 5 s) shows the three sent, nothing delivered yet.
  assert.deepEqual(await eventually('the sends charted', () => legend(page), (shown) => shown.Sent === '3'), { Sent: '3', Delivered: '0', Clicked: '0', Dismissed: '0' });
  const deliveredLine = page.locator('polyline[data-series="delivered"]');
  const flat = await deliveredLine.getAttribute('points');

  // Two recipients' service workers report an impression, one a click, one a dismissal.
  const reports = [
    { type: 'impression', token: pushes[0]?.token },
    { type: 'impression', token: pushes[1]?.token },
    { type: 'click', token: pushes[0]?.token },
    { type: 'dismiss', token: pushes[2]?.token },
  ];
  for (const body of reports) {
    const response = await call(harness.origin, '/api/v1/events', { method: 'POST', body, headers: { origin: 'https://shop.example.test' } });
    assert.equal(response.status, 202);
  }
  assert.deepEqual(await eventually('the reports charted', () => legend(page), (shown) => shown.Delivered === '2' && shown.Dismissed === '1'), {
    Sent: '3',
    Delivered: '2',
    Clicked: '1',
    Dismissed: '1',
  });
  assert.notEqual(await deliveredLine.getAttribute('points'), flat);
  // The counters above the chart are read by their own query: they catch up on its next read.
  const figures = await eventually('the figures updated', () => page.locator('.figures dd').allTextContents(), (shown) => shown[1] === '2' && shown[2] === '1');
  assert.deepEqual(figures, ['3', '2', '1', '66.67%', '50%']);
  // The same numbers as a table, by bucket.
  await page.getByText('The numbers as a table').click();
  const rows = page.getByRole('table', { name: /Counts per bucket/ }).getByRole('row');
  const sums = [0, 0, 0, 0];
  for (let index = 1; index < (await rows.count()); index += 1) {
    (await rows.nth(index).getByRole('cell').allTextContents()).forEach((cell, column) => (sums[column] = (sums[column] ?? 0) + Number(cell)));
  }
  assert.deepEqual(sums, [3, 2, 1, 1]);
  assert.deepEqual(await seriousViolations(page), []);
  await page.screenshot({ path: await screenshotPath('console-campaign-stats.png'), fullPage: true });
  await context.close();
});

test('schedule a campaign from the composer; pause and resume a sending one from the list', async () => {
  await subscribeBrowsers('slow', 2);
  const { context, page } = await ownerPage();
  await page.getByRole('link', { name: 'Campaigns' }).click();
  await page.getByLabel('Name').fill('Winter preview');
  await page.getByLabel('Title').fill('Winter');
  await page.getByLabel('Body').fill('Soon.');
  await page.getByLabel('Send at (optional)').fill('2099-01-02T09:30');
  await page.getByRole('button', { name: 'Schedule' }).click();
  await page.getByRole('heading', { name: 'Winter preview', level: 2 }).waitFor();
  const scheduledId = new URL(page.url()).searchParams.get('campaign') ?? '';
  const scheduled = await api<{ status: string; scheduledAt: string }>(`/campaigns/${scheduledId}`);
  assert.deepEqual([scheduled.body.status, scheduled.body.scheduledAt], ['scheduled', new Date('2099-01-02T09:30').toISOString()]);

  // One recipient a minute: the campaign stays sending long enough to pause it.
  const slow = await api<{ id: string }>('/campaigns', { method: 'POST', body: { name: 'Slow drip', title: 'Drip', body: 'One a minute', throttlePerMinute: 1 } });
  assert.equal(slow.status, 201);
  assert.equal((await api(`/campaigns/${slow.body.id}/send`, { method: 'POST' })).status, 200);
  await page.getByRole('link', { name: 'All campaigns' }).click();
  const row = page.getByRole('row', { name: /Slow drip/ });
  await row.getByRole('button', { name: 'Pause: Slow drip' }).click();
  await row.getByRole('button', { name: 'Resume: Slow drip' }).waitFor();
  assert.equal((await api<{ status: string }>(`/campaigns/${slow.body.id}`)).body.status, 'paused');
  await row.getByRole('button', { name: 'Resume: Slow drip' }).click();
  await row.getByRole('button', { name: 'Pause: Slow drip' }).waitFor();
  assert.equal((await api<{ status: string }>(`/campaigns/${slow.body.id}`)).body.status, 'active');
  // The scheduled one offers only "Send now", as the API refuses pausing it.
  assert.equal((await api(`/campaigns/${scheduledId}/pause`, { method: 'POST' })).status, 409);
  assert.equal(await page.getByRole('row', { name: /Winter preview/ }).getByRole('button').count(), 1);
  await context.close();
});

test('flows: create one with a send and a delay step, activate it, see a new subscriber\'s run and its timeline, pause it; no serious axe violation', async () => {
  const { context, page } = await ownerPage();
  await page.getByRole('link', { name: 'Flows' }).click();
  await page.getByRole('heading', { name: 'Flows', level: 1 }).waitFor();
  await page.getByLabel('Name').fill('Welcome series');
  await page.getByLabel('Starts when').selectOption('subscription');
  await page.getByRole('button', { name: 'Add a send step' }).click();
  await page.getByLabel('Title of step 1').fill('Welcome');
  await page.getByLabel('Body of step 1').fill('Thanks for subscribing.');
  await page.getByRole('button', { name: 'Add a delay' }).click();
  await page.getByLabel('Wait in step 2').fill('2');
  await page.getByLabel('Unit of step 2').selectOption('days');
  await page.getByRole('button', { name: 'Add an exit' }).click();
  // Reordering by keyboard: the exit moves above the delay, then back.
  await page.getByRole('button', { name: 'Move step 3 up' }).focus();
  await page.keyboard.press('Enter');
  assert.equal(await page.locator('.step-title').nth(1).textContent(), 'Step 2: exit');
  await page.getByRole('button', { name: 'Move step 3 up' }).focus();
  await page.keyboard.press('Enter');
  await page.getByRole('button', { name: 'Remove step 3' }).click();
  assert.deepEqual(await seriousViolations(page), []);
  await page.getByRole('button', { name: 'Create flow' }).click();
  await page.getByRole('heading', { name: 'Welcome series', level: 2 }).waitFor();
  const flowId = new URL(page.url()).searchParams.get('flow') ?? '';
  const created = await api<{ status: string; triggerType: string; steps: Array<{ stepType: string; config: unknown }> }>(`/flows/${flowId}`);
  assert.deepEqual(created.body.steps.map(({ stepType, config }) => ({ stepType, config })), [
    { stepType: 'send_notification', config: { notification: { title: 'Welcome', body: 'Thanks for subscribing.' } } },
    { stepType: 'delay', config: { delay: { value: 2, unit: 'days' } } },
  ]);
  assert.deepEqual([created.body.status, created.body.triggerType], ['draft', 'subscription']);

  await page.getByRole('button', { name: 'Activate' }).click();
  await page.getByText('Status: active').waitFor();
  assert.equal((await api<{ status: string }>(`/flows/${flowId}`)).body.status, 'active');

  // A new subscriber starts a run: its welcome push is sent, then it waits two days.
  await subscribeBrowsers('welcome', 1);
  const run = page.getByRole('article', { name: /Run for subscriber/ });
  await run.getByText('Step 2 waiting: Wait 2 days').waitFor({ timeout: 30_000 });
  const timeline = await run.getByRole('listitem').allTextContents();
  assert.equal(timeline.length, 4, JSON.stringify(timeline));
  assert.match(timeline[0] ?? '', /: started \(a visitor subscribes\)$/);
  assert.equal(timeline[1], 'Step 1 done: Send "Welcome"');
  assert.match(timeline[2] ?? '', /^Step 2 waiting: Wait 2 days \(until .+\)$/);
  assert.match(timeline[3] ?? '', /^Notifications sent: \S+ $/);
  assert.equal(await run.locator('.run-head strong').textContent(), 'waiting');
  await page.getByText('Runs started: 1').waitFor();
  assert.deepEqual(await seriousViolations(page), []);
  await page.screenshot({ path: await screenshotPath('console-flow.png'), fullPage: true });

  await page.getByRole('button', { name: 'Pause' }).click();
  await page.getByText('Status: paused').waitFor();
  assert.equal((await api<{ status: string }>(`/flows/${flowId}`)).body.status, 'paused');
  // The list shows it paused, with its one run, and offers to activate it again.
  await page.getByRole('link', { name: 'All flows' }).click();
  const row = page.getByRole('row', { name: /Welcome series/ });
  // The list shown from before is read again on the way back.
  await row.getByRole('cell', { name: 'paused', exact: true }).waitFor();
  assert.deepEqual((await row.getByRole('cell').allTextContents()).slice(0, 4), ['A visitor subscribes', 'paused', '2', '1']);
  await row.getByRole('button', { name: 'Activate: Welcome series' }).waitFor();
  await context.close();
});

test('a step list the API refuses shows its answer and changes nothing: activating a flow without steps is a 409', async () => {
  const { context, page } = await ownerPage();
  await page.getByRole('link', { name: 'Flows' }).click();
  await page.getByLabel('Name').fill('Empty');
  await page.getByRole('button', { name: 'Create flow' }).click();
  await page.getByRole('heading', { name: 'Empty', level: 2 }).waitFor();
  await page.getByRole('button', { name: 'Activate' }).click();
  const alert = page.getByRole('alert');
  await alert.waitFor();
  assert.match((await alert.textContent()) ?? '', /step/i);
  const flowId = new URL(page.url()).searchParams.get('flow') ?? '';
  assert.equal((await api<{ status: string }>(`/flows/${flowId}`)).body.status, 'draft');
  await context.close();
});
