import { pieces, type Env } from '@herald/config';
import { mailConfig } from '@herald/mail';

/** Sign-in links and sessions; the admin CLI reads them too (the links it prints). */
export function memberSettings(env: Env) {
  return {
    /** Where Herald is reached from outside; hosted subscribe pages and sign-in links live under it. */
    publicOrigin: env.url('PUBLIC_ORIGIN', ['http:', 'https:'], 'http://localhost:8080'),
    /** How long a mailed (or printed) sign-in link can be used; tests shorten it. */
    signInLinkTtlSeconds: env.integer('SIGN_IN_LINK_TTL_SECONDS', 900, { min: 1, max: 7 * 86_400 }),
    /** A member's session ends after this long unused... */
    sessionIdleSeconds: env.integer('SESSION_IDLE_SECONDS', 12 * 3_600, { min: 1, max: 30 * 86_400 }),
    /** ...and this long after sign-in whatever happens. */
    sessionMaxSeconds: env.integer('SESSION_MAX_SECONDS', 7 * 86_400, { min: 1, max: 90 * 86_400 }),
    /** How long a passkey challenge (registration or sign-in options) can be answered; tests shorten it. */
    passkeyChallengeTtlSeconds: env.integer('PASSKEY_CHALLENGE_TTL_SECONDS', 300, { min: 1, max: 3_600 }),
  };
}

export function readConfig(env: Env) {
  return {
    ...pieces.database(env),
    ...pieces.namespace(env),
    ...pieces.kafka(env),
    ...pieces.grpcServer(env, 50051),
    ...pieces.shutdown(env),
    /** The VAPID `sub` claim push services may use to contact the operator (RFC 8292 section 2.1). */
    vapidSubject: env.url('VAPID_SUBJECT', ['mailto:', 'https:'], 'mailto:push-operator@herald.dev'),
    /** How long an enrollment link (POST /enroll) can be used; tests shorten it. */
    enrollmentTtlSeconds: env.integer('ENROLLMENT_TTL_SECONDS', 900, { min: 1, max: 86_400 }),
    ...memberSettings(env),
    /** Single sign-on: whether an http issuer on loopback is allowed (tests, local development); otherwise https only. */
    ssoAllowLoopbackHttp: env.boolean('SSO_ALLOW_LOOPBACK_HTTP', false),
    ...mailConfig(env),
  };
}

export type AccountConfig = ReturnType<typeof readConfig>;
