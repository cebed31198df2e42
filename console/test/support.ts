import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

import AxeBuilder from '@axe-core/playwright';
import { admin, createWorkspace, freePort, SERVER_API, startMailpit, startSendingHarness, startStack, type Mailpit, type SendingHarness, type Stack, type TestWorkspace } from '@herald/testkit';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { Page as FirefoxPage } from 'puppeteer-core';

/**
 * The console on a real stack, as the browser tests and the load benchmark use it: a gateway at
 * http://localhost:<port> that is also the stack's PUBLIC_ORIGIN (so sign-in links, cookies and
 * the same-origin check all name the address the browser opens), Mailpit for the sign-in mail,
 * and a Partner workspace with an owner.
 */

export interface ConsoleHarness {
  /** http://localhost:<port>: a secure context, where the session cookie works without Secure. */
  origin: string;
  stack: Stack;
  mailpit: Mailpit;
  workspace: TestWorkspace;
  ownerEmail: string;
  /** With `sending`: the delivery fleet's strict push peer (subscribe browsers, open their pushes). */
  sending?: SendingHarness;
  stop(): Promise<void>;
}

/** The workspace's site: subscribers subscribe from https://<it>. */
export const SITE_DOMAIN = 'shop.example.test';

let addressCounter = 0;
export const newAddress = (who: string): string => `${who}-${process.pid}-${(addressCounter += 1)}@example.test`;

/**
 * `sending`: also the delivery fleet, pushing to a strict push peer (campaigns and flows end to end).
 * `env`: more settings of the stack's services (e.g. the Slack API peer's address for the decision service).
 * `services`: further services of the registry (e.g. policy).
 * `peer`: the push peer's options, with `sending` (e.g. its WebSocket face for Firefox's push service).
 */
export async function startConsoleHarness({
  sending = false,
  env = {},
  services = [],
  peer = {},
}: { sending?: boolean; env?: Record<string, string>; services?: string[]; peer?: Parameters<typeof startSendingHarness>[1] } = {}): Promise<ConsoleHarness> {
  const mailpit = await startMailpit();
  const port = await freePort();
  const origin = `http://localhost:${port}`;
  let stack: Stack | undefined;
  let sendingHarness: SendingHarness | undefined;
  try {
    const options = {
      gateways: 0,
      decisions: true,
      env: { PUBLIC_ORIGIN: origin, SMTP_URL: mailpit.smtpUrl, MAIL_FROM: 'Herald Test <no-reply@herald.test>', ...env },
      services: ['campaign', 'flow', ...services],
    };
    if (sending) {
      sendingHarness = await startSendingHarness(options, peer);
      stack = sendingHarness.stack;
    } else stack = await startStack(options);
    // The tests sign the owner in many times a minute, from one address and one IP; a revoked key
    // is refused within a second (the verified-key cache's lifetime).
    // Subscribers subscribe with made-up push endpoints (nothing is sent to them).
    await stack.addGateway({ SIGN_IN_IP_RATE_LIMIT_PER_MINUTE: '1000', SIGN_IN_ADDRESS_RATE_LIMIT_PER_MINUTE: '1000', KEY_CACHE_TTL_MS: '1000', ALLOW_ANY_PUSH_SERVICE: 'true' }, port);
    const workspace = await createWorkspace('partner', SITE_DOMAIN);
    const ownerEmail = newAddress('owner');
    await admin('member', 'invite', '--workspace', workspace.workspaceId, '--email', ownerEmail, '--role', 'owner', '--name', 'Olive Owner');
    const running = stack;
    return {
      origin,
      stack: running,
      mailpit,
      workspace,
      ownerEmail,
      ...(sendingHarness && { sending: sendingHarness }),
      async stop() {
        await (sendingHarness ?? running).stop();
        await mailpit.stop();
      },
    };
  } catch (err) {
    await (sendingHarness ?? stack)?.stop();
    await mailpit.stop();
    throw err;
  }
}

/** The sign-in link of the `index`th message to `address`, as a person reads it in the mail. */
export async function signInLinkFromMail(harness: ConsoleHarness, address: string, index: number): Promise<string> {
  const message = await harness.mailpit.waitForMessage(address, { since: index });
  const link = new RegExp(`(${harness.origin}/sign-in/[A-Za-z0-9_-]{43})\\s`).exec(message.text)?.[1];
  assert.ok(link, message.text);
  return link;
}

