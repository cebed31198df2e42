import assert from 'node:assert/strict';

import { admin, call, SERVER_API, type ApiResponse, type Mailpit, type RequestOptions, type TestWorkspace } from '@herald/testkit';

/**
 * Members' sessions as a browser gets them, for the tests of members, sign-in and passkeys: the
 * first owner's link from the admin CLI, invites read from Mailpit, the link's page and its POST,
 * and calls with the herald_session cookie (plus X-CSRF-Token on a state change).
 */

/** The stacks' PUBLIC_ORIGIN (links and the Origin check). */
export const ORIGIN = 'http://localhost:8080';

export interface Session {
  id: string;
  csrf: string;
}

export interface MemberBody {
  id: string;
  email: string;
  displayName: string;
  role: string;
  status: string;
  createdAt: string;
  lastSignInAt: string | null;
}

export interface Me {
  member: MemberBody;
  workspace: { id: string; name: string };
  role: string;
  csrfToken: string;
}

let addressCounter = 0;
export const newAddress = (who: string) => `${who}-${process.pid}-${(addressCounter += 1)}@example.test`;

/** The session id a Set-Cookie header sets, if any. */
export const sessionIdOf = (setCookie: string | null): string | undefined => /^herald_session=([A-Za-z0-9_-]{43}); /.exec(setCookie ?? '')?.[1];

/**
 * Getters: the test file's stack (and Mailpit, for the invites' links) exist once its before hook
 * ran. `origin`: the stack's PUBLIC_ORIGIN.
 */
export function memberSessions(gatewayUrl: () => string, mailpit?: () => Mailpit, origin = ORIGIN) {
  /** A request with the session's cookie, and on a state change its CSRF token and this origin. */
  function withSession(session: Session, path: string, options: RequestOptions & { csrf?: string | null } = {}): Promise<ApiResponse<Record<string, unknown>>> {
    const { csrf = session.csrf, ...rest } = options;
    const headers: Record<string, string> = { cookie: `herald_session=${session.id}`, ...rest.headers };
    if (csrf !== null && (rest.method ?? 'GET') !== 'GET') headers['x-csrf-token'] = csrf;
    return call(gatewayUrl(), path, { ...rest, headers });
  }

  /** The sign-in link of the `index`th message to `address` (the mail's text, as a person reads it). */
  async function linkFromMail(address: string, index: number): Promise<string> {
    assert.ok(mailpit, 'this file reads no mail');
    const message = await mailpit().waitForMessage(address, { since: index });
    assert.equal(message.from, 'no-reply@herald.test');
    const link = new RegExp(`(${origin}/sign-in/[A-Za-z0-9_-]{43})\\s`).exec(message.text)?.[1];
    assert.ok(link, message.text);
    return link;
  }

  /** Opens the link's page (GET never uses it up), then presses its button (the POST). */
  async function useLink(link: string, headers: Record<string, string> = {}): Promise<Response> {
    const path = new URL(link).pathname;
    const page = await fetch(`${gatewayUrl()}${path}`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), new RegExp(`<form method="post" action="${path}"><button type="submit">Sign in</button></form>`));
    return fetch(`${gatewayUrl()}${path}`, { method: 'POST', headers: { origin, 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: '' });
  }

  /** The session a response opened, with its CSRF token from GET /me. */
  async function sessionFrom(response: Response): Promise<Session> {
    const id = sessionIdOf(response.headers.get('set-cookie'));
    assert.ok(id, response.headers.get('set-cookie') ?? 'no Set-Cookie');
    const me = await withSession({ id, csrf: '' }, `${SERVER_API}/me`);
    assert.equal(me.status, 200, JSON.stringify(me.body));
    return { id, csrf: (me.body as unknown as Me).csrfToken };
  }

  async function signInWith(link: string): Promise<Session> {
    const response = await useLink(link);
    assert.equal(response.status, 200, await response.clone().text());
    return sessionFrom(response);
  }

  async function firstOwner(workspace: TestWorkspace): Promise<{ session: Session; email: string; memberId: string }> {
    const email = newAddress('owner');
    const invited = await admin<{ memberId: string; signInUrl: string }>('member', 'invite', '--workspace', workspace.workspaceId, '--email', email, '--role', 'owner', '--name', 'Olive Owner');
    return { session: await signInWith(invited.signInUrl), email, memberId: invited.memberId };
  }

  return { withSession, linkFromMail, useLink, sessionFrom, signInWith, firstOwner };
}
