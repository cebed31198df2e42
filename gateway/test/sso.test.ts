import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';

import { admin, call, connectDatabase, createDatabase, createWorkspace, errorBody, SERVER_API, startStack, type Stack, type TestDatabase, type TestWorkspace } from '@herald/testkit';
import type pg from 'pg';

import { startOidcProvider, type OidcPeer } from './oidc-provider.js';

// OpenID Connect single sign-on per workspace, against a real OpenID provider (oidc-provider) on
// loopback: configuration through the API, then sign-ins driven over HTTP as a browser would.

const ORIGIN = 'http://localhost:8080'; // the stack's PUBLIC_ORIGIN
const REDIRECT_URI = `${ORIGIN}/sign-in/sso/callback`;
const CLIENT = { clientId: 'herald', clientSecret: 'sso-test-client-secret-0123456789' };
const OTHER_CLIENT = { clientId: 'other-app', clientSecret: 'other-app-secret-0123456789' };
const testDatabaseUrl = process.env.DATABASE_URL;

let stack: Stack;
let database: TestDatabase;
let db: pg.Client;
let idp: OidcPeer;
before(async () => {
  idp = await startOidcProvider({ redirectUri: REDIRECT_URI, clients: [CLIENT, OTHER_CLIENT] });
  // A database of its own: the services' schemas exactly as this checkout migrates them.
  database = await createDatabase();
  process.env.DATABASE_URL = database.url;
  stack = await startStack({ env: { SSO_ALLOW_LOOPBACK_HTTP: 'true' }, gatewayEnv: { SIGN_IN_IP_RATE_LIMIT_PER_MINUTE: '1000' } });
  db = await connectDatabase();
});
after(async () => {
  await db.end();
  await stack.stop();
  await idp.stop();
  process.env.DATABASE_URL = testDatabaseUrl;
  await database.drop();
});

let counter = 0;
/** A person at the provider (login -> email), returned with their login. */
function person(domain: string, { emailVerified = true } = {}): { login: string; email: string } {
  counter += 1;
  const login = `user-${process.pid}-${counter}`;
  const email = `${login}@${domain}`;
  idp.users.set(login, { email, emailVerified, name: `Person ${counter}` });
  return { login, email };
}

const configure = (workspace: TestWorkspace, body: Record<string, unknown>) => call(stack.gatewayUrl, `${SERVER_API}/sso`, { method: 'PUT', key: workspace.apiKey, body });

async function workspaceWithSso(settings: Record<string, unknown> = {}): Promise<TestWorkspace> {
  const workspace = await createWorkspace();
  const response = await configure(workspace, { issuer: idp.issuer, ...CLIENT, ...settings });
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return workspace;
}

async function member(workspace: TestWorkspace, email: string, role = 'marketer'): Promise<string> {
  return (await admin<{ memberId: string }>('member', 'invite', '--workspace', workspace.workspaceId, '--email', email, '--role', role)).memberId;
}

interface Started {
  authorizationUrl: URL;
  state: string;
}

/** Presses "sign in with SSO": the gateway answers the provider's URL and the pre-sign-in cookie. */
async function start(workspaceId: string): Promise<Started> {
  const response = await fetch(`${stack.gatewayUrl}/sign-in/sso/${workspaceId}`, { redirect: 'manual' });
  assert.equal(response.status, 302, await response.clone().text());
  assert.equal(response.headers.get('cache-control'), 'no-store');
  const cookie = response.headers.get('set-cookie') ?? '';
  const match = /^herald_sso=([A-Za-z0-9_-]{43}); Path=\/sign-in\/sso; HttpOnly; SameSite=Lax; Expires=([^;]+)$/.exec(cookie);
  assert.ok(match, cookie);
  const lifetime = new Date(match[2]!).getTime() - Date.now();
  assert.ok(lifetime > 590_000 && lifetime <= 600_000, `the cookie lives ${lifetime} ms`);
  return { authorizationUrl: new URL(response.headers.get('location') ?? ''), state: match[1]! };
}

/** The browser lands back on the gateway with the provider's answer and (unless `cookie` is null) its cookie. */
function land(callback: URL, cookie: string | null): Promise<Response> {
  return fetch(`${stack.gatewayUrl}/sign-in/sso/callback${callback.search}`, { redirect: 'manual', headers: cookie === null ? {} : { cookie: `herald_sso=${cookie}` } });
}

