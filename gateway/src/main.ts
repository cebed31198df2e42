import { setTimeout as sleep } from 'node:timers/promises';

import { createKafkaBus } from '@herald/bus';
import { drainOnSignal, loadConfig } from '@herald/config';
import { createLogger } from '@herald/logging';
import { Redis } from 'ioredis';

import { buildApp } from './app.js';
import { closeServiceClients, createServiceClients } from './clients.js';
import { readConfig } from './config.js';

const config = loadConfig(readConfig);
const logger = createLogger('gateway');
// No offline queue: while Redis is down a command fails at once and the limiter falls back. The
// timeout only catches a Redis that hangs; a merely busy one is waited for, since every fallback
// decision is one Redis did not see.
const redis = new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 2_000, lazyConnect: true });
redis.on('error', () => undefined);
// Connected before listening: a replica that took requests first would count them in its own
// memory while the shared counts were a moment away. A Redis that is down does not stop the start.
await redis.connect().catch((err: unknown) => logger.warn({ err }, 'Redis unreachable at start: rate limiting per replica until it is back'));
const clients = createServiceClients(config);
// Engagement reports go straight to Kafka (the gateway keeps no database). The producer connects
// before listening, so a new replica's first reports do not wait for it within their deadline; a
// Kafka that is down (or slow) holds the start for at most that deadline, then the first publish retries.
const bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: `${config.kafkaClientId}-gateway`, logger, topicPrefix: config.namespace });
await Promise.race([bus.connectProducer(), sleep(config.engagementPublishTimeoutMs, undefined, { ref: false })]).catch((err: unknown) =>
  logger.warn({ err }, 'Kafka unreachable at start: engagement reports answer 503 until it is back'),
);
const app = await buildApp({ config, clients, redis, bus, logger });
await app.listen({ host: config.host, port: config.port });

drainOnSignal(
  async () => {
    // Stops accepting, answers new requests on kept-alive sockets with 503, waits for in-flight ones.
    await app.close();
    closeServiceClients(clients);
    await bus.close();
    redis.disconnect();
  },
  config.shutdownGraceMs,
  (message, err) => logger.info({ err }, message),
);
