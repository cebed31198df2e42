import { AccountEvent } from '@herald/proto/herald/account/v1/events';
import { AudienceEvent } from '@herald/proto/herald/audience/v1/events';
import { CampaignEvent } from '@herald/proto/herald/campaign/v1/events';
import { DecisionEvent } from '@herald/proto/herald/decision/v1/events';
import { DeliveryJob, DeliveryResult } from '@herald/proto/herald/delivery/v1/delivery';
import { EngagementEvent } from '@herald/proto/herald/engagement/v1/events';

/**
 * Herald's Kafka contract: every topic, what it carries, who writes it and who reads it. Services
 * name topics and consumer groups only through this module; `deploy/kafka/topics.txt` (what
 * `deploy/infra.sh` creates) is generated from it (`npm run generate`) and a test fails when the
 * two disagree. A new topic is one entry here.
 *
 * Every topic has a dead-letter topic, `<name>.dlq`, with the same message type: a message a
 * consumer could not handle after its attempts (or a push that failed for good) is parked there
 * as it was, with the reason in the `herald-dlq-*` headers.
 */

/** The protobuf codec ts-proto generates for a message type. */
export interface MessageCodec<T> {
  encode(message: T): { finish(): Uint8Array };
  decode(input: Uint8Array): T;
}

/** A topic as its readers and tools see it. */
export interface TopicInfo {
  /** The name on the wire, before the namespace (HERALD_NAMESPACE) is put in front. */
  name: string;
  partitions: number;
  /** Fully qualified protobuf type of every message (and of its dead letters). */
  messageType: string;
  /** What the partition key is: messages with one key keep their order. */
  key: string;
  /** The component that writes it (the registry's name). */
  producer: string;
  /** Its dead-letter topic. */
  deadLetter: string;
  deadLetterPartitions: number;
}

export interface TopicDeclaration<T> extends TopicInfo {
  message: MessageCodec<T>;
}

export interface ConsumerDeclaration {
  /** The consumer group, before the namespace. */
  group: string;
  /** The component whose replicas form the group. */
  component: string;
  topics: readonly TopicInfo[];
}

const DEAD_LETTER_PARTITIONS = 3;

/** Headers every dead letter carries besides the original message's own. */
export const DEAD_LETTER_HEADERS = {
  /** Where the message came from: `<topic>/<partition>/<offset>`, or the component that gave up on it. */
  source: 'herald-dlq-source',
  /** Why it was parked: the handler's last error, or the final push outcome. */
  reason: 'herald-dlq-reason',
} as const;

function topic<T>(declaration: Omit<TopicDeclaration<T>, 'deadLetter' | 'deadLetterPartitions'>): TopicDeclaration<T> {
  return { ...declaration, deadLetter: `${declaration.name}.dlq`, deadLetterPartitions: DEAD_LETTER_PARTITIONS };
}

export const topics = {
  accountEvents: topic({
    name: 'herald.account.events',
    partitions: 12,
    messageType: 'herald.account.v1.AccountEvent',
    message: AccountEvent,
    key: 'workspace id',
    producer: 'account',
  }),
  audienceEvents: topic({
    name: 'herald.audience.events',
    partitions: 12,
    messageType: 'herald.audience.v1.AudienceEvent',
    message: AudienceEvent,
    key: 'workspace id',
    producer: 'audience',
  }),
  campaignEvents: topic({
    name: 'herald.campaign.events',
    partitions: 12,
    messageType: 'herald.campaign.v1.CampaignEvent',
    message: CampaignEvent,
    key: 'notification id',
    producer: 'campaign',
  }),
  decisionEvents: topic({
    name: 'herald.decision.events',
    partitions: 12,
    messageType: 'herald.decision.v1.DecisionEvent',
    message: DecisionEvent,
    key: 'question id',
    producer: 'decision',
  }),
  deliveryJobs: topic({
    name: 'herald.delivery.jobs',
    partitions: 24,
    messageType: 'herald.delivery.v1.DeliveryJob',
    message: DeliveryJob,
    key: 'job id (notification id and batch)',
    producer: 'campaign',
  }),
  deliveryResults: topic({
    name: 'herald.delivery.results',
    partitions: 12,
    messageType: 'herald.delivery.v1.DeliveryResult',
    message: DeliveryResult,
    key: 'notification id',
    producer: 'delivery',
  }),
  engagementEvents: topic({
    name: 'herald.engagement.events',
    partitions: 12,
    messageType: 'herald.engagement.v1.EngagementEvent',
    message: EngagementEvent,
    key: 'subscriber id',
    producer: 'gateway',
  }),
} as const;

