import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';

import { call, connectDatabase, createDatabase, createWorkspace, errorBody, SERVER_API, startStack, type Stack, type TestDatabase } from '@herald/testkit';
import type pg from 'pg';

import { memberSessions, ORIGIN, sessionIdOf, type Me, type Session } from './member-sessions.js';
import { SoftwareAuthenticator, type RegistrationOptions } from './software-authenticator.js';

// Passkeys through HTTP, with an authenticator in the test process (so it can send what a browser
// never would: a counter that went backwards, a challenge never issued or used already, another
// origin). The ceremony in a real browser is passkeys-chromium.test.ts.

const RP_ID = 'localhost'; // the host of the stack's PUBLIC_ORIGIN
const testDatabaseUrl = process.env.DATABASE_URL;

let stack: Stack;
let database: TestDatabase;
let db: pg.Client;
before(async () => {
  // A database of its own: the account schema exactly as this checkout migrates it.
  database = await createDatabase();
  process.env.DATABASE_URL = database.url;
  stack = await startStack({ gatewayEnv: { SIGN_IN_IP_RATE_LIMIT_PER_MINUTE: '1000' } });
  db = await connectDatabase();
});
after(async () => {
  await db?.end();
  await stack?.stop();
  process.env.DATABASE_URL = testDatabaseUrl;
  await database?.drop();
});

const { withSession, firstOwner } = memberSessions(() => stack.gatewayUrl);
const sha256 = (text: string) => createHash('sha256').update(text).digest();

interface PasskeyBody {
  id: string;
  name: string;
  transports: string[];
  deviceType: string;
  backedUp: boolean;
  createdAt: string;
  lastUsedAt: string | null;
}

const badChallenge = errorBody(
  'invalid_request',
  400,
  'Passkey challenge not usable',
  'The passkey challenge is unknown, used, expired or not this session’s.',
  'Ask for new options and try again; each challenge works once, for a few minutes.',
);
const refused = (detail: string) => errorBody('unauthorized', 401, 'Passkey refused', `The passkey was refused: ${detail}.`, 'Try again, or sign in by email link.');

async function registrationOptions(session: Session): Promise<RegistrationOptions & Record<string, unknown>> {
  const response = await withSession(session, `${SERVER_API}/me/passkeys/options`, { method: 'POST', body: {}, headers: { origin: ORIGIN } });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return (response.body as { options: RegistrationOptions & Record<string, unknown> }).options;
}

function registerWith(session: Session, credential: unknown, name?: string) {
  return withSession(session, `${SERVER_API}/me/passkeys`, { method: 'POST', body: { ...(name === undefined ? {} : { name }), credential }, headers: { origin: ORIGIN } });
}

/** A member with a passkey registered through HTTP. */
async function memberWithPasskey(name = 'Laptop') {
  const workspace = await createWorkspace();
  const owner = await firstOwner(workspace);
  const authenticator = new SoftwareAuthenticator(ORIGIN, RP_ID);
  const registered = await registerWith(owner.session, authenticator.register(await registrationOptions(owner.session)), name);
  assert.equal(registered.status, 201, JSON.stringify(registered.body));
  return { workspace, ...owner, authenticator, passkey: (registered.body as { passkey: PasskeyBody }).passkey };
}

async function signInOptions(gatewayUrl = stack.gatewayUrl, headers: Record<string, string> = {}): Promise<{ challenge: string } & Record<string, unknown>> {
  const response = await call<{ options: { challenge: string } }>(gatewayUrl, `${SERVER_API}/sign-in/passkey/options`, { method: 'POST', body: {}, headers });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body.options;
}

function signIn(credential: unknown, gatewayUrl = stack.gatewayUrl, headers: Record<string, string> = { origin: ORIGIN }) {
  return call(gatewayUrl, `${SERVER_API}/sign-in/passkey`, { method: 'POST', body: { credential }, headers });
}

async function sessionCount(memberId: string): Promise<number> {
  const { rows } = await db.query<{ count: number }>(`SELECT count(*)::int AS count FROM account.member_sessions WHERE member_id = $1`, [memberId]);
  return rows[0]?.count ?? -1;
}

