import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';

import { admin, call, chromiumPath, SERVER_API, startSlackPeer, type SlackPeer } from '@herald/testkit';
import { chromium, type Browser, type Page } from 'playwright-core';

import { csrfOf, fetchFromPage, forbiddenForRole, newAddress, ownerPage, screenshotPath, seriousViolations, SITE_DOMAIN, startConsoleHarness, type ConsoleHarness } from './support.js';

// The settings page in Debian's Chromium on the real stack, with Slack's Web API played by the
// strict peer of @herald/testkit: the site and its keys, connecting Slack (its problems next to
// their fields, the secrets never shown back), its status, disconnecting it; the webhook signing
// secret shown on demand and rotated; the approval mode changed; a viewer sees no control and the
// API refuses them with 403.

let harness: ConsoleHarness;
let browser: Browser;
let peer: SlackPeer;
before(async () => {
  peer = await startSlackPeer();
  harness = await startConsoleHarness({
    env: { SLACK_API_URL: peer.apiUrl, CHANNEL_SECRET_KEYS: `k1:${randomBytes(32).toString('base64')}` },
  });
  browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: ['--no-sandbox'] });
});
after(async () => {
  await browser?.close();
  await harness?.stop();
  await peer?.close();
});

const CHANNEL = 'C0SETTINGS1';

/** The workspace's own view of something, with its dashboard key. */
const withKey = <T>(path: string) => call<T>(harness.origin, `${SERVER_API}${path}`, { key: harness.workspace.apiKey });

async function openSettings(page: Page): Promise<void> {
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Settings' }).click();
  await page.getByRole('heading', { name: 'Settings', level: 1 }).waitFor();
  await page.getByRole('heading', { name: 'Site', level: 2 }).waitFor();
}

