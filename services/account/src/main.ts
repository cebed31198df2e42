import { createKafkaBus, outboxMigrations, startOutboxRelay } from '@herald/bus';
import { drainOnSignal, loadConfig } from '@herald/config';
import { createPool, migrate } from '@herald/db';
import { startGrpcServer } from '@herald/grpc';
import { createLogger } from '@herald/logging';
import { createMailSender } from '@herald/mail';
import { AccountServiceService } from '@herald/proto/herald/account/v1/account';

import { readConfig } from './config.js';
import { accountHandlers } from './handlers.js';
import { migrationsDir, SCHEMA } from './store.js';

const config = loadConfig(readConfig);
const logger = createLogger('account');
const pool = createPool({ url: config.databaseUrl, schema: SCHEMA, max: config.databasePoolSize, namespace: config.namespace, applicationName: 'herald-account', logger });
await migrate(pool, SCHEMA, [outboxMigrations, { track: 'service', dir: migrationsDir }], logger);
const bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: `${config.kafkaClientId}-account`, logger, topicPrefix: config.namespace, sessionTimeoutMs: config.kafkaSessionTimeoutMs });
const relay = startOutboxRelay({ pool, schema: SCHEMA, bus, logger });
const mail = createMailSender(config);
const server = await startGrpcServer(config.grpcHost, config.grpcPort, [
  [AccountServiceService, accountHandlers(pool, logger, config, mail)],
]);
logger.info({ port: server.port }, 'account service serving');

drainOnSignal(
  async () => {
    await server.drain(config.shutdownGraceMs);
    await relay.stop();
    await bus.close();
    mail.close();
    await pool.end();
  },
  config.shutdownGraceMs,
  (message, err) => logger.info({ err }, message),
);
