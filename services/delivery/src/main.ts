import { readFileSync } from 'node:fs';

import { consumers, createKafkaBus, outboxMigrations, startOutboxRelay } from '@herald/bus';
import { drainOnSignal, loadConfig } from '@herald/config';
import { createPool, migrate } from '@herald/db';
import { EngagementTokens } from '@herald/domain';
import { createClient, startGrpcServer } from '@herald/grpc';
import { createLogger } from '@herald/logging';
import { AccountServiceClient } from '@herald/proto/herald/account/v1/account';
import { DeliveryServiceService } from '@herald/proto/herald/delivery/v1/delivery';
import { PushClient, VapidSigner } from '@herald/webpush';

import { readConfig } from './config.js';
import { deliveryHandlers } from './handlers.js';
import { deliveryJobs } from './jobs.js';
import { startRetryWorker } from './retries.js';
import { Sender } from './sender.js';
import { migrationsDir, SCHEMA } from './store.js';
import { VapidKeyCache } from './vapid.js';

const config = loadConfig(readConfig);
const logger = createLogger('delivery');
const pool = createPool({ url: config.databaseUrl, schema: SCHEMA, max: config.databasePoolSize, namespace: config.namespace, applicationName: 'herald-delivery', logger });
await migrate(pool, SCHEMA, [outboxMigrations, { track: 'service', dir: migrationsDir }], logger);
const bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: `${config.kafkaClientId}-delivery`, logger, topicPrefix: config.namespace, sessionTimeoutMs: config.kafkaSessionTimeoutMs });
const relay = startOutboxRelay({ pool, schema: SCHEMA, bus, logger });
const account = createClient(AccountServiceClient, config.accountGrpcUrl);
const client = new PushClient({
  maxConcurrentStreams: config.streamsPerOrigin,
  requestTimeoutMs: config.pushTimeoutMs,
  ...(config.pushCaFile ? { tls: { ca: readFileSync(config.pushCaFile, 'utf8') } } : {}),
});
const sender = new Sender(client, new VapidSigner(), new EngagementTokens(config.engagementTokenSecret), { baseMs: config.retryBaseMs, capMs: config.retryCapMs }, logger);
const vapidKeys = new VapidKeyCache(account);
const jobs = await bus.subscribe({
  consumer: consumers.delivery,
  concurrency: config.jobConcurrency,
  // A job fails as a whole only when something of Herald's own is down (the account service, the
  // database); wait that out (about a minute) rather than dead-letter a batch of recipients.
  maxAttempts: 30,
  handle: deliveryJobs({ pool, sender, vapidKeys, maxAttempts: config.maxAttempts, pushTimeoutMs: config.pushTimeoutMs }),
});
const retries = startRetryWorker({ pool, sender, vapidKeys, logger, maxAttempts: config.maxAttempts, pollMs: config.retryPollMs, pushTimeoutMs: config.pushTimeoutMs });
const server = await startGrpcServer(config.grpcHost, config.grpcPort, [[DeliveryServiceService, deliveryHandlers(pool, logger)]]);
logger.info({ port: server.port }, 'delivery service serving');

drainOnSignal(
  async () => {
    await server.drain(config.shutdownGraceMs);
    await jobs.stop();
    await retries.stop();
    await client.close();
    await relay.stop();
    await bus.close();
    account.close();
    await pool.end();
  },
  config.shutdownGraceMs,
  (message, err) => logger.info({ err }, message),
);
