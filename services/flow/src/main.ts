import { consumers, createKafkaBus, outboxMigrations } from '@herald/bus';
import { drainOnSignal, loadConfig } from '@herald/config';
import { createPool, migrate } from '@herald/db';
import { createClient, startGrpcServer } from '@herald/grpc';
import { createLogger } from '@herald/logging';
import { CampaignServiceClient } from '@herald/proto/herald/campaign/v1/campaign';
import { TemplateServiceClient } from '@herald/proto/herald/campaign/v1/templates';
import { FlowServiceService } from '@herald/proto/herald/flow/v1/flow';

import { readConfig } from './config.js';
import { flowHandlers } from './handlers.js';
import { startRunLoop } from './runs.js';
import { migrationsDir, SCHEMA } from './store.js';
import { audienceTriggers, engagementTriggers } from './triggers.js';

const config = loadConfig(readConfig);
const logger = createLogger('flow');
const pool = createPool({ url: config.databaseUrl, schema: SCHEMA, max: config.databasePoolSize, namespace: config.namespace, applicationName: 'herald-flow', logger });
// The outbox migrations bring processed_events, which the trigger consumers dedupe with.
await migrate(pool, SCHEMA, [outboxMigrations, { track: 'service', dir: migrationsDir }], logger);
const bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: `${config.kafkaClientId}-flow`, logger, topicPrefix: config.namespace, sessionTimeoutMs: config.kafkaSessionTimeoutMs });
const campaign = createClient(CampaignServiceClient, config.campaignGrpcUrl);
const templates = createClient(TemplateServiceClient, config.campaignGrpcUrl);
// Timers first: due runs need no Kafka, and joining a consumer group can take a session timeout.
const runs = startRunLoop({ pool, logger, campaign, pollMs: config.runPollMs, leaseMs: config.runLeaseMs, batchSize: config.runBatchSize, concurrency: config.runConcurrency, retentionDays: config.runRetentionDays, pruneEveryMs: config.runPruneEveryMs });
const subscriptions = await Promise.all([
  bus.subscribe({ consumer: consumers.flowTriggers, concurrency: config.triggerConcurrency, handle: audienceTriggers(pool, logger) }),
  bus.subscribe({ consumer: consumers.flowEngagementTriggers, concurrency: config.triggerConcurrency, handle: engagementTriggers(pool, logger) }),
]);
const server = await startGrpcServer(config.grpcHost, config.grpcPort, [[FlowServiceService, flowHandlers({ pool, logger, campaign, templates })]]);
logger.info({ port: server.port }, 'flow service serving');

drainOnSignal(
  async () => {
    await server.drain(config.shutdownGraceMs);
    await Promise.all(subscriptions.map((subscription) => subscription.stop()));
    await runs.stop();
    await bus.close();
    campaign.close();
    templates.close();
    await pool.end();
  },
  config.shutdownGraceMs,
  (message, err) => logger.info({ err }, message),
);
