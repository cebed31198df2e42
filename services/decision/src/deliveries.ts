import { backoffMs } from '@herald/backoff';
import { consumers, EVENT_ID_HEADER, handleOnce, type IncomingMessage } from '@herald/bus';
import { withTransaction, type Pool, type Queryable } from '@herald/db';
import { answerActionUrl, answerPageUrl, consoleQuestionUrl, type Approver } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import type { PromiseClient } from '@herald/grpc';
import type { Logger } from '@herald/logging';
import type { Targeting } from '@herald/proto/herald/audience/v1/audience';
import type { CampaignServiceClient } from '@herald/proto/herald/campaign/v1/campaign';
import { DecisionEvent, type QuestionDelivery } from '@herald/proto/herald/decision/v1/events';
import { retryWhileUnreachable, startWorkLoop, type WorkLoop } from '@herald/workloop';

import { countDelivery } from './metrics.js';
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

/** Web push to one subscriber's approver devices (an approver named by externalId). */
const SUBSCRIBER_TARGET = 'subscriber:';

/** Web push to one console member's devices (those they turned notifications on in). */
const MEMBER_TARGET = 'member:';

/**
 * Where approvers are reached: a subscriber by web push to its devices, a console member by web
 * push to theirs (they answer in the console), an email address by email, a Slack user by a
 * direct message. Keys answer on their own surface (the API), so they get no delivery.
 */
export function deliveriesTo(approvers: readonly Approver[]): QuestionDelivery[] {
  return approvers.flatMap((approver): QuestionDelivery[] => {
    if (approver.kind === 'subscriber') return [{ channel: 'web_push', target: `${SUBSCRIBER_TARGET}${approver.id}` }];
    if (approver.kind === 'member') return [{ channel: 'web_push', target: `${MEMBER_TARGET}${approver.id}` }];
    if (approver.kind === 'email') return [{ channel: 'email', target: approver.id }];
    if (approver.kind === 'slack') return [{ channel: 'slack', target: `user:${approver.id}` }];
    return [];
  });
}

/** The workspace's channels a question without approvers also goes to: Slack's default channel, when Slack is connected. */
export interface WorkspaceChannels {
  slackChannel?: string;
}

/**
 * The deliveries a newly opened question gets: to each of its approvers; without approvers, web
 * push to the approver devices it addresses (unless the workspace answers in the terminal) and
 * the workspace's Slack channel.
 */
/** The workspace's own channels a question (or an escalation step) naming no approvers goes to: its Slack channel when connected. */
export async function workspaceChannelsFor(db: Queryable, workspaceId: string, approvers: readonly Approver[]): Promise<WorkspaceChannels> {
  if (approvers.length > 0) return {};
  return { slackChannel: (await store.findSlackConnection(db, workspaceId))?.default_channel };
}

export const deliveriesOf = (question: Pick<store.QuestionRow, 'mode' | 'approvers'>, workspace: WorkspaceChannels): QuestionDelivery[] => {
  if (question.approvers.length > 0) return deliveriesTo(question.approvers);
  return [...(question.mode === 'terminal' ? [] : [WEB_PUSH]), ...(workspace.slackChannel === undefined ? [] : [{ channel: 'slack', target: `channel:${workspace.slackChannel}` }])];
};

/** One way of reaching people (web push, Slack, email): makes one delivery of a question to one target. */
export interface Channel {
  /** `key` is the delivery's idempotency key, `question:<id>:<channel>:<target>`: the same on every attempt. */
  deliver(question: store.QuestionRow, target: string, key: string): Promise<store.DeliveryOutcome>;
}

/** Records the deliveries and the escalation steps of each QuestionOpened, once per event. */
export function recordOpenedDeliveries(pool: Pool) {
  return async (message: IncomingMessage): Promise<void> => {
    const event = DecisionEvent.decode(message.value);
    if (event.kind?.$case !== 'questionOpened') return;
    const opened = event.kind.value;
    const eventId = message.headers[EVENT_ID_HEADER] ?? event.eventId;
    await handleOnce(pool, store.SCHEMA, consumers.questionDeliveries.group, eventId, async (tx) => {
      await store.insertDeliveries(tx, opened.questionId, opened.deliveries);
      await store.insertEscalations(tx, opened.questionId);
    });
  };
}

/**
 * Web push through the campaign service, as an ordinary notification with its counters: the
 * answer page as its URL, Yes/No buttons for a confirm question (the service worker posts the
 * action to answerUrl). A push to one person's devices carries a link naming them. A push to a
 * console member's devices opens the question in the console's inbox instead, where the member
 * answers signed in (no answer link: the session says who answers).
 */