async function storedCounter(passkeyId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ counter: string }>(`SELECT counter FROM account.passkeys WHERE id = $1`, [passkeyId]);
  return rows[0]?.counter;
}

test('a signed-in member registers a passkey, signs in with it (a new session, the same cookie, GET /me), lists and deletes it', async () => {
  const workspace = await createWorkspace();
  const owner = await firstOwner(workspace);
  const options = await registrationOptions(owner.session);
  assert.match(options.challenge, /^[A-Za-z0-9_-]{43}$/);
  assert.deepEqual(
    { ...options, challenge: '' },
    {
      challenge: '',
      rp: { name: 'Herald', id: RP_ID },
      user: { id: Buffer.from(owner.memberId).toString('base64url'), name: owner.email, displayName: 'Olive Owner' },
      pubKeyCredParams: [
        { alg: -48, type: 'public-key' },
        { alg: -8, type: 'public-key' },
        { alg: -7, type: 'public-key' },
        { alg: -257, type: 'public-key' },
      ],
      timeout: 300_000,
      attestation: 'none',
      excludeCredentials: [],
      authenticatorSelection: { residentKey: 'required', userVerification: 'required', requireResidentKey: true },
      extensions: { credProps: true },
      hints: [],
    },
  );

  const authenticator = new SoftwareAuthenticator(ORIGIN, RP_ID);
  const registered = await registerWith(owner.session, authenticator.register(options), ' Laptop ');
  assert.equal(registered.status, 201, JSON.stringify(registered.body));
  const { passkey } = registered.body as { passkey: PasskeyBody };
  assert.match(passkey.id, /^psk_[a-z2-7]+$/);
  assert.deepEqual(passkey, { id: passkey.id, name: 'Laptop', transports: ['internal'], deviceType: 'singleDevice', backedUp: false, createdAt: passkey.createdAt, lastUsedAt: null });
  assert.ok(Math.abs(Date.parse(passkey.createdAt) - Date.now()) < 60_000);
  // A second registration excludes it (the authenticator refuses to make another for this member).
  assert.deepEqual((await registrationOptions(owner.session)).excludeCredentials, [{ id: authenticator.id, type: 'public-key', transports: ['internal'] }]);

  const signInChallenge = await signInOptions();
  assert.match(signInChallenge.challenge, /^[A-Za-z0-9_-]{43}$/);
  assert.deepEqual({ ...signInChallenge, challenge: '' }, { challenge: '', rpId: RP_ID, timeout: 300_000, userVerification: 'required' });
  const before = await sessionCount(owner.memberId);
  const signedIn = await signIn(authenticator.assert(signInChallenge.challenge, 1));
  assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body));
  const cookie = signedIn.headers.get('set-cookie');
  // The email link's cookie exactly: HttpOnly, SameSite=Lax, no Secure on plain-HTTP localhost.
  assert.match(cookie ?? '', /^herald_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Expires=[^;]+ GMT$/);
  const sessionId = sessionIdOf(cookie);
  assert.ok(sessionId && sessionId !== owner.session.id, 'a new session id');
  const body = signedIn.body as { member: Me['member']; expiresAt: string };
  assert.equal(body.member.id, owner.memberId);
  assert.equal(body.member.email, owner.email);
  assert.equal(body.member.status, 'active');
  assert.ok(Math.abs(Date.parse(body.expiresAt) - Date.now() - 7 * 86_400_000) < 60_000, 'the absolute expiry, 7 days');
  assert.equal(await sessionCount(owner.memberId), before + 1);
  const me = await withSession({ id: sessionId, csrf: '' }, `${SERVER_API}/me`);
  assert.equal(me.status, 200);
  assert.equal((me.body as unknown as Me).member.id, owner.memberId);
  assert.equal((me.body as unknown as Me).workspace.id, workspace.workspaceId);
  const newSession: Session = { id: sessionId, csrf: (me.body as unknown as Me).csrfToken };

  const listed = await withSession(newSession, `${SERVER_API}/me/passkeys`);
  assert.equal(listed.status, 200);
  const [used] = (listed.body as { passkeys: PasskeyBody[] }).passkeys;
  assert.ok(used?.lastUsedAt && Math.abs(Date.parse(used.lastUsedAt) - Date.now()) < 60_000);
  assert.deepEqual(listed.body, { passkeys: [{ ...passkey, lastUsedAt: used.lastUsedAt }] });
  assert.equal(await storedCounter(passkey.id), '1');

  const deleted = await withSession(newSession, `${SERVER_API}/me/passkeys/${passkey.id}`, { method: 'DELETE', headers: { origin: ORIGIN } });
  assert.equal(deleted.status, 200);
  assert.deepEqual(deleted.body, { passkey: { ...passkey, lastUsedAt: used.lastUsedAt } });
  assert.deepEqual((await withSession(newSession, `${SERVER_API}/me/passkeys`)).body, { passkeys: [] });
  // Deleted, it signs in no more.
  const after = await signIn(authenticator.assert((await signInOptions()).challenge, 2));
  assert.equal(after.status, 401);
  assert.deepEqual(after.body, refused('this passkey is not registered with Herald'));
  assert.equal(await sessionCount(owner.memberId), before + 1);
});

