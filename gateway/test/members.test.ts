import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, test } from 'node:test';

import {
  admin,
  call,
  connectDatabase,
  createDatabase,
  createWorkspace,
  errorBody,
  SERVER_API,
  startMailpit,
  startStack,
  type Mailpit,
  type RequestOptions,
  type Stack,
  type TestDatabase,
  within,
} from '@herald/testkit';
import type pg from 'pg';

import { memberSessions, newAddress, ORIGIN, type Me, type MemberBody, type Session } from './member-sessions.js';

// Members, sign-in by email link (read from a real Mailpit), sessions and roles, through HTTP.

const ADDRESS_LIMIT = 5;
const gatewayEnv = { SIGN_IN_ADDRESS_RATE_LIMIT_PER_MINUTE: String(ADDRESS_LIMIT), SIGN_IN_IP_RATE_LIMIT_PER_MINUTE: '1000' };
const testDatabaseUrl = process.env.DATABASE_URL;

let mailpit: Mailpit;
let stack: Stack;
let database: TestDatabase;
let db: pg.Client;
before(async () => {
  mailpit = await startMailpit();
  // A database of its own: the services' schemas exactly as this checkout migrates them.
  database = await createDatabase();
  process.env.DATABASE_URL = database.url;
  stack = await startStack({
    env: { SMTP_URL: mailpit.smtpUrl, MAIL_FROM: 'Herald Test <no-reply@herald.test>' },
    gatewayEnv,
    decisions: true,
    services: ['campaign'],
  });
  db = await connectDatabase();
});
after(async () => {
  await db.end();
  await stack.stop();
  await mailpit.stop();
  process.env.DATABASE_URL = testDatabaseUrl;
  await database.drop();
});

const tokenOf = (url: string) => new URL(url).pathname.replace('/sign-in/', '');
const sha256 = (text: string) => createHash('sha256').update(text).digest();
const { withSession, linkFromMail, useLink, signInWith, firstOwner } = memberSessions(
  () => stack.gatewayUrl,
  () => mailpit,
);

/** The owner invites `role`; the invitee signs in with the link of the invite mail. */
async function invite(owner: Session, role: string): Promise<{ session: Session; member: MemberBody }> {
  const email = newAddress(role);
  const invited = await withSession(owner, `${SERVER_API}/members`, { method: 'POST', body: { email, role } });
  assert.equal(invited.status, 201, JSON.stringify(invited.body));
  const member = invited.body as unknown as MemberBody;
  return { session: await signInWith(await linkFromMail(email, 0)), member };
}

const forbiddenForRole = (role: string, verb: string, scope: string) =>
  errorBody('forbidden', 403, 'Permission denied', 'Your role cannot access this endpoint', `Members with the role "${role}" cannot ${verb} "${scope}"; ask an owner or admin.`);