/** The whole journey for `login`, with a hook to change the provider's URL on the way there. */
async function signIn(workspaceId: string, login: string, alter: (url: URL) => void = () => undefined): Promise<{ response: Response; started: Started; callback: URL }> {
  const started = await start(workspaceId);
  alter(started.authorizationUrl);
  const callback = await idp.signIn(started.authorizationUrl.href, login);
  return { response: await land(callback, started.state), started, callback };
}

function sessionCookieOf(response: Response): string | undefined {
  return response.headers.getSetCookie().map((line) => /^herald_session=([A-Za-z0-9_-]{43}); /.exec(line)?.[1]).find((id) => id !== undefined);
}

/** A refused sign-in: the error in the spec's shape, the pre-sign-in cookie cleared, no session anywhere. */
async function assertRefused(response: Response, workspace: TestWorkspace, expected: Record<string, unknown>): Promise<void> {
  assert.equal(response.status, expected.status);
  assert.deepEqual(await response.json(), expected);
  assert.deepEqual(response.headers.getSetCookie(), ['herald_sso=; Path=/sign-in/sso; HttpOnly; SameSite=Lax; Max-Age=0']);
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM account.member_sessions ses JOIN account.members m ON m.id = ses.member_id WHERE m.workspace_id = $1',
    [workspace.workspaceId],
  );
  assert.equal(rows[0]!.n, 0);
}

const ssoFailed = (message: string) =>
  errorBody('unauthorized', 401, 'Single sign-on failed', `Single sign-on failed: ${message}`, 'Start the sign-in again; if it keeps failing, ask an owner or admin to check the SSO configuration.');
const notCompleted = (message: string) => errorBody('invalid_request', 400, 'Single sign-on not completed', message, 'Start the sign-in again from the same browser.');
const notMember = (email: string) => errorBody('forbidden', 403, 'Not a member', `${email} is not a member of this workspace.`, 'Ask an owner or admin to invite you.');

test('an owner configures SSO: created then replaced, the secret never shown, removed, and another workspace sees none', async () => {
  const workspace = await createWorkspace();
  const other = await createWorkspace();
  const none = errorBody('not_found', 404, 'No single sign-on', 'This workspace has no single sign-on configured.', 'Sign in with an email link, or ask an owner or admin to configure single sign-on.');
  const get = (owner: TestWorkspace) => call(stack.gatewayUrl, `${SERVER_API}/sso`, { key: owner.apiKey });
  assert.deepEqual((await get(workspace)).body, none);

  const created = await configure(workspace, { issuer: idp.issuer, ...CLIENT, allowedDomains: ['Corp.Test'] });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const record = created.body as Record<string, string>;
  assert.deepEqual(created.body, {
    issuer: idp.issuer,
    clientId: CLIENT.clientId,
    allowedDomains: ['corp.test'],
    autoProvisionRole: null,
    redirectUri: REDIRECT_URI,
    signInUrl: `${ORIGIN}/sign-in/sso/${workspace.workspaceId}`,
    createdAt: record.createdAt,
    updatedAt: record.createdAt,
  });
  assert.ok(!JSON.stringify(created.body).includes(CLIENT.clientSecret));
  assert.deepEqual((await get(workspace)).body, created.body);
  // Another workspace's key sees its own workspace, which has none.
  assert.deepEqual((await get(other)).body, none);

  // Replaced without the secret: the stored one is kept (the sign-in below uses it).
  const replaced = await configure(workspace, { issuer: idp.issuer, clientId: CLIENT.clientId, allowedDomains: ['corp.test', 'example.test'], autoProvisionRole: 'approver' });
  assert.equal(replaced.status, 200, JSON.stringify(replaced.body));
  const updated = replaced.body as Record<string, unknown>;
  assert.deepEqual(updated, { ...created.body, allowedDomains: ['corp.test', 'example.test'], autoProvisionRole: 'approver', updatedAt: updated.updatedAt });
  assert.ok(String(updated.updatedAt) > record.createdAt!);
  const { login, email } = person('example.test');
  const { response } = await signIn(workspace.workspaceId, login);
  assert.equal(response.status, 200, await response.clone().text());
  const { rows } = await db.query('SELECT role, status FROM account.members WHERE workspace_id = $1 AND email = $2', [workspace.workspaceId, email]);
  assert.deepEqual(rows, [{ role: 'approver', status: 'active' }]);

  // The secret is stored for the token request and appears in no log line.
  assert.ok(!stack.services.some((service) => service.output().includes(CLIENT.clientSecret)));
  assert.ok(!stack.gateways.some((gateway) => gateway.output().includes(CLIENT.clientSecret)));

  const removed = await call(stack.gatewayUrl, `${SERVER_API}/sso`, { method: 'DELETE', key: workspace.apiKey });
  assert.equal(removed.status, 204);
  assert.deepEqual((await get(workspace)).body, none);
  assert.deepEqual((await call(stack.gatewayUrl, `${SERVER_API}/sso`, { method: 'DELETE', key: workspace.apiKey })).body, none);
  const startAfter = await fetch(`${stack.gatewayUrl}/sign-in/sso/${workspace.workspaceId}`, { redirect: 'manual' });
  assert.equal(startAfter.status, 404);
  assert.deepEqual(await startAfter.json(), none);
  assert.equal(startAfter.headers.get('set-cookie'), null);
});

