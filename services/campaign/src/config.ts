import { pieces, type Env } from '@herald/config';

export function readConfig(env: Env) {
  return {
    ...pieces.database(env),
    ...pieces.namespace(env),
    ...pieces.kafka(env),
    ...pieces.grpcServer(env, 50053),
    ...pieces.shutdown(env),
    audienceGrpcUrl: env.string('AUDIENCE_GRPC_URL', '127.0.0.1:50052'),
    accountGrpcUrl: env.string('ACCOUNT_GRPC_URL', '127.0.0.1:50051'),
    /** Longest sleep of the campaign timer loop between looks for due campaigns (NOTIFY wakes it sooner). */
    timerPollMs: env.integer('CAMPAIGN_TIMER_POLL_MS', 1_000, { min: 50, max: 60_000 }),
    /** Recipients per delivery job (one Kafka message). */
    fanoutBatchSize: env.integer('FANOUT_BATCH_SIZE', 500, { min: 1, max: 1_000 }),
    /** How long a push waits at the push service for the browser (RFC 8030 TTL). */
    pushTtlSeconds: env.integer('PUSH_TTL_SECONDS', 86_400, { min: 0, max: 2_419_200 }),
  };
}

export type CampaignConfig = ReturnType<typeof readConfig>;
