import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, test } from 'node:test';

import { admin, call, createDatabase, createWorkspace, freePort, SERVER_API, startMailpit, startStack, type Mailpit, type Stack, type TestDatabase } from '@herald/testkit';
import { chromium, type Browser, type Page } from 'playwright-core';

import { memberSessions, newAddress, type Me } from './member-sessions.js';

// A passkey in a real browser: Debian's Chromium with the DevTools protocol's virtual
// authenticator (CTAP2, internal transport, resident keys, user verification) on the /passkeys page.
// A member invited by email (the link read from Mailpit) registers a passkey, signs out, signs in
// with it, and GET /me shows them.

const CHROMIUM = process.env.HERALD_CHROMIUM || '/usr/bin/chromium';
const testDatabaseUrl = process.env.DATABASE_URL;

let mailpit: Mailpit;
let database: TestDatabase;
let stack: Stack;
let gatewayUrl: string;
/** The browser's origin and the gateway's PUBLIC_ORIGIN: the relying party (localhost is a secure context). */
let origin: string;
let browser: Browser;

before(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is not installed: run deploy/tools.sh (it installs Debian's chromium), or set HERALD_CHROMIUM.`);
  mailpit = await startMailpit();
  database = await createDatabase();
  process.env.DATABASE_URL = database.url;
  const port = await freePort();
  origin = `http://localhost:${port}`;
  stack = await startStack({ gateways: 0, env: { PUBLIC_ORIGIN: origin, SMTP_URL: mailpit.smtpUrl, MAIL_FROM: 'Herald Test <no-reply@herald.test>' } });
  gatewayUrl = await stack.addGateway({}, port);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
});
after(async () => {
  await browser?.close();
  await stack?.stop();
  await mailpit?.stop();
  process.env.DATABASE_URL = testDatabaseUrl;
  await database?.drop();
});

/** What the page's status line says once it says `text`. */
async function statusSays(page: Page, text: string): Promise<void> {
  await page
    .locator('#status', { hasText: text })
    .waitFor({ timeout: 15_000 })
    .catch(async (err: unknown) => {
      throw new Error(`the page says "${await page.locator('#status').textContent()}", not "${text}"`, { cause: err });
    });
  assert.equal(await page.locator('#status').getAttribute('class'), '', `not an error: ${await page.locator('#status').textContent()}`);
}

