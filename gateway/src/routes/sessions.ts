import { createHash } from 'node:crypto';

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { HeraldError } from '@herald/errors';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import type { GatewayConfig } from '../config.js';
import { acceptFormPosts, renderSignInPage, sendFormPage, type SignInPage } from '../html.js';
import { enforceRateLimit, type RateLimiter } from '../rate-limit.js';
import { Email, memberRecord, MemberRecord } from '../schemas/members.js';
import { withErrors } from '../schemas/common.js';
import { assertSameOrigin, clearSessionCookie, cookieIsSecure, limitSignInAttempts, sessionOf, setSessionCookie } from '../sessions.js';

/**
 * Signing in by a single-use email link, and the signed-in member's own session:
 *   POST {base}/sign-in/links      mails a link (always 202; limited per address and per IP)
 *   GET  /sign-in/{token}          a page whose button POSTs back (mail scanners only GET links)
 *   POST /sign-in/{token}          uses the link up, opens a session (the herald_session cookie)
 *   GET  {base}/me                 the member, workspace, role and CSRF token
 *   DELETE {base}/me/session       signs this session out; DELETE {base}/me/sessions: everywhere
 */

export interface SessionRouteOptions {
  clients: ServiceClients;
  config: GatewayConfig;
  limiter: RateLimiter;
}

const Token = Type.Object({ token: Type.String({ minLength: 1, maxLength: 100 }) });

const unusable: SignInPage = { heading: 'This sign-in link cannot be used', text: 'Sign-in links work once and for a short time. Ask for a new one.' };

const Me = Type.Object({
  member: MemberRecord,
  workspace: Type.Object({ id: Type.String(), name: Type.String() }),
  role: Type.String(),
  csrfToken: Type.String({ description: 'Send it as X-CSRF-Token on every state-changing request made with the session' }),
});

export const signInRoutes =
  ({ clients, config, limiter }: SessionRouteOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    acceptFormPosts(app);
    const secure = cookieIsSecure(config.publicOrigin);

    // Its post must carry this origin as Origin (the check below): a browser sends "null" from a
    // page whose referrer policy is no-referrer, so this page keeps its referrer on this origin.
    app.get('/sign-in/:token', { config: { access: { public: true } }, schema: { params: Token } }, async (request, reply) =>
      sendFormPage(reply, 200, renderSignInPage({ heading: 'Sign in to Herald', text: 'Press the button to sign in. The link works once.', action: `/sign-in/${request.params.token}` }), 'same-origin'),
    );

    app.post('/sign-in/:token', { config: { access: { public: true } }, schema: { params: Token } }, async (request, reply) => {
      // Only this origin's page may post it: no other site signs a browser in (login CSRF).
      assertSameOrigin(request, config.publicOrigin);
      await limitSignInAttempts(limiter, request, reply, config.signInIpRateLimitPerMinute);
      let signedIn;
      try {
        signedIn = await clients.account.consumeSignInLink({ token: request.params.token });
      } catch (err) {
        if (err instanceof HeraldError && err.code === 'not_found') return sendFormPage(reply, 404, renderSignInPage(unusable));
        throw err;
      }
      if (!signedIn.member) throw new Error('account service returned no member');
      setSessionCookie(reply, signedIn.sessionId, signedIn.expiresAt, secure);
      return sendFormPage(reply, 200, renderSignInPage({ heading: 'You are signed in', text: `Signed in as ${signedIn.member.email}.`, next: { href: '/console/', text: 'Open the Herald Console' } }));
    });
  };

export const sessionRoutes =
  ({ clients, config, limiter }: SessionRouteOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    const secure = cookieIsSecure(config.publicOrigin);
    const access = { scope: 'me' } as const;

    app.post(
      '/sign-in/links',
      {
        config: { access: { public: true } },
        schema: {
          tags: ['Members'],
          operationId: 'requestSignInLink',
          summary: 'Mail a single-use sign-in link to a member (always 202, whether or not the address is one)',
          body: Type.Object({ email: Email }, { additionalProperties: false }),
          response: withErrors({ 202: Type.Object({ status: Type.Literal('accepted'), message: Type.String() }) }),
        },
      },
      async (request, reply) => {
        const email = request.body.email.trim().toLowerCase();
        await limitSignInAttempts(limiter, request, reply, config.signInIpRateLimitPerMinute);
        // Hashed: the bucket's Redis key never holds the address.
        await enforceRateLimit(limiter, reply, `sign-in-address:${createHash('sha256').update(email).digest('base64url')}`, config.signInAddressRateLimitPerMinute);
        await clients.account.requestSignInLink({ email });
        return reply.code(202).send({ status: 'accepted' as const, message: 'If this address belongs to a member, a sign-in link is on its way.' });
      },
    );

    app.get(
      '/me',
      { config: { access }, schema: { tags: ['Members'], operationId: 'getMe', summary: 'The signed-in member, their workspace, role and CSRF token (sessions only)', response: withErrors({ 200: Me }) } },
      async (request) => {
        const session = sessionOf(request);
        return {
          member: memberRecord(session.member),
          workspace: { id: principalOf(request).workspaceId, name: session.workspaceName },
          role: session.member.role,
          csrfToken: session.csrfToken,
        };
      },
    );

    app.delete(
      '/me/session',
      { config: { access }, schema: { tags: ['Members'], operationId: 'signOut', summary: 'Sign this session out (sessions only)', response: withErrors({ 200: Type.Object({ revoked: Type.Integer() }) }) } },
      async (request, reply) => {
        const session = sessionOf(request);
        const { revoked } = await clients.account.revokeSessions({ workspaceId: principalOf(request).workspaceId, memberId: session.member.id, sessionId: session.id });
        clearSessionCookie(reply, secure);
        return { revoked };
      },
    );

    app.delete(
      '/me/sessions',
      {
        config: { access },
        schema: { tags: ['Members'], operationId: 'signOutEverywhere', summary: "Sign out everywhere: end every session of the signed-in member", response: withErrors({ 200: Type.Object({ revoked: Type.Integer() }) }) },
      },
      async (request, reply) => {
        const session = sessionOf(request);
        const { revoked } = await clients.account.revokeSessions({ workspaceId: principalOf(request).workspaceId, memberId: session.member.id, sessionId: '' });
        clearSessionCookie(reply, secure);
        return { revoked };
      },
    );
  };