test('a counter that went backwards (or stood still), a reused, unknown, expired or registration challenge, another origin, an unknown credential: 4xx, no session, counter kept', async () => {
  const { memberId, passkey, authenticator, session } = await memberWithPasskey();
  assert.equal((await signIn(authenticator.assert((await signInOptions()).challenge, 5))).status, 200);
  const sessions = await sessionCount(memberId);

  const backwards = await signIn(authenticator.assert((await signInOptions()).challenge, 3));
  assert.equal(backwards.status, 401);
  assert.deepEqual(backwards.body, refused('Response counter value 3 was lower than expected 5'));
  assert.equal(backwards.headers.get('set-cookie'), null);
  const same = await signIn(authenticator.assert((await signInOptions()).challenge, 5));
  assert.equal(same.status, 401);
  assert.deepEqual(same.body, refused('Response counter value 5 was lower than expected 5'));

  // A challenge works once, even when the first use succeeded.
  const once = (await signInOptions()).challenge;
  assert.equal((await signIn(authenticator.assert(once, 6))).status, 200);
  const reused = await signIn(authenticator.assert(once, 7));
  assert.equal(reused.status, 400);
  assert.deepEqual(reused.body, badChallenge);
  // ...and once when the first use failed (a page of another origin had the browser sign it).
  const failed = (await signInOptions()).challenge;
  const phished = await signIn(authenticator.assert(failed, 8, 'https://evil.example'));
  assert.equal(phished.status, 401);
  assert.deepEqual(phished.body, refused('Unexpected authentication response origin "https://evil.example", expected "http://localhost:8080"'));
  assert.deepEqual((await signIn(authenticator.assert(failed, 8))).body, badChallenge);

  const neverIssued = await signIn(authenticator.assert(randomBytes(32).toString('base64url'), 8));
  assert.equal(neverIssued.status, 400);
  assert.deepEqual(neverIssued.body, badChallenge);
  // A registration challenge is no sign-in challenge.
  const registration = await signIn(authenticator.assert((await registrationOptions(session)).challenge, 8));
  assert.equal(registration.status, 400);
  assert.deepEqual(registration.body, badChallenge);
  const stale = (await signInOptions()).challenge;
  await db.query(`UPDATE account.passkey_challenges SET expires_at = now() - interval '1 second' WHERE challenge_hash = $1`, [sha256(stale)]);
  const expired = await signIn(authenticator.assert(stale, 8));
  assert.equal(expired.status, 400);
  assert.deepEqual(expired.body, badChallenge);

  const stranger = new SoftwareAuthenticator(ORIGIN, RP_ID);
  const unknown = await signIn(stranger.assert((await signInOptions()).challenge, 1));
  assert.equal(unknown.status, 401);
  assert.deepEqual(unknown.body, refused('this passkey is not registered with Herald'));

  assert.equal(await sessionCount(memberId), sessions + 1, 'only the one good sign-in opened a session');
  assert.equal(await storedCounter(passkey.id), '6');
  // Still good for a proper use.
  assert.equal((await signIn(authenticator.assert((await signInOptions()).challenge, 7))).status, 200);
});