test('a configuration the service cannot use is refused, field by field', async () => {
  const workspace = await createWorkspace();
  const invalid = (field: string, problem: string) =>
    errorBody('invalid_request', 400, 'Invalid request', `Invalid request body: ${field} ${problem}.`, 'Fix the request as the message says and send it again.', { fields: [{ field, in: 'body', problem }] });
  const cases: Array<[Record<string, unknown>, Record<string, unknown>]> = [
    [{ issuer: 'http://idp.example.com', ...CLIENT }, invalid('issuer', 'must be an https URL')],
    [{ issuer: idp.issuer, clientId: CLIENT.clientId }, invalid('clientSecret', 'is required when single sign-on is first configured')],
    [
      { issuer: idp.issuer, ...CLIENT, autoProvisionRole: 'viewer' },
      invalid('allowedDomains', 'must name at least one domain when members are provisioned (otherwise anyone with an account at the provider could join)'),
    ],
  ];
  for (const [body, expected] of cases) {
    const response = await configure(workspace, body);
    assert.deepEqual(response.body, expected, JSON.stringify(body));
  }
  // Nothing answers OpenID metadata there: nothing listening, or a server that never answers (the
  // account service gives up before the gateway's deadline, so it is a 400 and not a 503).
  const refused = await configure(workspace, { issuer: 'http://127.0.0.1:1', ...CLIENT });
  assert.equal(refused.status, 400);
  assert.match(String((refused.body as { message: string }).message), /^Invalid request body: issuer did not answer with its OpenID Connect metadata \(.+\)\.$/);
  const mute = createServer(() => undefined);
  await new Promise<void>((resolve) => mute.listen(0, '127.0.0.1', resolve));
  try {
    const silent = await configure(workspace, { issuer: `http://127.0.0.1:${(mute.address() as AddressInfo).port}`, ...CLIENT });
    assert.deepEqual(silent.body, invalid('issuer', 'did not answer with its OpenID Connect metadata (operation timed out)'));
  } finally {
    mute.closeAllConnections();
    mute.close();
  }
  // Owners are never provisioned; unknown fields are refused at the edge.
  for (const body of [{ issuer: idp.issuer, ...CLIENT, allowedDomains: ['corp.test'], autoProvisionRole: 'owner' }, { issuer: idp.issuer, ...CLIENT, scope: 'openid' }]) {
    const response = await configure(workspace, body);
    assert.equal(response.status, 400, JSON.stringify(body));
    assert.equal((response.body as { code: string }).code, 'invalid_request');
  }
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/sso`, { key: workspace.apiKey })).status, 404);
});

test('a member signs in through the provider (code flow, PKCE, state, nonce) and GET /me shows them; the answer works once', async () => {
  const workspace = await workspaceWithSso();
  const { login, email } = person('corp.test');
  const memberId = await member(workspace, email, 'marketer');

  const started = await start(workspace.workspaceId);
  const query = Object.fromEntries(started.authorizationUrl.searchParams);
  assert.equal(`${started.authorizationUrl.origin}${started.authorizationUrl.pathname}`, `${idp.issuer}/auth`);
  assert.deepEqual(Object.keys(query).sort(), ['client_id', 'code_challenge', 'code_challenge_method', 'nonce', 'redirect_uri', 'response_type', 'scope', 'state']);
  assert.deepEqual({ ...query, code_challenge: '', nonce: '' }, {
    client_id: CLIENT.clientId,
    code_challenge: '',
    code_challenge_method: 'S256',
    nonce: '',
    redirect_uri: REDIRECT_URI,
    response_type: 'code',
    scope: 'openid email profile',
    state: started.state,
  });
  assert.match(query.code_challenge!, /^[A-Za-z0-9_-]{43}$/);
  assert.match(query.nonce!, /^[A-Za-z0-9_-]{43}$/);

  const callback = await idp.signIn(started.authorizationUrl.href, login);
  assert.equal(callback.searchParams.get('iss'), idp.issuer);
  const response = await land(callback, started.state);
  assert.equal(response.status, 200, await response.clone().text());
  assert.match(await response.text(), /<h1>You are signed in<\/h1>\s*<p>Signed in as [^<]+\.<\/p>\s*<p><a href="\/console\/">Open the Herald Console<\/a><\/p>/);
  const cookies = response.headers.getSetCookie();
  assert.equal(cookies.length, 2);
  assert.equal(cookies[0], 'herald_sso=; Path=/sign-in/sso; HttpOnly; SameSite=Lax; Max-Age=0');
  assert.match(cookies[1]!, /^herald_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Expires=[^;]+$/);
  const session = sessionCookieOf(response)!;

  const me = await call(stack.gatewayUrl, `${SERVER_API}/me`, { headers: { cookie: `herald_session=${session}` } });
  assert.equal(me.status, 200, JSON.stringify(me.body));
  const body = me.body as { member: Record<string, unknown>; workspace: unknown; role: string };
  assert.deepEqual(body.member, { id: memberId, email, displayName: '', role: 'marketer', status: 'active', createdAt: body.member.createdAt, lastSignInAt: body.member.lastSignInAt });
  assert.ok(typeof body.member.lastSignInAt === 'string');
  assert.equal(body.role, 'marketer');
  assert.deepEqual((body.workspace as { id: string }).id, workspace.workspaceId);

  // The same answer again (a replay, the cookie still in hand): the attempt is used up.
  await assertSessionsUnchanged(workspace, 1, async () => {
    const again = await land(callback, started.state);
    assert.equal(again.status, 400);
    assert.deepEqual(await again.json(), notCompleted('This sign-in is unknown, was completed already or has expired.'));
    assert.equal(sessionCookieOf(again), undefined);
  });
});

async function assertSessionsUnchanged(workspace: TestWorkspace, expected: number, act: () => Promise<void>): Promise<void> {
  await act();
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM account.member_sessions ses JOIN account.members m ON m.id = ses.member_id WHERE m.workspace_id = $1',
    [workspace.workspaceId],
  );
  assert.equal(rows[0]!.n, expected);
}

test('an answer whose state is not the one this browser started, or with no pre-sign-in cookie, signs nobody in', async () => {
  const workspace = await workspaceWithSso();
  const { login, email } = person('corp.test');
  await member(workspace, email);

  // The provider's answer with another state than the cookie's (a forged or swapped answer).
  const started = await start(workspace.workspaceId);
  const callback = await idp.signIn(started.authorizationUrl.href, login);
  const forged = new URL(callback);
  forged.searchParams.set('state', 'x'.repeat(43));
  await assertRefused(await land(forged, started.state), workspace, notCompleted('The sign-in answer does not belong to the sign-in this browser started.'));
  // Without the cookie (another browser, e.g. a victim sent the attacker's answer): refused too.
  await assertRefused(await land(callback, null), workspace, notCompleted('The sign-in answer does not belong to the sign-in this browser started.'));
  // A cookie of a sign-in that was never started.
  const unknown = new URL(callback);
  unknown.searchParams.set('state', 'y'.repeat(43));
  await assertRefused(await land(unknown, 'y'.repeat(43)), workspace, notCompleted('This sign-in is unknown, was completed already or has expired.'));
});

test('an ID token with the wrong nonce, for another client (audience) or from another issuer, or an answer naming another issuer, signs nobody in', async () => {
  const workspace = await workspaceWithSso();
  const { login, email } = person('corp.test');
  await member(workspace, email);

  // The nonce the provider binds into the ID token is not the one this sign-in keeps.
  const wrongNonce = await signIn(workspace.workspaceId, login, (url) => url.searchParams.set('nonce', 'n'.repeat(43)));
  await assertRefused(wrongNonce.response, workspace, ssoFailed('unexpected ID Token "nonce" claim value.'));

  // The provider answers an ID token issued to another client, or by another issuer.
  const tampered: Array<[Record<string, unknown>, string]> = [
    [{ aud: OTHER_CLIENT.clientId }, 'unexpected JWT "aud" (audience) claim value.'],
    [{ iss: 'https://idp.attacker.example' }, 'unexpected JWT "iss" (issuer) claim value.'],
  ];
  for (const [claims, message] of tampered) {
    idp.tamper.claims = claims;
    try {
      await assertRefused((await signIn(workspace.workspaceId, login)).response, workspace, ssoFailed(message));
    } finally {
      delete idp.tamper.claims;
    }
  }

  // The answer says another issuer sent it (a mix-up): refused before the code is redeemed.
  const mixedUp = await start(workspace.workspaceId);
  const callback = await idp.signIn(mixedUp.authorizationUrl.href, login);
  callback.searchParams.set('iss', 'https://idp.attacker.example');
  await assertRefused(await land(callback, mixedUp.state), workspace, ssoFailed('unexpected "iss" (issuer) response parameter value.'));
});

test('an address that is not a member, an unverified one, or one of a domain not allowed signs nobody in', async () => {
  const workspace = await workspaceWithSso({ allowedDomains: ['corp.test'] });
  const stranger = person('corp.test');
  await assertRefused((await signIn(workspace.workspaceId, stranger.login)).response, workspace, notMember(stranger.email));

  const unverified = person('corp.test', { emailVerified: false });
  await member(workspace, unverified.email);
  await assertRefused(
    (await signIn(workspace.workspaceId, unverified.login)).response,
    workspace,
    errorBody('forbidden', 403, 'Email not verified', `The identity provider has not verified ${unverified.email}.`, 'Verify the address with your identity provider, then sign in again.'),
  );

  const outsider = person('elsewhere.test');
  await member(workspace, outsider.email);
  await assertRefused(
    (await signIn(workspace.workspaceId, outsider.login)).response,
    workspace,
    errorBody('forbidden', 403, 'Domain not allowed', 'Addresses at elsewhere.test may not sign in to this workspace by single sign-on.', 'Sign in with an address of an allowed domain, or ask an owner or admin for an invite.'),
  );

  // A removed member is refused like a stranger who was never provisioned.
  const removed = person('corp.test');
  const removedId = await member(workspace, removed.email);
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/members/${removedId}`, { method: 'DELETE', key: workspace.apiKey })).status, 200);
  await assertRefused(
    (await signIn(workspace.workspaceId, removed.login)).response,
    workspace,
    errorBody('forbidden', 403, 'Not a member', `${removed.email} is no longer a member of this workspace.`, 'Ask an owner or admin to invite you.'),
  );
});