test('invited by email, a member registers a passkey in Chromium, signs out, signs in with it, and GET /me shows them', async () => {
  const helpers = memberSessions(() => gatewayUrl, () => mailpit, origin);
  const workspace = await createWorkspace();
  const owner = await admin<{ signInUrl: string }>('member', 'invite', '--workspace', workspace.workspaceId, '--email', newAddress('owner'), '--role', 'owner');
  const ownerSession = await helpers.signInWith(owner.signInUrl);
  const email = newAddress('marketer');
  const invited = await helpers.withSession(ownerSession, `${SERVER_API}/members`, { method: 'POST', body: { email, role: 'marketer', displayName: 'Mara Marketer' } });
  assert.equal(invited.status, 201, JSON.stringify(invited.body));
  const memberId = invited.body.id as string;
  const link = await helpers.linkFromMail(email, 0);

  const context = await browser.newContext();
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (message) => {
    // Signed out, the page's GET /me is a 401, which Chromium logs; anything else (a CSP violation) is a problem.
    if (message.type() === 'error' && !message.text().includes('status of 401')) problems.push(`console: ${message.text()}`);
  });
  const refused: string[] = [];
  page.on('response', (response) => {
    if (response.status() >= 400) refused.push(`${response.request().method()} ${new URL(response.url()).pathname} ${response.status()}`);
  });
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });

  // The invite's link: its page, then its button.
  await page.goto(link);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'You are signed in' }).waitFor();
  const linkSession = (await context.cookies(origin)).find((cookie) => cookie.name === 'herald_session');
  assert.ok(linkSession);
  assert.deepEqual([linkSession.httpOnly, linkSession.sameSite, linkSession.secure], [true, 'Lax', false]);

  const served = await page.goto(`${origin}/passkeys`);
  assert.equal(served?.status(), 200);
  assert.equal(
    served?.headers()['content-security-policy'],
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
  );
  assert.equal(served?.headers()['referrer-policy'], 'same-origin');
  await page.locator('body[data-ready="true"]').waitFor();
  assert.equal(await page.locator('#who').textContent(), email);
  assert.equal(await page.locator('#none').isVisible(), true);

  await page.getByLabel('Name of a new passkey').fill('Chromium');
  await page.getByRole('button', { name: 'Add a passkey' }).click();
  await statusSays(page, 'Added Chromium.');
  await page.getByRole('button', { name: 'Delete Chromium' }).waitFor();
  const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
  assert.equal(credentials.length, 1);
  assert.equal(credentials[0]?.isResidentCredential, true, 'a discoverable credential');
  assert.equal(credentials[0]?.rpId, 'localhost');
  assert.equal(Buffer.from(credentials[0]?.userHandle ?? '', 'base64').toString(), memberId);

  await page.getByRole('button', { name: 'Sign out' }).click();
  await statusSays(page, 'Signed out.');
  assert.equal(await page.getByRole('button', { name: 'Sign in with a passkey' }).isVisible(), true);
  assert.equal((await context.cookies(origin)).find((cookie) => cookie.name === 'herald_session'), undefined);
  assert.equal((await call(gatewayUrl, `${SERVER_API}/me`, { headers: { cookie: `herald_session=${linkSession.value}` } })).status, 401, 'the link session ended');

  const signInPost = page.waitForRequest((request) => request.method() === 'POST' && request.url().endsWith(`${SERVER_API}/sign-in/passkey`));
  await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
  assert.equal(await (await signInPost).headerValue('origin'), origin, 'the page says where it comes from');
  await statusSays(page, `Signed in as ${email}.`);
  const passkeySession = (await context.cookies(origin)).find((cookie) => cookie.name === 'herald_session');
  assert.ok(passkeySession);
  assert.notEqual(passkeySession.value, linkSession.value, 'a new session id');
  assert.deepEqual([passkeySession.httpOnly, passkeySession.sameSite, passkeySession.secure], [true, 'Lax', false]);

  // GET /me, from the page (its cookie) and from outside with the same cookie.
  const fromPage = (await page.evaluate(async (path) => (await fetch(path)).json(), `${SERVER_API}/me`)) as Me;
  assert.equal(fromPage.member.id, memberId);
  assert.equal(fromPage.member.email, email);
  assert.equal(fromPage.role, 'marketer');
  assert.equal(fromPage.workspace.id, workspace.workspaceId);
  const me = await call<Me>(gatewayUrl, `${SERVER_API}/me`, { headers: { cookie: `herald_session=${passkeySession.value}` } });
  assert.equal(me.status, 200);
  assert.equal(me.body.member.id, memberId);

  const listed = await call<{ passkeys: Array<{ name: string; transports: string[]; lastUsedAt: string | null }> }>(gatewayUrl, `${SERVER_API}/me/passkeys`, {
    headers: { cookie: `herald_session=${passkeySession.value}` },
  });
  assert.equal(listed.body.passkeys.length, 1);
  assert.equal(listed.body.passkeys[0]?.name, 'Chromium');
  assert.deepEqual(listed.body.passkeys[0]?.transports, ['internal']);
  assert.ok(listed.body.passkeys[0]?.lastUsedAt, 'used to sign in');

  // Deleted from the page, it is gone from the server (the authenticator keeps its copy).
  await page.getByRole('button', { name: 'Delete Chromium' }).click();
  await statusSays(page, 'Deleted Chromium.');
  assert.equal(await page.locator('#none').isVisible(), true);
  assert.deepEqual(problems, []);
  assert.deepEqual(refused, [`GET ${SERVER_API}/me 401`], 'only the signed-out page asking who is there');
  await context.close();
});