test("a registration challenge is good for its session only; a credential registers once; another member's or workspace's passkey is 404", async () => {
  const a = await memberWithPasskey('A key');
  const b = await firstOwner(await createWorkspace());
  const options = await registrationOptions(a.session);
  const second = new SoftwareAuthenticator(ORIGIN, RP_ID);
  const credential = second.register(options);
  // Another session (another workspace's member) cannot finish it...
  const stolen = await registerWith(b.session, credential);
  assert.equal(stolen.status, 400);
  assert.deepEqual(stolen.body, badChallenge);
  assert.deepEqual((await withSession(b.session, `${SERVER_API}/me/passkeys`)).body, { passkeys: [] });
  // ...and did not use it up for the session that asked.
  const own = await registerWith(a.session, credential);
  assert.equal(own.status, 201);
  assert.equal((own.body as { passkey: PasskeyBody }).passkey.name, 'Passkey');

  // The same credential again, for the same member or another: 409, nothing stored.
  for (const session of [a.session, b.session]) {
    const again = await registerWith(session, second.register(await registrationOptions(session)));
    assert.equal(again.status, 409);
    assert.deepEqual(again.body, errorBody('conflict', 409, 'Passkey already registered', 'This passkey is registered already.', 'Read the resource again and decide what to do with its current state.'));
  }
  assert.equal(((await withSession(a.session, `${SERVER_API}/me/passkeys`)).body as { passkeys: PasskeyBody[] }).passkeys.length, 2);
  assert.deepEqual((await withSession(b.session, `${SERVER_API}/me/passkeys`)).body, { passkeys: [] });

  // Another workspace's member deleting A's passkey: 404, and it stays.
  const foreign = await withSession(b.session, `${SERVER_API}/me/passkeys/${a.passkey.id}`, { method: 'DELETE', headers: { origin: ORIGIN } });
  assert.equal(foreign.status, 404);
  assert.deepEqual(foreign.body, errorBody('not_found', 404, 'Passkey not found', `No passkey ${a.passkey.id} of yours.`, 'Check the path and the identifier.'));
  assert.equal(await storedCounter(a.passkey.id), '0');
  const missing = await withSession(a.session, `${SERVER_API}/me/passkeys/psk_nosuchpasskey`, { method: 'DELETE', headers: { origin: ORIGIN } });
  assert.equal(missing.status, 404);
});

test('passkey management needs a session and its CSRF token; an API key, no credential or a missing token is refused', async () => {
  const a = await memberWithPasskey();
  const viaKey = await call(stack.gatewayUrl, `${SERVER_API}/me/passkeys`, { key: a.workspace.apiKey });
  assert.equal(viaKey.status, 403);
  assert.deepEqual(
    viaKey.body,
    errorBody('forbidden', 403, 'Permission denied', 'Only a signed-in member can call this endpoint.', 'Sign in (an email link) and call it with the herald_session cookie, not an API key.'),
  );
  const anonymous = await call(stack.gatewayUrl, `${SERVER_API}/me/passkeys/options`, { method: 'POST', body: {} });
  assert.equal(anonymous.status, 401);
  const noToken = await withSession(a.session, `${SERVER_API}/me/passkeys/options`, { method: 'POST', body: {}, csrf: null, headers: { origin: ORIGIN } });
  assert.equal(noToken.status, 403);
  assert.deepEqual(noToken.body, errorBody('forbidden', 403, 'CSRF check failed', 'Cross-site request refused.', 'Send the csrfToken of GET /me as the X-CSRF-Token header.'));
  const noDelete = await withSession(a.session, `${SERVER_API}/me/passkeys/${a.passkey.id}`, { method: 'DELETE', csrf: null, headers: { origin: ORIGIN } });
  assert.equal(noDelete.status, 403);
  assert.equal(await storedCounter(a.passkey.id), '0', 'still there');
  const { rows } = await db.query(`SELECT 1 FROM account.passkey_challenges c JOIN account.member_sessions s ON s.id_hash = c.session_hash WHERE s.member_id = $1`, [a.memberId]);
  assert.equal(rows.length, 1, 'only the registration that succeeded asked for a challenge');
});