test("another workspace's SSO does not sign in a member of this one, nor provision them there", async () => {
  const home = await workspaceWithSso();
  const other = await workspaceWithSso();
  const { login, email } = person('corp.test');
  await member(home, email);
  await assertRefused((await signIn(other.workspaceId, login)).response, other, notMember(email));
  const { rows } = await db.query('SELECT workspace_id FROM account.members WHERE email = $1', [email]);
  assert.deepEqual(rows, [{ workspace_id: home.workspaceId }]);
  // An unknown workspace answers as one without SSO.
  const unknown = await fetch(`${stack.gatewayUrl}/sign-in/sso/ws_doesnotexist`, { redirect: 'manual' });
  assert.equal(unknown.status, 404);
});

test('with provisioning on, an unknown address of an allowed domain joins with the configured role, once, and that role is enforced', async () => {
  const workspace = await workspaceWithSso({ allowedDomains: ['corp.test'], autoProvisionRole: 'viewer' });
  const { login, email } = person('corp.test');
  const first = await signIn(workspace.workspaceId, login);
  assert.equal(first.response.status, 200, await first.response.clone().text());
  const second = await signIn(workspace.workspaceId, login);
  assert.equal(second.response.status, 200);
  const { rows } = await db.query('SELECT role, status, display_name FROM account.members WHERE workspace_id = $1 AND email = $2', [workspace.workspaceId, email]);
  assert.equal(rows.length, 1);
  assert.deepEqual(rows[0], { role: 'viewer', status: 'active', display_name: rows[0].display_name });
  assert.match(rows[0].display_name, /^Person \d+$/);

  // The viewer's session: reads itself, may not touch the SSO configuration.
  const session = sessionCookieOf(second.response)!;
  const me = await call(stack.gatewayUrl, `${SERVER_API}/me`, { headers: { cookie: `herald_session=${session}` } });
  assert.equal((me.body as { role: string }).role, 'viewer');
  const csrf = (me.body as { csrfToken: string }).csrfToken;
  const refused = await call(stack.gatewayUrl, `${SERVER_API}/sso`, {
    method: 'PUT',
    headers: { cookie: `herald_session=${session}`, 'x-csrf-token': csrf, origin: ORIGIN },
    body: { issuer: idp.issuer, ...CLIENT },
  });
  assert.equal(refused.status, 403);
  assert.equal((refused.body as { code: string }).code, 'forbidden');
  const read = await call(stack.gatewayUrl, `${SERVER_API}/sso`, { headers: { cookie: `herald_session=${session}` } });
  assert.equal(read.status, 403);
});