export function webPushChannel(campaign: PromiseClient<CampaignServiceClient>, tokens: AnswerTokens, publicOrigin: string): Channel {
  /** Where the push goes and what tapping it does: a member's devices open the inbox; anyone else's, the answer page. */
  function addressing(question: store.QuestionRow, target: string): { targeting: Targeting; url: string; answerUrl: string } {
    if (target.startsWith(MEMBER_TARGET)) {
      const memberIds = [target.slice(MEMBER_TARGET.length)];
      return { targeting: { subscriberIds: [], externalIds: [], tags: [], segmentId: '', verifiedOnly: true, memberIds }, url: consoleQuestionUrl(publicOrigin, question.id), answerUrl: '' };
    }
    const subscriber = target.startsWith(SUBSCRIBER_TARGET) ? target.slice(SUBSCRIBER_TARGET.length) : undefined;
    const addressed = question.target ?? { subscriberIds: [], externalIds: question.external_id ? [question.external_id] : [], tags: [] };
    const targeting = subscriber === undefined ? addressed : { subscriberIds: [], externalIds: [subscriber], tags: [] };
    // A push that reaches exactly one person's devices names them in its link.
    const only = targeting.subscriberIds.length === 0 && targeting.tags.length === 0 && targeting.externalIds.length === 1 ? targeting.externalIds[0] : undefined;
    const token = tokens.sign(question.id, only === undefined ? undefined : { kind: 'subscriber', id: only });
    // The campaign service narrows any targeting to approver devices (verified external ids).
    return { targeting: { ...targeting, segmentId: '', verifiedOnly: true, memberIds: [] }, url: answerPageUrl(publicOrigin, token), answerUrl: answerActionUrl(publicOrigin, token) };
  }

  return {
    async deliver(question, target, key) {
      const { targeting, url, answerUrl } = addressing(question, target);
      const response = await campaign.queueQuestion({
        workspaceId: question.workspace_id,
        siteId: question.site_id ?? '',
        content: {
          title: question.agent_name ? `${question.agent_name} asks` : 'A question for you',
          body: question.question,
          url,
          iconUrl: '',
          imageUrl: '',
          // Yes/No answer from the notification through answerUrl; a member answers in the console.
          actions: question.type === 'confirm' && answerUrl !== '' ? [{ action: 'yes', title: 'Yes' }, { action: 'no', title: 'No' }] : [],
          answerUrl,
        },
        targeting,
        idempotencyKey: key,
      });
      return { state: 'delivered', result: response.notificationId, reached: Number(response.targeted) };
    },
  };
}

export interface DeliveryDeps {
  pool: Pool;
  logger: Logger;
  /** The channels this replica delivers on, by name (web_push, slack, email). */
  channels: Partial<Record<string, Channel>>;
  retry: { baseMs: number; capMs: number };
  pollMs: number;
  /** How long a claimed delivery is held: longer than a call with its deadline. */
  leaseMs: number;
}

/** Makes the recorded deliveries, each once; see the module's comment. */
export function startDeliveries({ pool, logger, channels, retry, pollMs, leaseMs }: DeliveryDeps): WorkLoop {
  async function deliver(row: store.ClaimedDelivery): Promise<store.DeliveryOutcome> {
    const question = await store.findQuestion(pool, row.question_id, {});
    if (!question || question.status !== 'pending' || question.expired) return { state: 'skipped', error: `the question is ${question?.expired ? 'expired' : (question?.status ?? 'gone')}` };
    // A channel of a newer version, or one this replica is not set up for: left to a replica that knows it.
    const channel = channels[row.channel];
    if (!channel) return { state: 'pending', error: `this replica does not know the channel ${row.channel}`, retryAt: new Date(Date.now() + retry.capMs) };
    try {
      return await channel.deliver(question, row.target, `question:${row.question_id}:${row.channel}:${row.target}`);
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
      await retryWhileUnreachable(() => withTransaction(pool, (tx) => store.recordDelivery(tx, row, token, outcome)), leaseMs);
      countDelivery(row.channel, outcome.state === 'pending' ? 'retried' : outcome.state);
      if (outcome.state === 'delivered') logger.info({ questionId: row.question_id, channel: row.channel, result: outcome.result, reached: outcome.reached }, 'question delivered');
    },
  });
}