test('the admin CLI prints the first owner a single-use link; its page only signs in when posted; /me names the member', async () => {
  const workspace = await createWorkspace('partner');
  const email = newAddress('Owner').toUpperCase();
  const invited = await admin<{ memberId: string; email: string; role: string; signInUrl: string; expiresAt: string }>(
    'member', 'invite', '--workspace', workspace.workspaceId, '--email', ` ${email} `, '--role', 'owner', '--name', 'Olive Owner',
  );
  assert.equal(invited.email, email.toLowerCase());
  assert.equal(invited.role, 'owner');
  assert.match(invited.signInUrl, /^http:\/\/localhost:8080\/sign-in\/[A-Za-z0-9_-]{43}$/);
  assert.ok(Math.abs(Date.parse(invited.expiresAt) - Date.now() - 900_000) < 60_000);

  // A mail scanner's GET (two of them) leaves the link usable.
  await fetch(`${stack.gatewayUrl}${new URL(invited.signInUrl).pathname}`);
  const response = await useLink(invited.signInUrl);
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('cache-control'), 'no-store');
  assert.match(response.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
  const cookie = response.headers.get('set-cookie') ?? '';
  // Plain-HTTP loopback origin: everything but Secure.
  assert.match(cookie, /^herald_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Expires=[^;]+ GMT$/);
  const expires = Date.parse(/Expires=([^;]+)$/.exec(cookie)?.[1] ?? '');
  assert.ok(Math.abs(expires - Date.now() - 7 * 86_400_000) < 60_000, 'the absolute expiry, 7 days');
  const id = /^herald_session=([^;]+)/.exec(cookie)?.[1] ?? '';

  const me = await withSession({ id, csrf: '' }, `${SERVER_API}/me`);
  assert.equal(me.status, 200);
  const body = me.body as unknown as Me;
  assert.match(body.csrfToken, /^[A-Za-z0-9_-]{43}$/);
  assert.ok(body.member.lastSignInAt);
  assert.deepEqual(body, {
    member: { id: invited.memberId, email: email.toLowerCase(), displayName: 'Olive Owner', role: 'owner', status: 'active', createdAt: body.member.createdAt, lastSignInAt: body.member.lastSignInAt },
    workspace: { id: workspace.workspaceId, name: body.workspace.name },
    role: 'owner',
    csrfToken: body.csrfToken,
  });
  assert.match(body.workspace.name, /^Test /);

  // Used: refused, and no cookie.
  const again = await useLink(invited.signInUrl);
  assert.equal(again.status, 404);
  assert.equal(again.headers.get('set-cookie'), null);
  assert.match(await again.text(), /This sign-in link cannot be used/);
  // Only SHA-256 of the session id is stored.
  const { rows } = await db.query('SELECT count(*)::int AS n FROM account.member_sessions WHERE id_hash = $1', [sha256(id)]);
  assert.deepEqual(rows, [{ n: 1 }]);

  // The same address again: ALREADY_EXISTS.
  await assert.rejects(admin('member', 'invite', '--workspace', workspace.workspaceId, '--email', email, '--role', 'viewer'), /"code":"conflict"/);
  await assert.rejects(admin('member', 'invite', '--workspace', workspace.workspaceId, '--email', newAddress('x'), '--role', 'boss'), /--role must be owner, admin, marketer, approver or viewer/);
  await assert.rejects(admin('member', 'invite', '--workspace', 'ws_nosuchworkspace00', '--email', newAddress('x'), '--role', 'viewer'), /"code":"not_found"/);
});

test('sign-in by email link read from Mailpit: always 202, a mail only to members, a new session id at every sign-in', async () => {
  const workspace = await createWorkspace();
  const { email } = await firstOwner(workspace);
  const stranger = newAddress('stranger');
  const accepted = { status: 'accepted', message: 'If this address belongs to a member, a sign-in link is on its way.' };

  const unknown = await call(stack.gatewayUrl, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email: stranger } });
  assert.equal(unknown.status, 202);
  assert.deepEqual(unknown.body, accepted);
  const known = await call(stack.gatewayUrl, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email: email.toUpperCase() } });
  assert.equal(known.status, 202);
  assert.deepEqual(known.body, accepted);

  const message = await mailpit.waitForMessage(email);
  assert.equal(message.subject, 'Your Herald sign-in link');
  assert.deepEqual(await mailpit.messagesTo(stranger), []);
  const first = await signInWith(await linkFromMail(email, 0));

  // Session fixation: a session id the browser already carries is never adopted.
  await call(stack.gatewayUrl, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email } });
  const planted = 'A'.repeat(43);
  const response = await useLink(await linkFromMail(email, 1), { cookie: `herald_session=${planted}` });
  assert.equal(response.status, 200);
  const second = /^herald_session=([^;]+)/.exec(response.headers.get('set-cookie') ?? '')?.[1];
  assert.ok(second && second !== planted && second !== first.id);
  assert.equal((await withSession({ id: planted, csrf: '' }, `${SERVER_API}/me`)).status, 401);
  // Both real sessions live.
  assert.equal((await withSession(first, `${SERVER_API}/me`)).status, 200);
  assert.equal((await withSession({ id: second, csrf: '' }, `${SERVER_API}/me`)).status, 200);

  const invalid = await call(stack.gatewayUrl, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email: 'not-an-address' } });
  assert.equal(invalid.status, 400);
  assert.equal((invalid.body as { code: string }).code, 'invalid_request');
});