test('the provider refusing (access denied, a wrong client secret) signs nobody in; an expired attempt neither', async () => {
  const workspace = await workspaceWithSso();
  const { login, email } = person('corp.test');
  await member(workspace, email);

  // The person declines at the provider: it sends the browser back with error=access_denied.
  const declined = await start(workspace.workspaceId);
  const denial = new URL(REDIRECT_URI);
  denial.search = new URLSearchParams({ error: 'access_denied', state: declined.state, iss: idp.issuer }).toString();
  await assertRefused(await land(denial, declined.state), workspace, ssoFailed('the identity provider answered "access_denied".'));

  // An attempt past its 10 minutes.
  const late = await start(workspace.workspaceId);
  const lateCallback = await idp.signIn(late.authorizationUrl.href, login);
  await db.query(`UPDATE account.sso_attempts SET expires_at = now() - interval '1 second' WHERE state_hash = sha256($1::bytea)`, [Buffer.from(late.state)]);
  await assertRefused(await land(lateCallback, late.state), workspace, notCompleted('This sign-in is unknown, was completed already or has expired.'));

  // The stored secret is not the provider's: the token endpoint refuses the client.
  const replaced = await configure(workspace, { issuer: idp.issuer, clientId: CLIENT.clientId, clientSecret: 'not-the-secret' });
  assert.equal(replaced.status, 200);
  await assertRefused((await signIn(workspace.workspaceId, login)).response, workspace, ssoFailed('the identity provider answered "invalid_client".'));

  // An answer too large for the edge.
  const oversized = await fetch(`${stack.gatewayUrl}/sign-in/sso/callback?code=${'c'.repeat(2_049)}`, { headers: { cookie: `herald_sso=${late.state}` } });
  assert.equal(oversized.status, 400);
  assert.equal(((await oversized.json()) as { code: string }).code, 'invalid_request');
});

