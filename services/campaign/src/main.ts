import { consumers, createKafkaBus, outboxMigrations, startOutboxRelay } from '@herald/bus';
import { drainOnSignal, loadConfig } from '@herald/config';
import { createPool, migrate } from '@herald/db';
import { createClient, startGrpcServer } from '@herald/grpc';
import { createLogger } from '@herald/logging';
import { AccountServiceClient } from '@herald/proto/herald/account/v1/account';
import { AudienceServiceClient } from '@herald/proto/herald/audience/v1/audience';
import { SegmentServiceClient } from '@herald/proto/herald/audience/v1/segments';
import { CampaignServiceService } from '@herald/proto/herald/campaign/v1/campaign';
import { TemplateServiceService } from '@herald/proto/herald/campaign/v1/templates';

import { readConfig } from './config.js';
import { engagementEvents } from './engagement.js';
import { fanout } from './fanout.js';
import { campaignHandlers } from './handlers.js';
import { templateHandlers } from './templates.js';
import { deliveryResults } from './results.js';
import { startCampaignTimers } from './timers.js';
import { migrationsDir, SCHEMA } from './store.js';

const config = loadConfig(readConfig);
const logger = createLogger('campaign');
const pool = createPool({ url: config.databaseUrl, schema: SCHEMA, max: config.databasePoolSize, namespace: config.namespace, applicationName: 'herald-campaign', logger });
await migrate(pool, SCHEMA, [outboxMigrations, { track: 'service', dir: migrationsDir }], logger);
const bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: `${config.kafkaClientId}-campaign`, logger, topicPrefix: config.namespace, sessionTimeoutMs: config.kafkaSessionTimeoutMs });
const relay = startOutboxRelay({ pool, schema: SCHEMA, bus, logger });
const audience = createClient(AudienceServiceClient, config.audienceGrpcUrl);
const segments = createClient(SegmentServiceClient, config.audienceGrpcUrl);
const account = createClient(AccountServiceClient, config.accountGrpcUrl);
const deps = { pool, account, audience, segments, logger };
const subscriptions = await Promise.all([
  bus.subscribe({
    consumer: consumers.campaignFanout,
    handle: fanout({ pool, bus, audience, logger, batchSize: config.fanoutBatchSize, ttlSeconds: config.pushTtlSeconds }),
  }),
  bus.subscribe({
    consumer: consumers.campaignResults,
    handle: deliveryResults(pool),
  }),
  // Keyed by subscriber, so a campaign's reports spread over every partition: work several at once.
  bus.subscribe({
    consumer: consumers.campaignEngagement,
    concurrency: 4,
    handle: engagementEvents(pool),
  }),
]);
const server = await startGrpcServer(config.grpcHost, config.grpcPort, [
  [CampaignServiceService, campaignHandlers(deps, { batchSize: config.fanoutBatchSize, ttlSeconds: config.pushTtlSeconds })],
  [TemplateServiceService, templateHandlers(pool, logger)],
]);
const timers = startCampaignTimers({ ...deps, pollMs: config.timerPollMs });
logger.info({ port: server.port }, 'campaign service serving');

drainOnSignal(
  async () => {
    await server.drain(config.shutdownGraceMs);
    await timers.stop();
    await Promise.all(subscriptions.map((subscription) => subscription.stop()));
    await relay.stop();
    await bus.close();
    audience.close();
    segments.close();
    account.close();
    await pool.end();
  },
  config.shutdownGraceMs,
  (message, err) => logger.info({ err }, message),
);
