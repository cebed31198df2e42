import { pieces, type Env } from '@herald/config';

export function readConfig(env: Env) {
  return {
    ...pieces.database(env),
    ...pieces.namespace(env),
    ...pieces.kafka(env),
    ...pieces.grpcServer(env, 50057),
    ...pieces.shutdown(env),
    campaignGrpcUrl: env.string('CAMPAIGN_GRPC_URL', '127.0.0.1:50053'),
    /** Longest sleep of the run loop between looks for due runs (NOTIFY wakes it sooner). */
    runPollMs: env.integer('FLOW_RUN_POLL_MS', 1_000, { min: 50, max: 60_000 }),
    /** Due runs claimed at once (one claim statement; their outcomes recorded together, every 200 ms while sends are slow). */
    runBatchSize: env.integer('FLOW_RUN_BATCH_SIZE', 500, { min: 1, max: 5_000 }),
    /**
     * How long a claim of due runs holds: a process that dies leaves its claimed runs to another
     * this long after it last extended the claim (a batch still being worked extends it every third of this).
     */
    runLeaseMs: env.integer('FLOW_RUN_LEASE_MS', 30_000, { min: 1_000, max: 600_000 }),
    /** Runs in work at once in this process (across its batches). */
    runConcurrency: env.integer('FLOW_RUN_CONCURRENCY', 2_000, { min: 1, max: 20_000 }),
    /**
     * Partitions of each trigger topic handled at once (each still in order: a workspace's events
     * stay in order). One at a time made a burst of subscriptions wait in a single line.
     */
    triggerConcurrency: env.integer('FLOW_TRIGGER_CONCURRENCY', 4, { min: 1, max: 64 }),
    /** Finished runs (completed, exited, cancelled, failed) are deleted this many days after they finished. */
    runRetentionDays: env.integer('FLOW_RUN_RETENTION_DAYS', 30, { min: 1, max: 3_650 }),
    /** How often the run loop looks for finished runs past the retention. */
    runPruneEveryMs: env.integer('FLOW_RUN_PRUNE_EVERY_MS', 60_000, { min: 100, max: 86_400_000 }),
  };
}

export type FlowConfig = ReturnType<typeof readConfig>;
