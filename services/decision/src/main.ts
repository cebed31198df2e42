import { drainOnSignal, loadConfig } from '@herald/config';
import { createPool, migrate } from '@herald/db';
import { createClient, startGrpcServer } from '@herald/grpc';
import { answerChannel } from '@herald/bus';
import { createLogger } from '@herald/logging';
import { AccountServiceClient } from '@herald/proto/herald/account/v1/account';
import { DecisionServiceService } from '@herald/proto/herald/decision/v1/decision';
import { dispatcherSettings, startWebhookDispatcher, webhookMigrations } from '@herald/webhooks';
import { Redis } from 'ioredis';

import { readConfig } from './config.js';
import { decisionHandlers, type WakeWaiters } from './handlers.js';
import { migrationsDir, SCHEMA } from './store.js';
import { AnswerTokens } from './tokens.js';
import { startExpiryReports } from './webhooks.js';

const config = loadConfig(readConfig);
const logger = createLogger('decision');
const tokens = new AnswerTokens(config.answerTokenSecret);
const pool = createPool({ url: config.databaseUrl, schema: SCHEMA, max: config.databasePoolSize, namespace: config.namespace, applicationName: 'herald-decision', logger });
await migrate(pool, SCHEMA, [{ track: 'service', dir: migrationsDir }, webhookMigrations], logger);
const account = createClient(AccountServiceClient, config.accountGrpcUrl);
const dispatcher = startWebhookDispatcher({
  pool,
  schema: SCHEMA,
  logger,
  secrets: async (workspaceId) => (await account.getWebhookSecrets({ workspaceId })).secrets,
  ...dispatcherSettings(config.webhooks),
});
const expiryReports = startExpiryReports(pool, config.expirySweepMs, logger);
// No offline queue: while Redis is down a wake-up fails at once (the answer is stored; waiting
// gateways re-read their questions when Redis is back) instead of holding up the answer.
const redis = new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 2_000 });
redis.on('error', () => undefined);
const wakeWaiters: WakeWaiters = async (questionId) => {
  // The message is when it was sent: the gateways measure the wake-up's latency from it.
  await redis.publish(answerChannel(config.namespace, questionId), String(Date.now())).catch((err: unknown) => logger.warn({ err, questionId }, 'could not publish an answer wake-up'));
};
const server = await startGrpcServer(config.grpcHost, config.grpcPort, [[DecisionServiceService, decisionHandlers(pool, tokens, config, wakeWaiters, logger)]]);
logger.info({ port: server.port }, 'decision service serving');

drainOnSignal(
  async () => {
    await server.drain(config.shutdownGraceMs);
    await Promise.all([dispatcher.stop(), expiryReports.stop()]);
    account.close();
    redis.disconnect();
    await pool.end();
  },
  config.shutdownGraceMs,
  (message, err) => logger.info({ err }, message),
);
