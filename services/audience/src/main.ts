import { createKafkaBus, outboxMigrations, startOutboxRelay } from '@herald/bus';
import { drainOnSignal, loadConfig } from '@herald/config';
import { createPool, migrate } from '@herald/db';
import { startGrpcServer } from '@herald/grpc';
import { createLogger } from '@herald/logging';
import { AudienceServiceService } from '@herald/proto/herald/audience/v1/audience';
import { SegmentServiceService } from '@herald/proto/herald/audience/v1/segments';

import { readConfig } from './config.js';
import { consumeDeliveryResults } from './delivery-results.js';
import { audienceHandlers } from './handlers.js';
import { consumeMemberRemovals } from './member-removals.js';
import { segmentHandlers } from './segments.js';
import { migrationsDir, SCHEMA } from './store.js';

const config = loadConfig(readConfig);
const logger = createLogger('audience');
const pool = createPool({ url: config.databaseUrl, schema: SCHEMA, max: config.databasePoolSize, namespace: config.namespace, applicationName: 'herald-audience', logger });
await migrate(pool, SCHEMA, [outboxMigrations, { track: 'service', dir: migrationsDir }], logger);
const bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: `${config.kafkaClientId}-audience`, logger, topicPrefix: config.namespace, sessionTimeoutMs: config.kafkaSessionTimeoutMs });
const relay = startOutboxRelay({ pool, schema: SCHEMA, bus, logger });
const server = await startGrpcServer(config.grpcHost, config.grpcPort, [
  [AudienceServiceService, audienceHandlers(pool, logger)],
  [SegmentServiceService, segmentHandlers(pool, logger)],
]);
logger.info({ port: server.port }, 'audience service serving');
// Joining the consumer groups can wait for a rebalance; serving does not wait for it. Messages
// published meanwhile are not lost (committed offsets, or the oldest for a new group).
const deliveryResults = consumeDeliveryResults(bus, pool, logger).catch((err: unknown) => {
  logger.fatal({ err }, 'cannot consume delivery results');
  process.exit(1);
});
const memberRemovals = consumeMemberRemovals(bus, pool, logger).catch((err: unknown) => {
  logger.fatal({ err }, 'cannot consume member removals');
  process.exit(1);
});

drainOnSignal(
  async () => {
    // A consumer's stop waits out its fetch long-poll; it needs nothing the RPCs need.
    await Promise.all([
      server.drain(config.shutdownGraceMs),
      ...[deliveryResults, memberRemovals].map((consumer) => consumer.then((subscription) => subscription.stop())),
    ]);
    await relay.stop();
    await bus.close();
    await pool.end();
  },
  config.shutdownGraceMs,
  (message, err) => logger.info({ err }, message),
);
