import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import AxeBuilder from '@axe-core/playwright';
import { admin, call, chromiumPath, createWorkspace, SERVER_API, type TestWorkspace } from '@herald/testkit';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

import { newAddress, screenshotPath, startConsoleHarness, type ConsoleHarness } from './support.js';

// The decisions inbox in Debian's Chromium on the real stack: questions appear live (the page's
// EventSource on GET /decisions/stream), an approver answers in place by keyboard while an agent
// waits on POST /ask and gets it with answeredBy (the member, channel console), a viewer is refused by the API. The harness's workspace is on the Partner
// plan, which has no /ask: these tests use a Growth workspace of their own.

let harness: ConsoleHarness;
let browser: Browser;
let workspace: TestWorkspace;
before(async () => {
  harness = await startConsoleHarness();
  browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: ['--no-sandbox'] });
  workspace = await createWorkspace('growth');
});
after(async () => {
  await browser?.close();
  await harness?.stop();
});

/** A fresh browser profile with a new member of `role` signed in by their one-time link, on the inbox. */
async function memberOnInbox(role: string): Promise<{ context: BrowserContext; page: Page; memberId: string }> {
  const invited = await admin<{ memberId: string; signInUrl: string }>('member', 'invite', '--workspace', workspace.workspaceId, '--email', newAddress(role), '--role', role, '--name', `Avery ${role}`);
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(invited.signInUrl.replace(/^https?:\/\/[^/]+/, harness.origin));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('link', { name: 'Open the Herald Console' }).click();
  await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Decisions' }).click();
  await page.getByRole('heading', { name: 'Decisions', level: 1 }).waitFor();
  await page.getByRole('status').filter({ hasText: 'Live: new questions appear here' }).waitFor();
  return { context, page, memberId: invited.memberId };
}

async function seriousViolations(page: Page): Promise<Array<{ id: string; targets: string[] }>> {
  const { violations } = await new AxeBuilder({ page }).analyze();
  return violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => ({ id: violation.id, targets: violation.nodes.map((node) => node.target.join(' ')) }));
}

const ask = (body: Record<string, unknown>) => call<Record<string, unknown>>(harness.origin, `${SERVER_API}/ask`, { method: 'POST', key: workspace.apiKey, body });

test('an approver answers by keyboard from the inbox while an agent waits on /ask: the question appears live, the agent gets the answer, the history shows it with its record; no serious axe violation', async () => {
  const { context, page, memberId } = await memberOnInbox('approver');
  try {
    // The agent asks after the page is open: the question appears without a reload.
    const waiting = ask({ question: 'Ship release 1.2 to production?', agentName: 'release-bot', timeoutSeconds: 50 });
    const card = page.getByRole('article', { name: 'Ship release 1.2 to production?' });
    await card.waitFor();
    assert.match(await card.innerText(), /Asked by release-bot/);
    assert.deepEqual(await seriousViolations(page), []);
    await page.screenshot({ path: await screenshotPath('console-inbox.png'), fullPage: true });

    // Keyboard alone: the page's heading has focus after navigation; Tab reaches Approve.
    await page.getByRole('heading', { name: 'Decisions', level: 1 }).focus();
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Approve');
    await page.keyboard.press('Enter');

    const agent = await waiting;
    assert.equal(agent.status, 200, JSON.stringify(agent.body));
    assert.deepEqual([agent.body.status, agent.body.answered, agent.body.value], ['answered', true, 'yes']);
    const { at, ...answeredBy } = agent.body.answeredBy as Record<string, string>;
    assert.deepEqual(answeredBy, { kind: 'member', id: memberId, displayName: 'Avery approver', channel: 'console' });
    assert.ok(at && Date.parse(at) > 0);
    // It leaves the waiting list and shows in the history with its answer.
    await card.waitFor({ state: 'detached' });
    const row = page.getByRole('table', { name: 'Settled questions' }).getByRole('row', { name: /Ship release 1\.2 to production\?/ });
    // The history is read again once the answer lands: its row can come a moment after the card goes.
    await row.waitFor();
    assert.deepEqual((await row.getByRole('cell').allInnerTexts()).slice(0, 4), ['release-bot', 'answered', 'yes', 'Avery approver (member, console)']);
    // Its record, opened by keyboard: what happened, oldest first, the answer by this member from the console.
    await row.getByText('Show the record').focus();
    await page.keyboard.press('Enter');
    const record = page.getByRole('list', { name: 'Record of Ship release 1.2 to production?' });
    await record.getByRole('listitem').filter({ hasText: 'answered by Avery approver (console)' }).waitFor();
    const entries = await record.getByRole('listitem').allInnerTexts();
    assert.match(entries[0] ?? '', / opened by /);
    assert.match(entries.at(-1) ?? '', / answered by Avery approver \(console\)$/);
    await page.screenshot({ path: await screenshotPath('console-inbox-history.png'), fullPage: true });
    assert.deepEqual(await seriousViolations(page), []);
  } finally {
    await context.close();
  }
});