test('roles: a viewer reads but is refused keys (403); a marketer runs campaigns but not keys; an approver answers a decision', async () => {
  const workspace = await createWorkspace('partner');
  const { session: owner } = await firstOwner(workspace);
  const { session: viewer, member: viewerMember } = await invite(owner, 'viewer');
  const { session: marketer } = await invite(owner, 'marketer');
  const { session: approver } = await invite(owner, 'approver');
  assert.equal(viewerMember.status, 'invited');
  assert.equal(viewerMember.lastSignInAt, null);

  const viewerKey = await withSession(viewer, `${SERVER_API}/keys`, { method: 'POST', body: { externalId: 'user-1' } });
  assert.equal(viewerKey.status, 403);
  assert.deepEqual(viewerKey.body, forbiddenForRole('viewer', 'change', 'keys'));
  assert.equal((await withSession(viewer, `${SERVER_API}/campaigns`)).status, 200);
  const viewerCampaign = await withSession(viewer, `${SERVER_API}/campaigns`, { method: 'POST', body: { name: 'No', title: 'No', body: 'No' } });
  assert.deepEqual(viewerCampaign.body, forbiddenForRole('viewer', 'change', 'campaigns'));
  assert.deepEqual((await withSession(viewer, `${SERVER_API}/webhooks/secret`)).body, forbiddenForRole('viewer', 'read', 'webhooks'));
  // Nothing was created.
  assert.deepEqual((await withSession(owner, `${SERVER_API}/keys`)).body, { keys: [] });

  const campaign = await withSession(marketer, `${SERVER_API}/campaigns`, { method: 'POST', body: { name: 'Spring', title: 'Sale', body: 'Everything -20%' } });
  assert.equal(campaign.status, 201, JSON.stringify(campaign.body));
  assert.equal((campaign.body as { status: string }).status, 'draft');
  const marketerKey = await withSession(marketer, `${SERVER_API}/keys`, { method: 'POST', body: { externalId: 'user-1' } });
  assert.deepEqual(marketerKey.body, forbiddenForRole('marketer', 'change', 'keys'));
  assert.deepEqual((await withSession(marketer, `${SERVER_API}/members`, { method: 'POST', body: { email: newAddress('m'), role: 'viewer' } })).body, forbiddenForRole('marketer', 'change', 'members'));

  const opened = await call<{ decisionId: string }>(stack.gatewayUrl, `${SERVER_API}/decisions`, { method: 'POST', key: workspace.apiKey, body: { question: 'Deploy 4.2?' } });
  assert.equal(opened.status, 200, JSON.stringify(opened.body));
  const answered = await withSession(approver, `${SERVER_API}/decisions/${opened.body.decisionId}`, { method: 'POST', body: { answer: 'yes' } });
  assert.equal(answered.status, 200, JSON.stringify(answered.body));
  assert.equal((answered.body as { status: string }).status, 'answered');
  assert.equal((answered.body as { approved: boolean }).approved, true);
  assert.deepEqual((await withSession(approver, `${SERVER_API}/campaigns`, { method: 'POST', body: { name: 'x', title: 'x', body: 'x' } })).body, forbiddenForRole('approver', 'change', 'campaigns'));

  // The members list, as the owner sees it (invitees became active by signing in).
  const listed = await withSession(owner, `${SERVER_API}/members`);
  assert.equal(listed.status, 200);
  const members = (listed.body as { data: MemberBody[] }).data;
  assert.deepEqual(
    members.map((member) => [member.role, member.status]),
    [['owner', 'active'], ['viewer', 'active'], ['marketer', 'active'], ['approver', 'active']],
  );
});

