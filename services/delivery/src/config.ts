import { pieces, type Env } from '@herald/config';

export function readConfig(env: Env) {
  return {
    ...pieces.database(env),
    ...pieces.namespace(env),
    ...pieces.kafka(env),
    ...pieces.grpcServer(env, 50054),
    ...pieces.shutdown(env),
    accountGrpcUrl: env.string('ACCOUNT_GRPC_URL', '127.0.0.1:50051'),
    /** Signs each push's engagement token (the gateway checks it); at least 32 bytes, shared with the gateway. */
    engagementTokenSecret: env.string('ENGAGEMENT_TOKEN_SECRET'),
    /** Concurrent HTTP/2 streams per push-service origin, per replica. */
    streamsPerOrigin: env.integer('PUSH_STREAMS_PER_ORIGIN', 100, { min: 1, max: 1_000 }),
    /** Delivery jobs (Kafka partitions) a replica works on at once. */
    jobConcurrency: env.integer('DELIVERY_JOB_CONCURRENCY', 4, { min: 1, max: 64 }),
    pushTimeoutMs: env.integer('PUSH_TIMEOUT_MS', 10_000, { min: 100, max: 120_000 }),
    /** Attempts per push before it is failed and dead-lettered. */
    maxAttempts: env.integer('PUSH_MAX_ATTEMPTS', 5, { min: 1, max: 20 }),
    /** Extra CA certificate (PEM file) to trust, e.g. a local test push service. */
    pushCaFile: env.optionalString('PUSH_CA_FILE'),
    retryPollMs: env.integer('RETRY_POLL_MS', 250, { min: 10, max: 60_000 }),
    /** Exponential backoff with equal jitter: the first retry waits half of this to all of it, doubling up to the cap. */
    retryBaseMs: env.integer('PUSH_RETRY_BASE_MS', 1_000, { min: 1, max: 600_000 }),
    retryCapMs: env.integer('PUSH_RETRY_CAP_MS', 600_000, { min: 1, max: 86_400_000 }),
  };
}

export type DeliveryConfig = ReturnType<typeof readConfig>;