test('select and input questions are answered in place, by option and by text; a decision settled elsewhere leaves the list live', async () => {
  const { context, page } = await memberOnInbox('approver');
  try {
    const region = ask({ question: 'Which region first?', type: 'select', options: ['eu-west', 'us-east'], timeoutSeconds: 50 });
    const regionCard = page.getByRole('article', { name: 'Which region first?' });
    await regionCard.getByRole('button', { name: 'us-east' }).click();
    const chosen = await region;
    assert.deepEqual([chosen.body.status, chosen.body.value], ['answered', 'us-east']);

    const note = ask({ question: 'Release note title?', type: 'input', placeholder: 'A short title', timeoutSeconds: 50 });
    const noteCard = page.getByRole('article', { name: 'Release note title?' });
    await noteCard.getByLabel('Your answer').fill('Faster sends');
    await noteCard.getByLabel('Your answer').press('Enter');
    const typed = await note;
    assert.deepEqual([typed.body.status, typed.body.value], ['answered', 'Faster sends']);

    const opened = await call<Record<string, unknown>>(harness.origin, `${SERVER_API}/decisions`, { method: 'POST', key: workspace.apiKey, body: { question: 'Rotate the signing key?' } });
    assert.equal(opened.status, 200);
    const decisionCard = page.getByRole('article', { name: 'Rotate the signing key?' });
    await decisionCard.waitFor();
    // Cancelled by the agent: the page hears it and drops the card.
    assert.equal((await call(harness.origin, `${SERVER_API}/decisions/${String(opened.body.decisionId)}`, { method: 'DELETE', key: workspace.apiKey })).status, 200);
    await decisionCard.waitFor({ state: 'detached' });
  } finally {
    await context.close();
  }
});

test('a viewer sees the inbox but no answer button, and the API refuses their answer with 403', async () => {
  const { context, page } = await memberOnInbox('viewer');
  try {
    const asked = await ask({ question: 'Delete the staging data?', wait: false });
    assert.equal(asked.status, 200);
    const card = page.getByRole('article', { name: 'Delete the staging data?' });
    await card.waitFor();
    assert.match(await card.innerText(), /Your role cannot answer questions\./);
    assert.equal(await card.getByRole('button').count(), 0);
    const refused = await page.evaluate(
      async ({ url }) => {
        const me = (await (await fetch('/api/v1/server/me')).json()) as { csrfToken: string };
        const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': me.csrfToken }, body: JSON.stringify({ answer: 'yes' }) });
        return { status: response.status, body: (await response.json()) as { code: string } };
      },
      { url: `${SERVER_API}/ask/${String(asked.body.correlationId)}` },
    );
    assert.deepEqual([refused.status, refused.body.code], [403, 'forbidden']);
    const still = await call<Record<string, unknown>>(harness.origin, `${SERVER_API}/ask/${String(asked.body.correlationId)}`, { key: workspace.apiKey });
    assert.equal(still.body.status, 'pending');
    assert.deepEqual(await seriousViolations(page), []);
  } finally {
    await context.close();
  }
});