test('the owner sees the site and its keys, connects Slack by keyboard (the API refusing a token shows next to it), sees its status and disconnects it; no serious axe violation', async () => {
  const { context, page } = await ownerPage(browser, harness);
  try {
    await openSettings(page);
    const site = await withKey<{ name: string; slug: string; subscribePageUrl: string; siteKey: string; vapidPublicKey: string }>('/site');
    assert.equal(site.status, 200);
    await page.getByText(`https://${SITE_DOMAIN}`).waitFor();
    assert.equal(await page.getByRole('textbox', { name: 'VAPID public key', exact: true }).inputValue(), site.body.vapidPublicKey);
    assert.equal(await page.getByRole('textbox', { name: 'Site key', exact: true }).inputValue(), site.body.siteKey);
    const siteFacts = await page.getByRole('region', { name: 'Site' }).getByRole('definition').allInnerTexts();
    assert.deepEqual(siteFacts.slice(0, 4), [site.body.name, `https://${SITE_DOMAIN}`, site.body.slug, site.body.subscribePageUrl]);
    await page.getByText('Slack is not connected.').waitFor();
    assert.deepEqual(await seriousViolations(page), []);

    // Keyboard alone: Tab through the three fields, Enter submits. Slack does not know this token.
    const team = peer.addTeam([CHANNEL]);
    await page.getByLabel('Bot token', { exact: true }).focus();
    await page.keyboard.type('xoxb-1-unknown');
    await page.keyboard.press('Tab');
    await page.keyboard.type(team.signingSecret);
    await page.keyboard.press('Tab');
    await page.keyboard.type(CHANNEL);
    await page.keyboard.press('Enter');
    const tokenProblem = page.locator('#slack-botToken-problem');
    await tokenProblem.waitFor();
    assert.equal(await tokenProblem.innerText(), 'Bot token: Slack answered invalid_auth');
    assert.equal(await page.getByLabel('Bot token', { exact: true }).getAttribute('aria-invalid'), 'true');
    assert.equal(await page.getByRole('alert').innerText(), "Slack refused the bot token (auth.test: invalid_auth). Use the app's Bot User OAuth Token (xoxb-...) from its OAuth & Permissions page, after installing it to the workspace.");
    assert.equal((await withKey('/channels/slack')).status, 404);

    // A channel name where the API wants an id: the schema's problem, next to that field only.
    await page.getByLabel('Bot token', { exact: true }).fill(team.botToken);
    await page.getByLabel('Default channel id', { exact: true }).fill('#general');
    await page.getByRole('button', { name: 'Connect Slack' }).click();
    await page.locator('#slack-defaultChannel-problem').waitFor();
    assert.match(await page.locator('#slack-defaultChannel-problem').innerText(), /^Default channel id: /);
    assert.equal(await tokenProblem.count(), 0);
    assert.deepEqual(await seriousViolations(page), []);

    await page.getByLabel('Default channel id', { exact: true }).fill(CHANNEL);
    await page.getByRole('button', { name: 'Connect Slack' }).click();
    const status = page.getByRole('definition').filter({ hasText: team.teamId });
    await status.waitFor();
    assert.equal(await status.innerText(), `${team.teamName} (${team.teamId})`);
    const connected = await withKey<{ teamId: string; defaultChannel: string; botUserId: string }>('/channels/slack');
    assert.equal(connected.status, 200);
    assert.deepEqual([connected.body.teamId, connected.body.defaultChannel, connected.body.botUserId], [team.teamId, CHANNEL, team.botUserId]);
    // Write-only: neither secret is on the page, or in any field.
    const html = await page.content();
    assert.ok(!html.includes(team.signingSecret) && !html.includes(team.botToken));
    assert.equal(await page.getByLabel('Bot token', { exact: true }).count(), 0);
    assert.deepEqual(await seriousViolations(page), []);
    await page.screenshot({ path: await screenshotPath('console-settings.png'), fullPage: true });

    await page.getByRole('button', { name: 'Disconnect Slack' }).click();
    const confirm = page.getByRole('dialog', { name: 'Disconnect Slack?' });
    await confirm.getByRole('button', { name: 'Disconnect' }).click();
    await confirm.waitFor({ state: 'hidden' });
    await page.getByText('Slack is not connected.').waitFor();
    assert.equal((await withKey('/channels/slack')).status, 404);
    assert.equal((await withKey<{ approvalMode: string }>('/workspace')).body.approvalMode, 'browser');
  } finally {
    await context.close();
  }
});

test('the webhook signing secret is shown on demand (the API says it) and rotated (the previous one named until when it still signs)', async () => {
  const { context, page } = await ownerPage(browser, harness);
  try {
    await openSettings(page);
    await page.getByRole('button', { name: 'Show the signing secret' }).click();
    const current = await withKey<{ secret: string }>('/webhooks/secret');
    assert.equal(current.status, 200);
    assert.equal(await page.getByRole('textbox', { name: 'Webhook signing secret', exact: true }).inputValue(), current.body.secret);

    await page.getByRole('button', { name: 'Rotate the signing secret' }).click();
    const confirm = page.getByRole('dialog', { name: 'Rotate the signing secret?' });
    await confirm.getByRole('button', { name: 'Rotate' }).click();
    await confirm.waitFor({ state: 'hidden' });
    await page.getByText('The previous secret still signs until').waitFor();
    const rotated = await withKey<{ secret: string }>('/webhooks/secret');
    assert.notEqual(rotated.body.secret, current.body.secret);
    assert.equal(await page.getByRole('textbox', { name: 'Webhook signing secret', exact: true }).inputValue(), rotated.body.secret);

    await page.getByRole('button', { name: 'Hide the signing secret' }).click();
    assert.equal(await page.getByRole('textbox', { name: 'Webhook signing secret', exact: true }).count(), 0);
    assert.ok(!(await page.content()).includes(rotated.body.secret));
  } finally {
    await context.close();
  }
});

