import { pieces, type Env } from '@herald/config';
import { mailConfig } from '@herald/mail';
import { webhookSettings } from '@herald/webhooks';

import { CHANNEL_SECRET_KEYS_PATTERN } from './sealed-secrets.js';

export function readConfig(env: Env) {
  return {
    ...pieces.database(env),
    // Wake-ups of callers waiting on a question, published once its answer is committed.
    ...pieces.redis(env),
    // Webhooks and expiries queued in the shared tables are worked only by this namespace's replicas.
    ...pieces.namespace(env),
    // QuestionOpened events: written to the outbox with the question, consumed to record its deliveries.
    ...pieces.kafka(env),
    ...pieces.grpcServer(env, 50056),
    ...pieces.shutdown(env),
    ...webhookSettings(env),
    // The email channel: questions mailed to approver addresses (SMTP_URL, MAIL_FROM).
    ...mailConfig(env),
    /** The account service holds each workspace's webhook signing secrets. */
    accountGrpcUrl: env.string('ACCOUNT_GRPC_URL', '127.0.0.1:50051'),
    /** Questions are pushed through the campaign service (QueueQuestion), as ordinary notifications. */
    campaignGrpcUrl: env.string('CAMPAIGN_GRPC_URL', '127.0.0.1:50053'),
    /** Reachability counts the addressed person's active browser subscriptions there. */
    audienceGrpcUrl: env.string('AUDIENCE_GRPC_URL', '127.0.0.1:50052'),
    /** Where the answer pages are served (the gateway's PUBLIC_ORIGIN): pushes link to them. */
    publicOrigin: env.url('PUBLIC_ORIGIN', ['http:', 'https:'], 'http://localhost:8080'),
    /** A delivery that failed for now (its channel unavailable) is tried again after a backoff from this, doubling up to the cap. */
    deliveryRetryBaseMs: env.integer('QUESTION_DELIVERY_RETRY_BASE_MS', 1_000, { min: 10, max: 600_000 }),
    deliveryRetryCapMs: env.integer('QUESTION_DELIVERY_RETRY_CAP_MS', 60_000, { min: 10, max: 3_600_000 }),
    /** How long a claimed delivery is held: a replica that dies mid-delivery leaves it to another this long after (its repeated call replays, not repeats). Longer than a call's deadline. */
    deliveryLeaseMs: env.integer('QUESTION_DELIVERY_LEASE_MS', 30_000, { min: 1_000, max: 600_000 }),
    /** The longest the delivery loop sleeps between looks for due deliveries (a NOTIFY wakes it sooner). */
    deliveryPollMs: env.integer('QUESTION_DELIVERY_POLL_MS', 1_000, { min: 50, max: 60_000 }),
    /** The HMAC key of answer-page tokens; changing it invalidates every link already sent. */
    answerTokenSecret: env.string('ANSWER_TOKEN_SECRET'),
    /** Seal the workspaces' channel secrets (a Slack bot token and signing secret): "kid1:<base64 of 32 bytes>,kid0:<...>"; the first seals, any opens. Empty: no channel can be connected. */
    channelSecretKeys: env.secretMatching('CHANNEL_SECRET_KEYS', CHANNEL_SECRET_KEYS_PATTERN, 'key-id:<base64 of 32 bytes>, comma-separated', ''),
    /** Slack's Web API (tests point it at the testkit's Slack peer). */
    slackApiUrl: env.url('SLACK_API_URL', ['http:', 'https:'], 'https://slack.com/api/'),
    /** How long a POST /ask question stays open (the spec's 600 s; tests shorten it). */
    askLifetimeSeconds: env.integer('ASK_LIFETIME_SECONDS', 600, { min: 1, max: 86_400 }),
    /** The longest the expiry sweep sleeps (it wakes when the next question expires): bounds how late another replica's question's expiry is recorded and reported. */
    expirySweepMs: env.integer('EXPIRY_SWEEP_MS', 1_000, { min: 50, max: 600_000 }),
  };
}

export type DecisionConfig = ReturnType<typeof readConfig>;
