import { pieces, type Env } from '@herald/config';

export function readConfig(env: Env) {
  return {
    ...pieces.redis(env),
    ...pieces.shutdown(env),
    host: env.string('HOST', '127.0.0.1'),
    port: env.port('PORT', 8080),
    /** Where clients reach Herald; used in links (documentation, pollUrl, upgradeUrl). */
    publicOrigin: env.url('PUBLIC_ORIGIN', ['http:', 'https:'], 'http://localhost:8080'),
    upgradeUrl: env.url('UPGRADE_URL', ['http:', 'https:'], 'https://herald.dev/pricing'),
    accountGrpcUrl: env.string('ACCOUNT_GRPC_URL', '127.0.0.1:50051'),
    audienceGrpcUrl: env.string('AUDIENCE_GRPC_URL', '127.0.0.1:50052'),
    grpcDeadlineMs: env.integer('GRPC_DEADLINE_MS', 5_000, { min: 100, max: 60_000 }),
    /** How long a verified key is trusted before it is checked again (bounds revocation delay). */
    keyCacheTtlMs: env.integer('KEY_CACHE_TTL_MS', 5_000, { min: 0, max: 60_000 }),
    /**
     * While Redis is unreachable each replica enforces limit / this number on its own, so the
     * fleet as a whole stays within the plan's limit. Set it to the replica count.
     */
    /** The rate-limit window; the plans' limits are per minute, so only tests shorten it. */
    rateLimitWindowMs: env.integer('RATE_LIMIT_WINDOW_MS', 60_000, { min: 1_000, max: 3_600_000 }),
    rateLimitFallbackReplicas: env.integer('RATE_LIMIT_FALLBACK_REPLICAS', 2, { min: 1, max: 1_000 }),
    bodyLimitBytes: env.integer('BODY_LIMIT_BYTES', 1_048_576, { min: 1_024, max: 16_777_216 }),
    requestTimeoutMs: env.integer('REQUEST_TIMEOUT_MS', 70_000, { min: 1_000, max: 600_000 }),
  };
}

export type GatewayConfig = ReturnType<typeof readConfig>;