test('the owner changes the approval mode by keyboard; the API answers the new mode', async () => {
  const { context, page } = await ownerPage(browser, harness);
  try {
    await openSettings(page);
    const browserMode = page.getByRole('radio', { name: 'Browser' });
    await browserMode.waitFor();
    assert.equal(await browserMode.isChecked(), true);
    assert.equal(await page.getByRole('button', { name: 'Save the approval mode' }).isDisabled(), true);
    // Arrow keys move within the radio group; Tab reaches Save, Enter saves.
    await browserMode.focus();
    await page.keyboard.press('ArrowDown');
    assert.equal(await page.getByRole('radio', { name: 'Terminal' }).isChecked(), true);
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Save the approval mode');
    await page.keyboard.press('Enter');
    await page.getByRole('status').filter({ hasText: 'Saved: questions opened from now on use the terminal mode.' }).waitFor();
    assert.equal((await withKey<{ approvalMode: string }>('/workspace')).body.approvalMode, 'terminal');
    assert.deepEqual(await seriousViolations(page), []);

    await page.getByRole('radio', { name: 'Browser' }).check();
    await page.getByRole('button', { name: 'Save the approval mode' }).click();
    await page.getByRole('status').filter({ hasText: 'use the browser mode.' }).waitFor();
    assert.equal((await withKey<{ approvalMode: string }>('/workspace')).body.approvalMode, 'browser');
  } finally {
    await context.close();
  }
});

test('a viewer reads the site but sees no Slack or secret control, and the API refuses their changes with 403; no serious axe violation', async () => {
  const invited = await admin<{ signInUrl: string }>('member', 'invite', '--workspace', harness.workspace.workspaceId, '--email', newAddress('viewer'), '--role', 'viewer');
  const context = await browser.newContext();
  const page = await context.newPage();
  try {
    await page.goto(invited.signInUrl.replace(/^https?:\/\/[^/]+/, harness.origin));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Open the Herald Console' }).click();
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    await openSettings(page);
    await page.getByRole('textbox', { name: 'VAPID public key', exact: true }).waitFor();
    await page.getByText('Only owners and admins see and change the Slack connection.').waitFor();
    await page.getByText('Only owners and admins see and rotate the signing secret.').waitFor();
    await page.getByText('Owners and admins invite and remove members.').waitFor();
    await page.getByText('Approval mode: Browser. Owners and admins change it.').waitFor();
    assert.equal(await page.getByRole('radio').count(), 0);
    assert.deepEqual(
      await page.getByRole('main').getByRole('button').allTextContents(),
      ['Copy', 'Copy'],
    );
    assert.deepEqual(await seriousViolations(page), []);

    const team = peer.addTeam([CHANNEL]);
    const csrf = await csrfOf(page);
    const forbidden = { status: 403, body: forbiddenForRole(harness, 'viewer', 'change', 'webhooks') };
    assert.deepEqual(await fetchFromPage(page, 'PUT', '/channels/slack', { botToken: team.botToken, signingSecret: team.signingSecret, defaultChannel: CHANNEL }, csrf), forbidden);
    assert.deepEqual(await fetchFromPage(page, 'POST', '/webhooks/secret/rotate', undefined, csrf), forbidden);
    assert.deepEqual(await fetchFromPage(page, 'PATCH', '/workspace', { approvalMode: 'terminal' }, csrf), forbidden);
    assert.deepEqual(await fetchFromPage(page, 'GET', '/webhooks/secret'), { status: 403, body: forbiddenForRole(harness, 'viewer', 'read', 'webhooks') });
    // Nothing changed: Slack never heard of the team, and the workspace has no connection.
    assert.equal(peer.calls('auth.test').filter((made) => made.teamId === team.teamId).length, 0);
    assert.equal((await withKey('/channels/slack')).status, 404);
    assert.equal((await withKey<{ approvalMode: string }>('/workspace')).body.approvalMode, 'browser');
  } finally {
    await context.close();
  }
});