test("signing in with a passkey from another site is refused (login CSRF); a malformed credential is a 400 naming the field", async () => {
  const { authenticator } = await memberWithPasskey();
  const crossSite = await signIn(authenticator.assert((await signInOptions()).challenge, 1), stack.gatewayUrl, { origin: 'https://evil.example' });
  assert.equal(crossSite.status, 403);
  assert.deepEqual(crossSite.body, errorBody('forbidden', 403, 'CSRF check failed', 'Cross-site request refused.', "The request's Origin is not http://localhost:8080."));
  const fetchSite = await signIn(authenticator.assert((await signInOptions()).challenge, 1), stack.gatewayUrl, { 'sec-fetch-site': 'cross-site' });
  assert.equal(fetchSite.status, 403);
  assert.equal(fetchSite.headers.get('set-cookie'), null);

  const good = authenticator.assert((await signInOptions()).challenge, 1);
  const notBase64 = await signIn({ ...good, response: { ...good.response, signature: 'not base64url!' } });
  assert.equal(notBase64.status, 400);
  assert.equal(notBase64.body.code, 'invalid_request');
  assert.match(String(notBase64.body.message), /signature/);
  const notJson = await signIn({ ...good, response: { ...good.response, clientDataJSON: Buffer.from('not json').toString('base64url') } });
  assert.equal(notJson.status, 400);
  assert.deepEqual(notJson.body, errorBody('invalid_request', 400, 'Invalid passkey response', 'Malformed passkey response: clientDataJSON is not base64url JSON with a challenge.', 'Fix the request as the message says and send it again.'));
  const extra = await call(stack.gatewayUrl, `${SERVER_API}/sign-in/passkey/options`, { method: 'POST', body: { email: 'a@example.test' } });
  assert.equal(extra.status, 400);
  // The challenge of `good` was never used: it still signs in.
  assert.equal((await signIn(good)).status, 200);
});

test('passkey sign-in attempts are limited per client IP, in the bucket the email-link sign-in uses (429 in the error shape)', async () => {
  const { authenticator } = await memberWithPasskey();
  // A gateway trusting the loopback proxy: each test address its own bucket, 3 a minute.
  const strict = await stack.addGateway({ TRUST_PROXY: 'loopback', SIGN_IN_IP_RATE_LIMIT_PER_MINUTE: '3' });
  const from = (ip: string) => ({ 'x-forwarded-for': ip });
  const ip = `198.51.100.${1 + (process.pid % 250)}`;
  const options = await signInOptions(strict, from(ip));
  assert.equal((await signIn(authenticator.assert(options.challenge, 1), strict, { origin: ORIGIN, ...from(ip) })).status, 200);
  await signInOptions(strict, from(ip));
  const over = await call<{ code: string; limit: number }>(strict, `${SERVER_API}/sign-in/passkey/options`, { method: 'POST', body: {}, headers: from(ip) });
  assert.equal(over.status, 429);
  assert.equal(over.body.code, 'rate_limited');
  assert.equal(over.body.limit, 3);
  assert.ok(Number(over.headers.get('retry-after')) >= 1);
  const verify = await signIn(authenticator.assert((await signInOptions(strict, from('203.0.113.9'))).challenge, 2), strict, { origin: ORIGIN, ...from(ip) });
  assert.equal(verify.status, 429);
  const link = await call(strict, `${SERVER_API}/sign-in/links`, { method: 'POST', body: { email: 'someone@example.test' }, headers: from(ip) });
  assert.equal(link.status, 429);
  // Another address is not held back.
  assert.equal((await call(strict, `${SERVER_API}/sign-in/passkey/options`, { method: 'POST', body: {}, headers: from('203.0.113.9') })).status, 200);
});