test('a provider that cannot be reached is 503, when starting and when completing, and signs nobody in', async () => {
  const gone = await startOidcProvider({ redirectUri: REDIRECT_URI, clients: [CLIENT] });
  const workspace = await createWorkspace();
  assert.equal((await configure(workspace, { issuer: gone.issuer, ...CLIENT })).status, 201);
  const { login, email } = person('corp.test');
  gone.users.set(login, idp.users.get(login)!);
  await member(workspace, email);
  const started = await start(workspace.workspaceId);
  const callback = await gone.signIn(started.authorizationUrl.href, login);
  await gone.stop();

  const unavailable = errorBody('unavailable', 503, 'Identity provider unavailable', 'The identity provider could not be reached.', 'Retry later; the service is temporarily unavailable.');
  await assertRefused(await land(callback, started.state), workspace, unavailable);
  const again = await fetch(`${stack.gatewayUrl}/sign-in/sso/${workspace.workspaceId}`, { redirect: 'manual' });
  assert.equal(again.status, 503);
  assert.deepEqual(await again.json(), unavailable);
  assert.equal(again.headers.get('set-cookie'), null);
});

test('starting and completing sign-ins count against the per-IP sign-in limit (429 in the error shape, no cookie)', async () => {
  const workspace = await workspaceWithSso();
  await start(workspace.workspaceId);
  // A gateway allowing 1 per IP per minute: this IP has just started one (shared bucket), so refused.
  const strict = await stack.addGateway({ SIGN_IN_IP_RATE_LIMIT_PER_MINUTE: '1' });
  for (const path of [`/sign-in/sso/${workspace.workspaceId}`, `/sign-in/sso/callback?state=${'s'.repeat(43)}&code=c`]) {
    const response = await fetch(`${strict}${path}`, { redirect: 'manual', headers: { cookie: `herald_sso=${'s'.repeat(43)}` } });
    assert.equal(response.status, 429, path);
    const body = (await response.json()) as { code: string; limit: number };
    assert.equal(body.code, 'rate_limited');
    assert.equal(body.limit, 1);
    assert.ok(Number(response.headers.get('retry-after')) >= 1);
    assert.equal(response.headers.get('set-cookie'), null);
  }
});
