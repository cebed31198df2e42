import { pieces, type Env } from '@herald/config';

export function readConfig(env: Env) {
  return {
    ...pieces.database(env),
    ...pieces.namespace(env),
    ...pieces.kafka(env),
    ...pieces.grpcServer(env, 50051),
    ...pieces.shutdown(env),
    /** Where Herald is reached from outside; hosted subscribe pages live under it. */
    publicOrigin: env.url('PUBLIC_ORIGIN', ['http:', 'https:'], 'http://localhost:8080'),
    /** The VAPID `sub` claim push services may use to contact the operator (RFC 8292 section 2.1). */
    vapidSubject: env.url('VAPID_SUBJECT', ['mailto:', 'https:'], 'mailto:push-operator@herald.dev'),
    /** How long an enrollment link (POST /enroll) can be used; tests shorten it. */
    enrollmentTtlSeconds: env.integer('ENROLLMENT_TTL_SECONDS', 900, { min: 1, max: 86_400 }),
  };
}

export type AccountConfig = ReturnType<typeof readConfig>;