test('only an owner makes or removes an owner; a removed member is signed out at once', async () => {
  const workspace = await createWorkspace();
  const { session: owner, memberId: ownerId } = await firstOwner(workspace);
  const { session: adminSession } = await invite(owner, 'admin');
  const { session: viewer, member: viewerMember } = await invite(owner, 'viewer');

  const ownerByAdmin = await withSession(adminSession, `${SERVER_API}/members`, { method: 'POST', body: { email: newAddress('o'), role: 'owner' } });
  assert.equal(ownerByAdmin.status, 403);
  assert.equal((ownerByAdmin.body as { message: string }).message, 'Only an owner may invite an owner.');
  const ownerByKey = await call(stack.gatewayUrl, `${SERVER_API}/members`, { method: 'POST', key: workspace.apiKey, body: { email: newAddress('o'), role: 'owner' } });
  assert.equal(ownerByKey.status, 403);
  const removeOwner = await withSession(adminSession, `${SERVER_API}/members/${ownerId}`, { method: 'DELETE' });
  assert.equal(removeOwner.status, 403);
  assert.equal((removeOwner.body as { message: string }).message, 'Only an owner may remove an owner.');

  const duplicate = await withSession(adminSession, `${SERVER_API}/members`, { method: 'POST', body: { email: viewerMember.email.toUpperCase(), role: 'viewer' } });
  assert.equal(duplicate.status, 409);

  const removed = await withSession(adminSession, `${SERVER_API}/members/${viewerMember.id}`, { method: 'DELETE' });
  assert.equal(removed.status, 200);
  assert.equal((removed.body as unknown as MemberBody).status, 'removed');
  assert.equal((await withSession(viewer, `${SERVER_API}/me`)).status, 401);
  // A removed member gets no link either.
  await call(stack.gatewayUrl, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email: viewerMember.email } });
  await call(stack.gatewayUrl, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email: newAddress('nobody') } });
  assert.equal((await mailpit.messagesTo(viewerMember.email)).length, 1, 'the invite only');

  // A link mailed before the removal no longer signs in, and the invalid role is refused at the edge.
  const late = newAddress('late');
  const invited = await withSession(adminSession, `${SERVER_API}/members`, { method: 'POST', body: { email: late, role: 'marketer' } });
  assert.equal((await withSession(adminSession, `${SERVER_API}/members/${(invited.body as unknown as MemberBody).id}`, { method: 'DELETE' })).status, 200);
  const refused = await useLink(await linkFromMail(late, 0));
  assert.equal(refused.status, 404);
  assert.equal(refused.headers.get('set-cookie'), null);
  const badRole = await withSession(adminSession, `${SERVER_API}/members`, { method: 'POST', body: { email: newAddress('r'), role: 'boss' } });
  assert.equal(badRole.status, 400);
  assert.equal((badRole.body as { code: string }).code, 'invalid_request');
});

test('CSRF: a state change with a session needs the X-CSRF-Token and this origin; refused ones change nothing', async () => {
  const workspace = await createWorkspace();
  const { session: owner } = await firstOwner(workspace);
  const body = { email: newAddress('csrf'), role: 'viewer' };
  const attempts: Array<[string, RequestOptions & { csrf?: string | null }, string]> = [
    ['missing token', { csrf: null }, 'Send the csrfToken of GET /me as the X-CSRF-Token header.'],
    ['wrong token', { csrf: 'B'.repeat(43) }, 'Send the csrfToken of GET /me as the X-CSRF-Token header.'],
    ['another origin', { headers: { origin: 'https://evil.example' } }, `The request's Origin is not ${ORIGIN}.`],
    ['cross-site fetch', { headers: { 'sec-fetch-site': 'cross-site' } }, 'The request came from another site.'],
  ];
  for (const [what, options, hint] of attempts) {
    const response = await withSession(owner, `${SERVER_API}/members`, { method: 'POST', body, ...options });
    assert.equal(response.status, 403, what);
    assert.deepEqual(response.body, errorBody('forbidden', 403, 'CSRF check failed', 'Cross-site request refused.', hint), what);
  }
  const listed = await withSession(owner, `${SERVER_API}/members`);
  assert.deepEqual((listed.body as { data: MemberBody[] }).data.length, 1);
  // The same request, same origin, with the token.
  const ok = await withSession(owner, `${SERVER_API}/members`, { method: 'POST', body, headers: { origin: ORIGIN, 'sec-fetch-site': 'same-origin' } });
  assert.equal(ok.status, 201);

  // A link posted from another site's page is refused and stays usable (login CSRF).
  await call(stack.gatewayUrl, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email: body.email } });
  const invite = await linkFromMail(body.email, 0);
  const link = await linkFromMail(body.email, 1);
  const path = new URL(link).pathname;
  const forged = await fetch(`${stack.gatewayUrl}${path}`, { method: 'POST', headers: { origin: 'https://evil.example' } });
  assert.equal(forged.status, 403);
  assert.equal(forged.headers.get('set-cookie'), null);
  // `Origin: null` (what a no-referrer page's form sends) counts only when Sec-Fetch-Site says same-origin.
  for (const headers of [{ origin: 'null' }, { origin: 'null', 'sec-fetch-site': 'cross-site' }]) {
    const opaque = await fetch(`${stack.gatewayUrl}${path}`, { method: 'POST', headers });
    assert.equal(opaque.status, 403);
    assert.equal(opaque.headers.get('set-cookie'), null);
  }
  assert.equal((await useLink(link, { origin: 'null', 'sec-fetch-site': 'same-origin' })).status, 200);
  assert.equal((await useLink(invite)).status, 200, 'each link is its own');
});

