import { timingSafeEqual } from 'node:crypto';

import { HeraldError } from '@herald/errors';
import type { Member } from '@herald/proto/herald/account/v1/account';
import type { FastifyReply, FastifyRequest } from 'fastify';

import { enforceRateLimit, type RateLimiter } from './rate-limit.js';

/**
 * Members' sessions: the `herald_session` cookie (HttpOnly, SameSite=Lax, Path=/, Secure unless
 * the public origin is plain-HTTP loopback) whose value is the session id the account service
 * checks, and the CSRF rule for every state-changing request made with one.
 */

export const SESSION_COOKIE = 'herald_session';
export const CSRF_HEADER = 'x-csrf-token';

/** What a session-authenticated request knows besides its principal (set by the auth hook). */
export interface SessionContext {
  id: string;
  csrfToken: string;
  member: Member;
  workspaceName: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    session?: SessionContext;
  }
}

/** The session of a route that only a signed-in member may call. */
export function sessionOf(request: FastifyRequest): SessionContext {
  if (!request.session) {
    throw new HeraldError('forbidden', 'Only a signed-in member can call this endpoint.', {
      title: 'Permission denied',
      hint: 'Sign in (an email link) and call it with the herald_session cookie, not an API key.',
    });
  }
  return request.session;
}

/** Counts a sign-in attempt (asking for a link, using one, a passkey ceremony) against the client IP's limit. */
export async function limitSignInAttempts(limiter: RateLimiter, request: FastifyRequest, reply: FastifyReply, limitPerMinute: number): Promise<void> {
  await enforceRateLimit(limiter, reply, `sign-in-ip:${request.ip}`, limitPerMinute);
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Secure is off only where a browser could not send it back: plain HTTP on loopback. */
export function cookieIsSecure(publicOrigin: string): boolean {
  const { protocol, hostname } = new URL(publicOrigin);
  return !(protocol === 'http:' && (LOOPBACK_HOSTS.has(hostname) || hostname.endsWith('.localhost')));
}

/** A cookie's value in the Cookie header, if any (the first one of that name). */
export function cookieValue(request: FastifyRequest, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) {
      const value = part.slice(at + 1).trim();
      return value === '' ? undefined : value;
    }
  }
  return undefined;
}

/** The session id in the Cookie header, if any. */
export const sessionCookie = (request: FastifyRequest): string | undefined => cookieValue(request, SESSION_COOKIE);

export function setSessionCookie(reply: FastifyReply, sessionId: string, expiresAt: string, secure: boolean): void {
  void reply.header(
    'set-cookie',
    `${SESSION_COOKIE}=${sessionId}; Path=/; HttpOnly; SameSite=Lax; Expires=${new Date(expiresAt).toUTCString()}${secure ? '; Secure' : ''}`,
  );
}

export function clearSessionCookie(reply: FastifyReply, secure: boolean): void {
  void reply.header('set-cookie', `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0${secure ? '; Secure' : ''}`);
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

const csrfRefused = (hint: string): HeraldError => new HeraldError('forbidden', 'Cross-site request refused.', { title: 'CSRF check failed', hint });

/**
 * A request that comes from this origin's pages: a browser's Sec-Fetch-Site (when sent) says
 * same-origin (or none: typed by the user), and its Origin (when sent) is the public origin. A
 * form posted from a page whose Referrer-Policy is no-referrer (the sign-in link's) carries
 * `Origin: null`: accepted only when Sec-Fetch-Site vouches for the same origin.
 */
export function assertSameOrigin(request: FastifyRequest, publicOrigin: string): void {
  const site = request.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') throw csrfRefused('The request came from another site.');
  const origin = request.headers.origin;
  if (origin === 'null' && site === 'same-origin') return;
  if (origin !== undefined && origin !== new URL(publicOrigin).origin) throw csrfRefused(`The request's Origin is not ${new URL(publicOrigin).origin}.`);
}

/** Every state-changing request made with a session: same origin, and the session's X-CSRF-Token. */
export function assertCsrf(request: FastifyRequest, csrfToken: string, publicOrigin: string): void {
  if (SAFE_METHODS.has(request.method)) return;
  assertSameOrigin(request, publicOrigin);
  const header = request.headers[CSRF_HEADER];
  const given = Buffer.from(typeof header === 'string' ? header : '');
  const expected = Buffer.from(csrfToken);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw csrfRefused('Send the csrfToken of GET /me as the X-CSRF-Token header.');
  }
}
