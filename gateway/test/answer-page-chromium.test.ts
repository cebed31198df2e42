import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import AxeBuilder from '@axe-core/playwright';
import { call, createKey, createWorkspace, SERVER_API, startStack, type Stack } from '@herald/testkit';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

// The answer page in a real browser (Debian's Chromium): on a 360 px phone it has no horizontal
// scroll and 44 px targets, no choice is focused by default, the safe choice comes first in tab
// order, a person answers by keyboard alone, and axe-core finds nothing serious or critical.
// ANSWER_PAGE_SCREENSHOTS=docs/images writes the docs' screenshots (else gateway/artifacts, ignored).

const CHROMIUM = process.env.HERALD_CHROMIUM || '/usr/bin/chromium';

let stack: Stack;
let browser: Browser;

before(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is not installed: run deploy/tools.sh (it installs Debian's chromium), or set HERALD_CHROMIUM.`);
  stack = await startStack({ decisions: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
});
after(async () => {
  await browser?.close();
  await stack?.stop();
});

async function screenshotPath(name: string): Promise<string> {
  const dir = process.env.ANSWER_PAGE_SCREENSHOTS ?? fileURLToPath(new URL('../../artifacts/', import.meta.url));
  await mkdir(dir, { recursive: true });
  return `${dir.replace(/\/$/, '')}/${name}`;
}

interface Decision {
  decisionId: string;
  decisionPageUrl: string;
  status: string;
  approved: boolean;
  answer: string | null;
}

/** "Deploy release 4.2 to production?", bound to its tool call, opened with a runtime key. */
async function boundDecision(): Promise<{ apiKey: string; decision: Decision; pageUrl: string }> {
  const workspace = await createWorkspace();
  const { apiKey } = await createKey(workspace.workspaceId, 'runtime');
  const opened = await call<Decision>(stack.gatewayUrl, `${SERVER_API}/decisions`, {
    method: 'POST',
    key: apiKey,
    body: {
      question: 'Deploy release 4.2 to production?',
      context: 'CI passed on main (build 1873). The change set touches the payment service.',
      agentName: 'release-bot',
      toolName: 'deploy',
      toolTarget: 'production/eu-west-1',
      parameters: { version: '4.2.0', replicas: 6, strategy: 'rolling', image: `registry.example.test/payments/api@sha256:${'9f2c4e1a'.repeat(8)}` },
      expiresInSeconds: 3_600,
    },
  });
  assert.equal(opened.status, 200, JSON.stringify(opened.body));
  return { apiKey, decision: opened.body, pageUrl: `${stack.gatewayUrl}${new URL(opened.body.decisionPageUrl).pathname}` };
}

/** A page that records anything the browser refuses or reports (a CSP violation is a console error). */
async function watchedPage(context: BrowserContext): Promise<{ page: Page; problems: string[] }> {
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  return { page, problems };
}

/** axe-core's serious and critical findings on the page as it is now. */
async function seriousViolations(page: Page): Promise<Array<{ id: string; targets: string[] }>> {
  const { violations } = await new AxeBuilder({ page }).analyze();
  return violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => ({ id: violation.id, targets: violation.nodes.map((node) => node.target.join(' ')) }));
}

/** The text of the focused element, "(body)" when nothing has the focus (the gateway's lib has no DOM types: the page evaluates strings). */
const focusedText = (page: Page) => page.evaluate<string>(`document.activeElement === document.body ? '(body)' : document.activeElement.textContent`);

test('on a 360 px phone, the answer page fits, its targets are 44 px, nothing is focused by default, and a person answers by keyboard alone', async () => {
  const { apiKey, decision, pageUrl } = await boundDecision();
  const context = await browser.newContext({ viewport: { width: 360, height: 800 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
  const { page, problems } = await watchedPage(context);
  await page.goto(pageUrl);
  await page.getByRole('heading', { name: 'Deploy release 4.2 to production?', level: 1 }).waitFor();

  assert.deepEqual(await page.evaluate<number[]>('[document.documentElement.scrollWidth, window.innerWidth]'), [360, 360], 'no horizontal scroll');
  for (const name of ['No', 'Yes']) {
    const box = await page.getByRole('button', { name, exact: true }).boundingBox();
    assert.ok(box && box.height >= 44 && box.width >= 44, `${name}: ${JSON.stringify(box)}`);
  }
  assert.equal(await page.getByRole('definition').filter({ hasText: 'registry.example.test' }).count(), 1);
  assert.equal(await page.locator('time').first().getAttribute('datetime'), (await call<{ expiresAt: string }>(stack.gatewayUrl, `${SERVER_API}/decisions/${decision.decisionId}`, { key: apiKey })).body.expiresAt);
  assert.deepEqual(await seriousViolations(page), []);
  await page.screenshot({ path: await screenshotPath('answer-page-phone.png'), fullPage: true });

  // Nothing has the focus until the person moves it; the safe choice comes first.
  assert.equal(await focusedText(page), '(body)');
  await page.keyboard.press('Tab');
  assert.equal(await focusedText(page), 'No');
  await page.keyboard.press('Tab');
  assert.equal(await focusedText(page), 'Yes');
  await page.keyboard.press('Enter');
  await page.getByRole('status').filter({ hasText: 'Thank you. Your answer was recorded: Yes.' }).waitFor();
  assert.deepEqual(await seriousViolations(page), []);

  const read = await call<Decision>(stack.gatewayUrl, `${SERVER_API}/decisions/${decision.decisionId}`, { key: apiKey });
  assert.deepEqual([read.body.status, read.body.answer, read.body.approved], ['answered', 'yes', true]);
  assert.deepEqual(problems, []);
  await context.close();
});

test('on a desktop, the answer page shows what a yes does; answered, it says so (screenshots for the docs)', async () => {
  const { pageUrl } = await boundDecision();
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const { page, problems } = await watchedPage(context);
  await page.goto(pageUrl);
  await page.getByRole('heading', { name: 'What a yes does', level: 2 }).waitFor();
  assert.deepEqual(await seriousViolations(page), []);
  await page.screenshot({ path: await screenshotPath('answer-page-desktop.png'), fullPage: true });

  await page.getByRole('button', { name: 'No', exact: true }).click();
  await page.getByRole('status').filter({ hasText: 'Thank you. Your answer was recorded: No.' }).waitFor();
  await page.goto(pageUrl);
  await page.getByRole('status').filter({ hasText: 'This decision was already answered: No.' }).waitFor();
  assert.deepEqual(await seriousViolations(page), []);
  await page.screenshot({ path: await screenshotPath('answer-page-answered.png'), fullPage: true });
  assert.deepEqual(problems, []);
  await context.close();
});