test('forged, expired, idle and signed-out sessions are 401; sign out everywhere ends every session of the member', async () => {
  const workspace = await createWorkspace();
  const { session: a, email } = await firstOwner(workspace);
  const unauthorized = errorBody('unauthorized', 401, 'Invalid session', 'The session is invalid or has expired; sign in again.', '');
  const forged = await withSession({ id: 'C'.repeat(43), csrf: '' }, `${SERVER_API}/me`);
  assert.equal(forged.status, 401);
  assert.equal((forged.body as { code: string }).code, 'unauthorized');
  assert.equal((forged.body as { message: string }).message, unauthorized.message);
  // A key's endpoint without a key or a session: the usual 401.
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/me`)).status, 401);
  // /me is for members: a key gets 403.
  const byKey = await call(stack.gatewayUrl, `${SERVER_API}/me`, { key: workspace.apiKey });
  assert.equal(byKey.status, 403);

  const more = async (): Promise<Session> => {
    const count = (await mailpit.messagesTo(email)).length;
    await call(stack.gatewayUrl, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email } });
    return signInWith(await linkFromMail(email, count));
  };
  const b = await more();
  const c = await more();
  // Past its absolute expiry / idle too long: 401.
  await db.query(`UPDATE account.member_sessions SET expires_at = now() - interval '1 second' WHERE id_hash = $1`, [sha256(b.id)]);
  assert.equal((await withSession(b, `${SERVER_API}/me`)).status, 401);
  await db.query(`UPDATE account.member_sessions SET idle_expires_at = now() - interval '1 second' WHERE id_hash = $1`, [sha256(c.id)]);
  assert.equal((await withSession(c, `${SERVER_API}/me`)).status, 401);

  const d = await more();
  const e = await more();
  // Sign out (this session): only d ends.
  const out = await withSession(d, `${SERVER_API}/me/session`, { method: 'DELETE' });
  assert.equal(out.status, 200);
  assert.deepEqual(out.body, { revoked: 1 });
  assert.match(out.headers.get('set-cookie') ?? '', /^herald_session=; Path=\/; HttpOnly; SameSite=Lax; Max-Age=0$/);
  assert.equal((await withSession(d, `${SERVER_API}/me`)).status, 401);
  assert.equal((await withSession(e, `${SERVER_API}/me`)).status, 200);
  // Everywhere: a and e (b, c already ended).
  const everywhere = await withSession(e, `${SERVER_API}/me/sessions`, { method: 'DELETE' });
  assert.deepEqual(everywhere.body, { revoked: 2 });
  assert.equal((await withSession(a, `${SERVER_API}/me`)).status, 401);
  assert.equal((await withSession(e, `${SERVER_API}/me`)).status, 401);
});

test('an expired sign-in link is refused', async () => {
  const workspace = await createWorkspace();
  const email = newAddress('late');
  const { signInUrl } = await admin<{ signInUrl: string }>('member', 'invite', '--workspace', workspace.workspaceId, '--email', email, '--role', 'viewer');
  await db.query(`UPDATE account.sign_in_links SET expires_at = now() - interval '1 second' WHERE token_hash = $1`, [sha256(tokenOf(signInUrl))]);
  const response = await useLink(signInUrl);
  assert.equal(response.status, 404);
  assert.equal(response.headers.get('set-cookie'), null);
  const unknown = await useLink(`${ORIGIN}/sign-in/${'D'.repeat(43)}`);
  assert.equal(unknown.status, 404);
});

test("another workspace's members and objects answer 404 to a session and a key", async () => {
  const first = await createWorkspace();
  const second = await createWorkspace();
  const { session: owner } = await firstOwner(first);
  const { memberId: otherOwner } = await firstOwner(second);
  const campaign = await call<{ id: string }>(stack.gatewayUrl, `${SERVER_API}/campaigns`, { method: 'POST', key: second.apiKey, body: { name: 'Theirs', title: 't', body: 'b' } });
  assert.equal(campaign.status, 201);
  assert.equal((await withSession(owner, `${SERVER_API}/campaigns/${campaign.body.id}`)).status, 404);
  assert.equal((await withSession(owner, `${SERVER_API}/members/${otherOwner}`, { method: 'DELETE' })).status, 404);
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/members/${otherOwner}`, { method: 'DELETE', key: first.apiKey })).status, 404);
  const theirs = await call<{ data: MemberBody[] }>(stack.gatewayUrl, `${SERVER_API}/members`, { key: second.apiKey });
  assert.deepEqual(theirs.body.data.map((member) => member.id), [otherOwner]);
});

