import type { Logger } from '@herald/logging';
import { currentTraceHeaders, withTraceHeaders } from '@herald/telemetry';
import { Kafka, logLevel, Partitioners, type Consumer, type Producer } from 'kafkajs';

/**
 * The one place Herald touches the Kafka client. Everything else sees `Bus`, so the client can
 * be swapped without touching a service.
 */

export interface OutgoingMessage {
  topic: string;
  /** Partition key: messages with one key keep their order. */
  key: string;
  value: Buffer;
  headers?: Record<string, string>;
}

export interface IncomingMessage {
  topic: string;
  partition: number;
  offset: string;
  key: string;
  value: Buffer;
  headers: Record<string, string>;
  /** Long handlers call this now and then, so the group does not think the consumer died. */
  heartbeat(): Promise<void>;
}

export interface SubscribeOptions {
  groupId: string;
  topics: string[];
  /** Called once per message; the offset is committed only after it resolves. */
  handle: (message: IncomingMessage) => Promise<void>;
  /** Attempts before the message goes to the dead-letter topic (default 5). */
  maxAttempts?: number;
  /** Partitions handled at once (each still one message at a time, in order). Default 1. */
  concurrency?: number;
  /** Where poison messages go after the last attempt. */
  deadLetterTopic: string;
}

export interface Subscription {
  stop(): Promise<void>;
}

export interface Bus {
  publish(messages: OutgoingMessage[]): Promise<void>;
  subscribe(options: SubscribeOptions): Promise<Subscription>;
  close(): Promise<void>;
}

export const EVENT_ID_HEADER = 'herald-event-id';

export interface KafkaBusOptions {
  brokers: string[];
  clientId: string;
  logger: Logger;
  /**
   * Put before every topic and consumer group name on the wire (never seen by callers): one
   * Kafka cluster then holds isolated namespaces, e.g. one per test stack.
   */
  topicPrefix?: string;
  /** How long a silent consumer keeps its partitions before the group moves them elsewhere. */
  sessionTimeoutMs?: number;
}

export function createKafkaBus({ brokers, clientId, logger, topicPrefix = '', sessionTimeoutMs = 30_000 }: KafkaBusOptions): Bus {
  const kafka = new Kafka({
    clientId,
    brokers,
    logLevel: logLevel.WARN,
    retry: { initialRetryTime: 100, retries: 8 },
    logCreator: () => ({ namespace, level, log }) => {
      const { message, ...fields } = log;
      const method = level === logLevel.ERROR ? 'error' : level === logLevel.WARN ? 'warn' : 'debug';
      logger[method]({ kafka: namespace, ...fields }, message);
    },
  });
  let producer: Promise<Producer> | undefined;
  const consumers = new Set<Consumer>();

  const connectedProducer = (): Promise<Producer> => {
    producer ??= (async () => {
      const created = kafka.producer({
        idempotent: true,
        maxInFlightRequests: 1,
        createPartitioner: Partitioners.DefaultPartitioner,
      });
      await created.connect();
      return created;
    })().catch((err: unknown) => {
      producer = undefined;
      throw err;
    });
    return producer;
  };

  const publish = async (messages: OutgoingMessage[]): Promise<void> => {
    if (messages.length === 0) return;
    const byTopic = new Map<string, OutgoingMessage[]>();
    for (const message of messages) {
      const list = byTopic.get(message.topic) ?? [];
      list.push(message);
      byTopic.set(message.topic, list);
    }
    const trace = currentTraceHeaders();
    await (await connectedProducer()).sendBatch({
      acks: -1,
      topicMessages: [...byTopic].map(([topic, list]) => ({
        topic: topicPrefix + topic,
        messages: list.map((message) => ({
          key: message.key,
          value: message.value,
          headers: { ...trace, ...message.headers },
        })),
      })),
    });
  };

  return {
    publish,

    async subscribe({ groupId, topics, handle, maxAttempts = 5, deadLetterTopic, concurrency = 1 }) {
      const consumer = kafka.consumer({
        groupId: topicPrefix + groupId,
        allowAutoTopicCreation: false,
        sessionTimeout: sessionTimeoutMs,
        heartbeatInterval: Math.max(500, Math.floor(sessionTimeoutMs / 10)),
      });
      consumers.add(consumer);
      await consumer.connect();
      // Every consumer here is a work queue: a group with no committed offset yet starts at the
      // oldest retained message, so nothing published before its first commit is skipped (a
      // worker that died mid-way through the group's first message left no offset behind).
      // Handlers are idempotent, so a new group replaying retained history is harmless.
      await consumer.subscribe({ topics: topics.map((topic) => topicPrefix + topic), fromBeginning: true });
      await consumer.run({
        autoCommit: true,
        partitionsConsumedConcurrently: concurrency,
        eachMessage: async ({ topic, partition, message, heartbeat }) => {
          const headers: Record<string, string> = {};
          for (const [name, value] of Object.entries(message.headers ?? {})) {
            if (value !== undefined) headers[name] = value.toString();
          }
          const incoming: IncomingMessage = {
            topic: topic.slice(topicPrefix.length),
            partition,
            offset: message.offset,
            key: message.key?.toString() ?? '',
            value: message.value ?? Buffer.alloc(0),
            headers,
            heartbeat,
          };
          for (let attempt = 1; ; attempt += 1) {
            try {
              await withTraceHeaders(headers, () => handle(incoming));
              return;
            } catch (err) {
              if (attempt >= maxAttempts) {
                // A poison message must not block its partition: park it and move on.
                logger.error({ err, topic, partition, offset: message.offset }, 'message dead-lettered');
                await publish([
                  {
                    topic: deadLetterTopic,
                    key: incoming.key,
                    value: incoming.value,
                    headers: {
                      ...headers,
                      'herald-dlq-source': `${incoming.topic}/${partition}/${message.offset}`,
                      'herald-dlq-error': String((err as Error).message).slice(0, 500),
                    },
                  },
                ]);
                return;
              }
              await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 50 * 2 ** attempt)));
              // Still alive: without this, a long run of retries would cost the partition.
              await heartbeat();
            }
          }
        },
      });
      return {
        async stop() {
          consumers.delete(consumer);
          await consumer.disconnect();
        },
      };
    },

    async close() {
      await Promise.all([...consumers].map((consumer) => consumer.disconnect()));
      consumers.clear();
      if (producer) await (await producer.catch(() => undefined))?.disconnect();
      producer = undefined;
    },
  };
}
