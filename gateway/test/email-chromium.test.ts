import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { call, createWorkspace, freePort, SERVER_API, startMailpit, startStack, type Mailpit, type Stack } from '@herald/testkit';
import { chromium, type Browser } from 'playwright-core';

// An email answer link in a real browser: Debian's Chromium shows the question's message as
// Mailpit renders its HTML, follows its Approve link to the confirmation page and presses Confirm. The
// form's post carries what a browser really sends (Origin, Sec-Fetch-Site), and the decision is
// answered as the address. The screenshots are the docs' (EMAIL_SCREENSHOTS=docs/images).

const CHROMIUM = process.env.HERALD_CHROMIUM || '/usr/bin/chromium';

let mailpit: Mailpit;
let stack: Stack;
let gatewayUrl: string;
let browser: Browser;

before(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is not installed: run deploy/tools.sh (it installs Debian's chromium), or set HERALD_CHROMIUM.`);
  mailpit = await startMailpit();
  const port = await freePort();
  // The links the message carries are the gateway's own origin, so the browser can follow them.
  stack = await startStack({ gateways: 0, decisions: true, env: { PUBLIC_ORIGIN: `http://localhost:${port}`, SMTP_URL: mailpit.smtpUrl, MAIL_FROM: 'Herald <no-reply@herald.test>' } });
  gatewayUrl = await stack.addGateway({}, port);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
});
after(async () => {
  await browser?.close();
  await stack?.stop();
  await mailpit?.stop();
});

/** Where the screenshots go: EMAIL_SCREENSHOTS (docs/images, for the docs) or gateway/artifacts (git-ignored). */
async function screenshotPath(name: string): Promise<string> {
  const dir = process.env.EMAIL_SCREENSHOTS ?? fileURLToPath(new URL('../../artifacts/', import.meta.url));
  await mkdir(dir, { recursive: true });
  return join(dir, name);
}

test('Chromium: the message in Mailpit, its Approve link, the confirmation page and its Confirm button answer the decision as the address', async () => {
  const { apiKey } = await createWorkspace();
  const to = `release-manager-${process.pid}@example.com`;
  const opened = await call<{ decisionId: string }>(gatewayUrl, `${SERVER_API}/decisions`, {
    method: 'POST',
    key: apiKey,
    body: {
      question: 'Deploy 4.2 to production?',
      context: 'All checks passed on staging. 3 migrations, no downtime expected.',
      agentName: 'release-bot',
      toolName: 'deploy',
      toolTarget: 'prod-eu-west',
      parameters: { version: '4.2.0', strategy: 'rolling', canary: true },
      approvers: [{ kind: 'email', id: to }],
    },
  });
  assert.equal(opened.status, 200, JSON.stringify(opened.body));
  const message = await mailpit.waitForMessage(to);

  const page = await browser.newPage({ viewport: { width: 760, height: 600 } });
  // The message's HTML part as Mailpit serves it (the Mailpit deploy/tools.sh builds has no web UI).
  await page.goto(`${mailpit.apiUrl}/view/${message.id}.html`);
  await page.getByRole('link', { name: 'Approve' }).waitFor({ timeout: 15_000 });
  await page.screenshot({ path: await screenshotPath('email-message.png'), fullPage: true });
  const approve = (await page.getByRole('link', { name: 'Approve' }).getAttribute('href')) ?? '';
  assert.ok(approve.startsWith(`${gatewayUrl.replace('127.0.0.1', 'localhost')}/e/`), approve);

  const confirm = await browser.newPage({ viewport: { width: 420, height: 760 } });
  await confirm.goto(approve);
  await confirm.getByRole('button', { name: 'Confirm: Approve' }).waitFor();
  await confirm.screenshot({ path: await screenshotPath('email-confirm-page.png'), fullPage: true });
  await confirm.getByRole('button', { name: 'Confirm: Approve' }).click();
  await confirm.getByText('Your answer was recorded: Approve.').waitFor({ timeout: 15_000 });

  const record = await call<{ status: string; answer: string; answeredBy: { kind: string; id: string; channel: string } | null }>(gatewayUrl, `${SERVER_API}/decisions/${opened.body.decisionId}`, { key: apiKey });
  assert.deepEqual([record.body.status, record.body.answer, record.body.answeredBy?.kind, record.body.answeredBy?.id, record.body.answeredBy?.channel], ['answered', 'yes', 'email', to, 'email']);
});