/**
 * Signs `email` in through the console: the sign-in page asks for a link, the mail (from Mailpit)
 * is opened, its page's button pressed, and its "Open the Herald Console" followed to the overview.
 * `mailsBefore`: how many mails that address had already received.
 */
export async function signInThroughConsole(page: Page, harness: ConsoleHarness, email: string, mailsBefore = 0): Promise<void> {
  await page.goto(`${harness.origin}/console/`);
  await page.getByRole('heading', { name: 'Sign in to Herald', level: 1 }).waitFor();
  await page.getByLabel('Email address').fill(email);
  await page.getByRole('button', { name: 'Email me a sign-in link' }).click();
  await page.getByRole('heading', { name: 'Check your mail' }).waitFor();
  await page.goto(await signInLinkFromMail(harness, email, mailsBefore));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'You are signed in' }).waitFor();
  await page.getByRole('link', { name: 'Open the Herald Console' }).click();
  await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
}

/** Where the tests put their screenshots: CONSOLE_SCREENSHOTS (docs/images, for the docs) or console/artifacts (git-ignored). */
export async function screenshotPath(name: string): Promise<string> {
  const dir = process.env.CONSOLE_SCREENSHOTS ?? fileURLToPath(new URL('../../artifacts/', import.meta.url));
  await mkdir(dir, { recursive: true });
  return `${dir.replace(/\/$/, '')}/${name}`;
}

let axeSource: Promise<string> | undefined;

/**
 * The same in Firefox (puppeteer-core over WebDriver BiDi): axe-core's own script is run in the
 * page by the driver (not by the page: the CSP stays strict).
 */
export async function firefoxViolations(page: FirefoxPage): Promise<Array<{ id: string; targets: string[] }>> {
  axeSource ??= readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  await page.evaluate(await axeSource);
  return page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(): Promise<{ violations: Array<{ id: string; impact?: string | null; nodes: Array<{ target: unknown[] }> }> }> } }).axe;
    const { violations } = await axe.run();
    return violations
      .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
      .map((violation) => ({ id: violation.id, targets: violation.nodes.map((node) => node.target.join(' ')) }));
  });
}

/** axe-core's serious and critical findings on the page as it is now. */
export async function seriousViolations(page: Page): Promise<Array<{ id: string; targets: string[] }>> {
  const { violations } = await new AxeBuilder({ page }).analyze();
  return violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => ({ id: violation.id, targets: violation.nodes.map((node) => node.target.join(' ')) }));
}

/** A fresh browser profile (no cookie) with the owner signed in. */
export function ownerPage(browser: Browser, harness: ConsoleHarness): Promise<{ context: BrowserContext; page: Page }> {
  return memberPage(browser, harness, harness.ownerEmail);
}

/** A fresh browser profile (no cookie) with the member of `email` signed in through the console. */
export async function memberPage(browser: Browser, harness: ConsoleHarness, email: string): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  const before = (await harness.mailpit.messagesTo(email)).length;
  await signInThroughConsole(page, harness, email, before);
  return { context, page };
}

/** What the page's own fetch gets from the API (with its cookie and, when given, a CSRF token). */
export function fetchFromPage(page: Page, method: string, path: string, body?: unknown, csrf?: string): Promise<{ status: number; body: unknown }> {
  return page.evaluate(
    async ({ method, url, body, csrf }) => {
      const headers: Record<string, string> = { 'content-type': 'application/json', ...(csrf ? { 'x-csrf-token': csrf } : {}) };
      const response = await fetch(url, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
      return { status: response.status, body: await response.json() };
    },
    { method, url: `${SERVER_API}${path}`, body, csrf },
  );
}

/** The page's session's CSRF token (GET /me). */
export async function csrfOf(page: Page): Promise<string> {
  const me = await fetchFromPage(page, 'GET', '/me');
  assert.equal(me.status, 200);
  return (me.body as { csrfToken: string }).csrfToken;
}

/** The API's 403 to a member whose role may not `verb` (read, change) `scope`. */
export function forbiddenForRole(harness: ConsoleHarness, role: string, verb: 'read' | 'change', scope: string) {
  return {
    error: 'Permission denied',
    code: 'forbidden',
    status: 403,
    message: 'Your role cannot access this endpoint',
    hint: `Members with the role "${role}" cannot ${verb} "${scope}"; ask an owner or admin.`,
    documentation: `${harness.origin}/docs/errors#forbidden`,
  };
}