export const consumers = {
  /** Turns a queued notification into delivery jobs, a batch of recipients each. */
  campaignFanout: { group: 'herald-campaign-fanout', component: 'campaign', topics: [topics.campaignEvents] },
  /** Keeps each notification's delivery counts. */
  campaignResults: { group: 'herald-campaign-results', component: 'campaign', topics: [topics.deliveryResults] },
  /** Counts each notification's impressions, clicks and dismissals, once per subscriber each. */
  campaignEngagement: { group: 'herald-campaign-engagement', component: 'campaign', topics: [topics.engagementEvents] },
  /** Records each opened question's deliveries (per channel and target), which the decision service then makes once each. */
  questionDeliveries: { group: 'herald-decision-deliveries', component: 'decision', topics: [topics.decisionEvents] },
  /** The delivery fleet: encrypts and pushes each job's recipients. */
  delivery: { group: 'herald-delivery', component: 'delivery', topics: [topics.deliveryJobs] },
  /** Removes subscribers whose push service says they are gone. */
  audienceExpiry: { group: 'herald-audience', component: 'audience', topics: [topics.deliveryResults] },
  /** Deletes the devices of members removed from their workspace. */
  audienceMembers: { group: 'herald-audience-members', component: 'audience', topics: [topics.accountEvents] },
  /** Starts flow runs on subscriptions and unsubscriptions (and ends the runs of those who leave). */
  flowTriggers: { group: 'herald-flow-triggers', component: 'flow', topics: [topics.audienceEvents] },
  /** Starts flow runs on impressions, clicks and dismissals of pushes. */
  flowEngagementTriggers: { group: 'herald-flow-engagement', component: 'flow', topics: [topics.engagementEvents] },
} as const satisfies Record<string, ConsumerDeclaration>;

/**
 * The Redis pub/sub channels, beside the topics and under the same namespace (HERALD_NAMESPACE):
 * stacks sharing one Redis server do not hear each other's wake-ups.
 */
export const redisChannels = {
  /**
   * A question's wake-up, one channel per question (the prefix, then its id): the decision service
   * publishes once an answer or a cancellation is committed, and every gateway replica holding a
   * caller waiting on that question is subscribed to it.
   */
  answered: { prefix: 'herald:answered:', producer: 'decision', consumers: ['gateway'] },
  /**
   * A workspace's question changes, one channel per workspace (the prefix, then its id): the
   * decision service publishes a QuestionChange once a question is opened, answered or cancelled,
   * and every gateway replica holding a live stream of that workspace (GET /decisions/stream) is
   * subscribed to it.
   */
  questions: { prefix: 'herald:questions:', producer: 'decision', consumers: ['gateway'] },
} as const;

/** What a workspace's questions channel carries (JSON): which question changed, and how. */
export interface QuestionChange {
  id: string;
  kind: 'ask' | 'decision';
  change: 'opened' | 'settled';
}

/** The channel of `workspaceId`'s question changes in `namespace`. */
export const questionsChannel = (namespace: string, workspaceId: string): string => `${namespace}${redisChannels.questions.prefix}${workspaceId}`;

/** The workspace a message on `channel` (a questionsChannel of `namespace`) is about, or undefined for another channel. */
export const workspaceOfQuestionsChannel = (namespace: string, channel: string): string | undefined => {
  const prefix = questionsChannel(namespace, '');
  return channel.startsWith(prefix) ? channel.slice(prefix.length) : undefined;
};

/** The channel of `questionId`'s wake-up in `namespace`. */
export const answerChannel = (namespace: string, questionId: string): string => `${namespace}${redisChannels.answered.prefix}${questionId}`;

/** The question a wake-up on `channel` (an answerChannel of `namespace`) is about. */
export const questionOfAnswerChannel = (namespace: string, channel: string): string => channel.slice(answerChannel(namespace, '').length);

/** The groups a send passes through after the campaign service queued it: its fan-out, then the delivery fleet. */
export const SEND_PIPELINE: readonly ConsumerDeclaration[] = [consumers.campaignFanout, consumers.delivery];

/** The groups an opened question passes through: its deliveries recorded, then (web push) the send pipeline. */
export const QUESTION_PIPELINE: readonly ConsumerDeclaration[] = [consumers.questionDeliveries, ...SEND_PIPELINE];

export const allTopics: readonly TopicInfo[] = Object.values(topics);

/** The dead-letter topic of `name`. */
export function deadLetterOf(name: string): string {
  const declared = allTopics.find((declaration) => declaration.name === name);
  if (!declared) throw new Error(`${name} is not a declared topic (packages/bus/src/topics.ts)`);
  return declared.deadLetter;
}

/** deploy/kafka/topics.txt: what `deploy/infra.sh` creates, "<name> <partitions>" per line. */
export function renderTopicsFile(): string {
  const lines = allTopics.flatMap((declaration) => [`${declaration.name} ${declaration.partitions}`, `${declaration.deadLetter} ${declaration.deadLetterPartitions}`]);
  return [
    '# Generated from packages/bus/src/topics.ts by `npm run generate`; do not edit.',
    '# Kafka topics of the project: one per line, "<name> <partitions>".',
    '# `deploy/infra.sh up` creates any topic missing here (replication factor 1).',
    '# It never deletes topics nor changes partition counts of existing ones.',
    ...lines,
    '',
  ].join('\n');
}
