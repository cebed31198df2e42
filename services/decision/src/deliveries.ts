import { backoffMs } from '@herald/backoff';
import { consumers, EVENT_ID_HEADER, handleOnce, type IncomingMessage } from '@herald/bus';
import type { Pool } from '@herald/db';
import { answerActionUrl, answerPageUrl } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import type { PromiseClient } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import type { CampaignServiceClient } from '@herald/proto/herald/campaign/v1/campaign';
import { DecisionEvent, type QuestionDelivery } from '@herald/proto/herald/decision/v1/events';
import { retryWhileUnreachable, startWorkLoop, type WorkLoop } from '@herald/workloop';

import * as store from './store.js';
import type { AnswerTokens } from './tokens.js';

/**
 * A question's deliveries. Its QuestionOpened event (written with the question) names them, one
 * per (channel, target); the consumer records each as a row of question_deliveries, and the
 * delivery loop (the shared work loop) makes each once: while its channel is unavailable it is
 * tried again with backoff, and a call repeated after a lost reply carries the same idempotency
 * key, so the channel does not deliver twice. A question no longer open is not delivered.
 */

/** The web push of a question: through the campaign service, to the approver devices it addresses. */
export const WEB_PUSH: QuestionDelivery = { channel: 'web_push', target: 'approver_devices' };

/** The deliveries a newly opened question gets: web push, unless the workspace answers in the terminal; and its Slack default channel when Slack is connected. */
export const deliveriesOf = (mode: string, slackChannel: string | undefined): QuestionDelivery[] => [
  ...(mode === 'terminal' ? [] : [WEB_PUSH]),
  ...(slackChannel === undefined ? [] : [{ channel: 'slack', target: `channel:${slackChannel}` }]),
];

/** Records the deliveries of each QuestionOpened, once per event. */
export function recordOpenedDeliveries(pool: Pool) {
  return async (message: IncomingMessage): Promise<void> => {
    const event = DecisionEvent.decode(message.value);
    if (event.kind?.$case !== 'questionOpened') return;
    const opened = event.kind.value;
    const eventId = message.headers[EVENT_ID_HEADER] ?? event.eventId;
    await handleOnce(pool, store.SCHEMA, consumers.questionDeliveries.group, eventId, (tx) => store.insertDeliveries(tx, opened.questionId, opened.deliveries));
  };
}

export interface DeliveryDeps {
  pool: Pool;
  logger: Logger;
  campaign: PromiseClient<CampaignServiceClient>;
  tokens: AnswerTokens;
  publicOrigin: string;
  retry: { baseMs: number; capMs: number };
  pollMs: number;
  /** How long a claimed delivery is held: longer than a call with its deadline. */
  leaseMs: number;
  /** The Slack channel (slack.ts). */
  slack: { deliver(question: store.QuestionRow, target: string): Promise<store.DeliveryOutcome> };
}

/** Makes the recorded deliveries, each once; see the module's comment. */
export function startDeliveries({ pool, logger, campaign, tokens, publicOrigin, retry, pollMs, leaseMs, slack }: DeliveryDeps): WorkLoop {
  /** The push of a question: the answer page as its URL, Yes/No buttons for a confirm question (the service worker posts the action to answerUrl). */
  async function webPush(question: store.QuestionRow, key: string): Promise<store.DeliveryOutcome> {
    const token = tokens.sign(question.id);
    const target = question.target ?? { subscriberIds: [], externalIds: question.external_id ? [question.external_id] : [], tags: [] };
    const response = await campaign.queueQuestion({
      workspaceId: question.workspace_id,
      siteId: question.site_id ?? '',
      content: {
        title: question.agent_name ? `${question.agent_name} asks` : 'A question for you',
        body: question.question,
        url: answerPageUrl(publicOrigin, token),
        iconUrl: '',
        imageUrl: '',
        actions: question.type === 'confirm' ? [{ action: 'yes', title: 'Yes' }, { action: 'no', title: 'No' }] : [],
        answerUrl: answerActionUrl(publicOrigin, token),
      },
      // The campaign service narrows any targeting to approver devices (verified external ids).
      targeting: { ...target, segmentId: '', verifiedOnly: true },
      idempotencyKey: key,
    });
    return { state: 'delivered', result: response.notificationId, reached: Number(response.targeted) };
  }

  async function deliver(row: store.ClaimedDelivery): Promise<store.DeliveryOutcome> {
    const question = await store.findQuestion(pool, row.question_id, {});
    if (!question || question.status !== 'pending' || question.expired) return { state: 'skipped', error: `the question is ${question?.expired ? 'expired' : (question?.status ?? 'gone')}` };
    // A channel of a newer version (during a rolling deploy): left to a replica that knows it.
    if (row.channel !== WEB_PUSH.channel && row.channel !== 'slack') return { state: 'pending', error: `this replica does not know the channel ${row.channel}`, retryAt: new Date(Date.now() + retry.capMs) };
    try {
      if (row.channel === 'slack') return await slack.deliver(question, row.target);
      return await webPush(question, `question:${row.question_id}:${row.channel}:${row.target}`);
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      // A refusal that trying again will not change (a bad request): failed for good.
      if (err instanceof HeraldError && err.status < 500 && err.code !== 'rate_limited') return { state: 'failed', error };
      logger.warn({ err, questionId: row.question_id, channel: row.channel, attempt: row.attempts }, 'a question delivery failed; it is tried again after a backoff');
      return { state: 'pending', error, retryAt: new Date(Date.now() + backoffMs(row.attempts, retry)) };
    }
  }

  return startWorkLoop<store.ClaimedDelivery>({
    name: 'question deliveries',
    pool,
    logger,
    table: store.DUE_DELIVERIES,
    channel: store.DELIVERIES_CHANNEL,
    leaseMs,
    batchSize: 1,
    concurrency: 32,
    pollMs,
    async work([row], token) {
      if (!row) return;
      const outcome = await deliver(row);
      // A delivery made before PostgreSQL went away is recorded once it is back, not made again after the lease.
      await retryWhileUnreachable(() => store.recordDelivery(pool, row, token, outcome), leaseMs);
      if (outcome.state === 'delivered') logger.info({ questionId: row.question_id, channel: row.channel, result: outcome.result, reached: outcome.reached }, 'question delivered');
    },
  });
}