test('the cookie is Secure whenever the public origin is not plain-HTTP loopback', async () => {
  const workspace = await createWorkspace();
  const email = newAddress('secure');
  const { signInUrl } = await admin<{ signInUrl: string }>('member', 'invite', '--workspace', workspace.workspaceId, '--email', email, '--role', 'viewer');
  const gateway = await stack.addGateway({ ...gatewayEnv, PUBLIC_ORIGIN: 'https://herald.example.com' });
  const response = await fetch(`${gateway}${new URL(signInUrl).pathname}`, { method: 'POST', headers: { origin: 'https://herald.example.com' } });
  assert.equal(response.status, 200);
  assert.match(response.headers.get('set-cookie') ?? '', /^herald_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Expires=[^;]+ GMT; Secure$/);
});

test('sign-in requests are limited per address and per IP (429 in the error shape)', async () => {
  const address = newAddress('limited');
  for (let index = 0; index < ADDRESS_LIMIT; index += 1) {
    assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email: address } })).status, 202);
  }
  const over = await call<{ code: string; limit: number }>(stack.gatewayUrl, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email: address.toUpperCase() } });
  assert.equal(over.status, 429);
  assert.equal(over.body.code, 'rate_limited');
  assert.equal(over.body.limit, ADDRESS_LIMIT);
  assert.ok(Number(over.headers.get('retry-after')) >= 1);
  // Another address from the same IP still gets through.
  assert.equal((await call(stack.gatewayUrl, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email: newAddress('other') } })).status, 202);

  // A gateway allowing 1 per IP per minute: this IP has already asked (shared bucket), so refused.
  const strict = await stack.addGateway({ SIGN_IN_IP_RATE_LIMIT_PER_MINUTE: '1' });
  const byIp = await call<{ code: string; limit: number }>(strict, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email: newAddress('fresh') } });
  assert.equal(byIp.status, 429);
  assert.equal(byIp.body.limit, 1);
  const consume = await fetch(`${strict}/sign-in/${'E'.repeat(43)}`, { method: 'POST', headers: { origin: ORIGIN } });
  assert.equal(consume.status, 429);
});

test('when the SMTP server refuses, the request is still 202 and the failure is logged without the link', async () => {
  const workspace = await createWorkspace();
  const { email, memberId } = await firstOwner(workspace);
  // The account service again, on its port, with an SMTP server that is not there.
  const first = stack.services.find((service) => service.output().includes('account service serving'));
  assert.ok(first);
  await first.stop();
  const account = await stack.startService('account', { SMTP_URL: 'smtp://127.0.0.1:1' }, { replacing: true });
  const response = await call(stack.gatewayUrl, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email } });
  assert.equal(response.status, 202);
  const failureLine = () => account.output().split('\n').find((line) => line.includes('sign-in mail not sent'));
  const logged = await within(
    'the failure logged',
    15_000,
    new Promise<string>((resolve) => {
      const check = (): void => {
        const line = failureLine();
        if (line !== undefined) resolve(line);
      };
      account.child.stdout?.on('data', check);
      check();
    }),
  );
  assert.equal(JSON.parse(logged).memberId, memberId);
  assert.doesNotMatch(account.output(), /sign-in\/[A-Za-z0-9_-]{43}/);
});

test('workspace create --owner-email makes the first owner and prints their sign-in link', async () => {
  const email = newAddress('founder');
  const created = await admin<{ workspaceId: string; apiKey: string; ownerMemberId: string; ownerSignInUrl: string }>(
    'workspace', 'create', '--name', 'Founded', '--plan', 'growth', '--domain', 'founded.test', '--owner-email', email,
  );
  assert.match(created.apiKey, /^pk_[a-z2-7]{16}\.[A-Za-z0-9_-]{43}$/);
  const session = await signInWith(created.ownerSignInUrl);
  const me = (await withSession(session, `${SERVER_API}/me`)).body as unknown as Me;
  assert.deepEqual([me.member.id, me.member.email, me.role, me.workspace.id, me.workspace.name], [created.ownerMemberId, email, 'owner', created.workspaceId, 'Founded']);
});
