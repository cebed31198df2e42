import { drainOnSignal, loadConfig } from '@herald/config';
import { createPool, migrate } from '@herald/db';
import { createClient, startGrpcServer } from '@herald/grpc';
import { answerChannel, consumers, createKafkaBus, outboxMigrations, type QuestionChange, questionsChannel, startOutboxRelay } from '@herald/bus';
import { createLogger } from '@herald/logging';
import { createMailSender } from '@herald/mail';
import { AccountServiceClient } from '@herald/proto/herald/account/v1/account';
import { AudienceServiceClient } from '@herald/proto/herald/audience/v1/audience';
import { CampaignServiceClient } from '@herald/proto/herald/campaign/v1/campaign';
import { DecisionServiceService } from '@herald/proto/herald/decision/v1/decision';
import { SlackServiceService } from '@herald/proto/herald/decision/v1/slack';
import { dispatcherSettings, startWebhookDispatcher, webhookMigrations } from '@herald/webhooks';
import { Redis } from 'ioredis';

import { readConfig } from './config.js';
import { emailChannel } from './email.js';
import { recordOpenedDeliveries, startDeliveries, webPushChannel } from './deliveries.js';
import { createAnswering, type WakeWaiters } from './answering.js';
import { startEscalations } from './escalations.js';
import { decisionHandlers } from './handlers.js';
import { SecretBox } from './sealed-secrets.js';
import { slackChannel, slackHandlers, startSlackUpdates } from './slack.js';
import { migrationsDir, SCHEMA } from './store.js';
import { AnswerTokens } from './tokens.js';
import { startExpirySweep } from './expiry.js';

const config = loadConfig(readConfig);
const logger = createLogger('decision');
const tokens = new AnswerTokens(config.answerTokenSecret);
const pool = createPool({ url: config.databaseUrl, schema: SCHEMA, max: config.databasePoolSize, namespace: config.namespace, applicationName: 'herald-decision', logger });
await migrate(pool, SCHEMA, [{ track: 'service', dir: migrationsDir }, webhookMigrations, outboxMigrations], logger);
const account = createClient(AccountServiceClient, config.accountGrpcUrl);
const audience = createClient(AudienceServiceClient, config.audienceGrpcUrl);
const campaign = createClient(CampaignServiceClient, config.campaignGrpcUrl);
const bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: `${config.kafkaClientId}-decision`, logger, topicPrefix: config.namespace, sessionTimeoutMs: config.kafkaSessionTimeoutMs });
const mail = createMailSender(config);
const relay = startOutboxRelay({ pool, schema: SCHEMA, bus, logger });
const slack = { pool, logger, secrets: new SecretBox(config.channelSecretKeys), apiUrl: config.slackApiUrl };
const deliveries = startDeliveries({
  pool,
  logger,
  channels: {
    web_push: webPushChannel(campaign, tokens, config.publicOrigin),
    email: emailChannel({ mail, tokens, publicOrigin: config.publicOrigin }),
    slack: slackChannel(slack),
  },
  retry: { baseMs: config.deliveryRetryBaseMs, capMs: config.deliveryRetryCapMs },
  pollMs: config.deliveryPollMs,
  leaseMs: config.deliveryLeaseMs,
});
const slackUpdates = startSlackUpdates({
  ...slack,
  retry: { baseMs: config.deliveryRetryBaseMs, capMs: config.deliveryRetryCapMs },
  pollMs: config.deliveryPollMs,
  leaseMs: config.deliveryLeaseMs,
});
const dispatcher = startWebhookDispatcher({
  pool,
  schema: SCHEMA,
  logger,
  secrets: async (workspaceId) => (await account.getWebhookSecrets({ workspaceId })).secrets,
  ...dispatcherSettings(config.webhooks),
});
const expirySweep = startExpirySweep(pool, config.expirySweepMs, logger);
const escalations = startEscalations({ pool, logger, pollMs: config.deliveryPollMs });
// No offline queue: while Redis is down a wake-up fails at once (the answer is stored; waiting
// gateways re-read their questions when Redis is back) instead of holding up the answer.
const redis = new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 2_000 });
redis.on('error', () => undefined);
const wakeWaiters: WakeWaiters = async (question, change) => {
  const questionId = question.id;
  const announced: QuestionChange = { id: questionId, kind: question.kind, change };
  // Every change is announced to the workspace's live streams (GET /decisions/stream).
  const announcing = redis.publish(questionsChannel(config.namespace, question.workspace_id), JSON.stringify(announced)).catch((err: unknown) => logger.warn({ err, questionId }, 'could not publish a question change'));
  if (change === 'settled') {
    // The message is when it was sent: the gateways measure the wake-up's latency from it.
    await redis.publish(answerChannel(config.namespace, questionId), String(Date.now())).catch((err: unknown) => logger.warn({ err, questionId }, 'could not publish an answer wake-up'));
  }
  await announcing;
};
// One way to answer, whatever the surface (the API, the answer page, email links, Slack).
const answering = createAnswering(pool, wakeWaiters, logger);
const server = await startGrpcServer(config.grpcHost, config.grpcPort, [
  [DecisionServiceService, decisionHandlers(pool, tokens, config, wakeWaiters, answering, logger, { account, audience })],
  [SlackServiceService, slackHandlers({ ...slack, answering })],
]);
logger.info({ port: server.port }, 'decision service serving');
// Joining the consumer group can wait for a rebalance; serving does not wait for it (events stay in Kafka meanwhile).
const opened = bus.subscribe({ consumer: consumers.questionDeliveries, concurrency: 4, handle: recordOpenedDeliveries(pool) }).catch((err: unknown) => {
  logger.fatal({ err }, 'cannot consume decision events');
  process.exit(1);
});

drainOnSignal(
  async () => {
    await Promise.all([server.drain(config.shutdownGraceMs), opened.then((subscription) => subscription.stop())]);
    await Promise.all([dispatcher.stop(), expirySweep.stop(), escalations.stop(), deliveries.stop(), slackUpdates.stop(), relay.stop()]);
    await bus.close();
    account.close();
    audience.close();
    campaign.close();
    mail.close();
    redis.disconnect();
    await pool.end();
  },
  config.shutdownGraceMs,
  (message, err) => logger.info({ err }, message),
);
