import { backoffMs, type BackoffOptions } from '@herald/backoff';
import type { Logger } from '@herald/logging';
import { currentTraceHeaders, withTraceHeaders } from '@herald/telemetry';
import { isBackingServiceDown } from '@herald/errors';
import { countMessage, forgetLag, recordLag } from './metrics.js';
import { DEAD_LETTER_HEADERS } from './topics.js';
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
  /**
   * The group and the topics it reads, as `consumers` in topics.ts declares them. A message that
   * fails every attempt goes to its topic's dead-letter topic.
   */
  consumer: { group: string; topics: readonly { name: string; deadLetter: string }[] };
  /** Called once per message; the offset is committed only after it resolves. */
  handle: (message: IncomingMessage) => Promise<void>;
  /** Attempts before the message goes to the dead-letter topic (default 5). */
  maxAttempts?: number;
  /** Partitions handled at once (each still one message at a time, in order). Default 1. */
  concurrency?: number;
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

/** What kafkajs says, over and over, while a broker is down or restarting. */
const brokerOutage = /ECONNREFUSED|ECONNRESET|No broker available|Connection error|Connection timeout|Failed to connect|Restarting the consumer|Broker not connected|NOT_COORDINATOR|coordinator is not available|leadership election|KafkaJSNumberOfRetriesExceeded|The group is rebalancing/i;
/** While the outage lasts, a reminder this often; the rest goes to debug. */
const OUTAGE_REMINDER_MS = 60_000;

/**
 * kafkajs logs every failed connection attempt as an error: a broker restart would flood the log.
 * The first sign of an outage is one warning, reminded once a minute while it lasts; recovery
 * (a consumer joining its group again, a publish going through) is logged once and re-arms it.
 */
function outageAwareLog(logger: Logger) {
  let outageSince: number | undefined;
  let remindedAt = 0;
  return {
    log(namespace: string, level: logLevel, message: string, fields: Record<string, unknown>): void {
      const text = `${message} ${String(fields.stack ?? fields.error ?? '')}`;
      if (level <= logLevel.WARN && brokerOutage.test(text)) {
        const now = Date.now();
        if (outageSince === undefined || now - remindedAt >= OUTAGE_REMINDER_MS) {
          logger.warn({ kafka: namespace, error: fields.error, outageSeconds: outageSince === undefined ? 0 : Math.round((now - outageSince) / 1000) }, 'Kafka unreachable; reconnecting with backoff');
          outageSince ??= now;
          remindedAt = now;
        } else {
          logger.debug({ kafka: namespace, ...fields }, message);
        }
        return;
      }
      const method = level === logLevel.ERROR ? 'error' : level === logLevel.WARN ? 'warn' : 'debug';
      logger[method]({ kafka: namespace, ...fields }, message);
    },
    recovered(): void {
      if (outageSince === undefined) return;
      logger.info({ outageSeconds: Math.round((Date.now() - outageSince) / 1000) }, 'Kafka reachable again');
      outageSince = undefined;
    },
  };
}

/**
 * The longest wait between two tries to reach the brokers again, for the client's own retries and
 * for restarting a consumer that crashed, however long the outage lasted (kafkajs's default, 30 s,
 * left consumers retrying 8-25 s after the broker was back). Kafka's Java client caps its
 * reconnect backoff (`reconnect.backoff.max.ms`) at the same second.
 *
 * What remains after Kafka's return is the group coordinator's wait: kafkajs starts a consumer
 * whose connection closed again under a new member id (it has no static membership), so the
 * coordinator holds the group's rebalance until the old member's session ends, up to
 * KAFKA_SESSION_TIMEOUT_MS after the broker came back.
 */
const RECONNECT_CAP_MS = 1_000;

/** Before starting a consumer again after it crashed: up to 0.1 s, 0.2 s, ... 1 s (full jitter). */
const CONSUMER_RESTART_BACKOFF: BackoffOptions = { baseMs: 100, capMs: RECONNECT_CAP_MS };
/** A message whose handler found PostgreSQL, Redis or Kafka down waits up to 0.2 s, 0.4 s, ... 5 s (full jitter), as long as the outage lasts. */
const OUTAGE_BACKOFF: BackoffOptions = { baseMs: 200, capMs: 5_000 };
/**
 * A message whose handler failed otherwise is tried again after 0.1 s, 0.2 s, 0.4 s, ... (equal
 * jitter: its attempts are counted before the dead letter, so they must span some time).
 */
const HANDLER_BACKOFF: BackoffOptions = { baseMs: 100, capMs: 2_000, jitter: 'equal' };

export function createKafkaBus({ brokers, clientId, logger, topicPrefix = '', sessionTimeoutMs = 30_000 }: KafkaBusOptions): Bus {
  const outage = outageAwareLog(logger);
  const kafka = new Kafka({
    clientId,
    brokers,
    logLevel: logLevel.WARN,
    retry: { initialRetryTime: 100, maxRetryTime: RECONNECT_CAP_MS, retries: 8 },
    logCreator: () => ({ namespace, level, log }) => {
      const { message, ...fields } = log;
      outage.log(namespace, level, message, fields);
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
    const connected = await connectedProducer();
    await connected.sendBatch({
      acks: -1,
      topicMessages: [...byTopic].map(([topic, list]) => ({
        topic: topicPrefix + topic,
        messages: list.map((message) => ({
          key: message.key,
          value: message.value,
          headers: { ...trace, ...message.headers },
        })),
      })),
    }).catch((err: unknown) => {
      // A producer kafkajs has given up on stays disconnected: the next publish makes a new one.
      if (/disconnected/i.test((err as Error).message) && producer !== undefined) {
        producer = undefined;
        void connected.disconnect().catch(() => undefined);
      }
      throw err;
    });
    outage.recovered();
  };

  return {
    publish,

    async subscribe({ consumer: { group: groupId, topics }, handle, maxAttempts = 5, concurrency = 1 }) {
      const deadLetters = new Map(topics.map((declared) => [declared.name, declared.deadLetter]));
      let current: Consumer | undefined;
      let stopped = false;
      let crashes = 0;
      let restartTimer: NodeJS.Timeout | undefined;
      const startLater = (): void => {
        crashes += 1;
        restartTimer = setTimeout(() => {
          if (stopped) return;
          start().catch((err: unknown) => {
            logger.warn({ err, groupId }, 'Kafka consumer could not start; retrying');
            startLater();
          });
        }, backoffMs(crashes, CONSUMER_RESTART_BACKOFF));
      };
      const start = async (): Promise<void> => {
        const consumer = kafka.consumer({
          groupId: topicPrefix + groupId,
          allowAutoTopicCreation: false,
          sessionTimeout: sessionTimeoutMs,
          heartbeatInterval: Math.max(500, Math.floor(sessionTimeoutMs / 10)),

        });
        current = consumer;
        consumers.add(consumer);
        consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
          crashes = 0;
          outage.recovered();
          // Its partitions may have moved: their lag is reported by whoever holds them now.
          forgetLag(groupId);
          const partitions = Object.values(payload.memberAssignment).reduce((sum, assigned) => sum + assigned.length, 0);
          logger.info({ groupId, partitions }, 'consumer joined its group');
        });
        // kafkajs restarts a consumer itself after a retriable failure, but one that crashed on any
        // other error stays stopped for good, and its partitions with it: start a new one, backing off.
        consumer.on(consumer.events.CRASH, ({ payload }) => {
          if (payload.restart || stopped) return;
          logger.warn({ err: payload.error, groupId }, 'Kafka consumer crashed; starting a new one');
          consumers.delete(consumer);
          void consumer.disconnect().catch(() => undefined);
          startLater();
        });
        consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) =>
          recordLag(groupId, payload.topic.slice(topicPrefix.length), payload.partition, Number(payload.offsetLag)),
        );
        await consumer.connect();
        // Every consumer here is a work queue: a group with no committed offset yet starts at the
        // oldest retained message, so nothing published before its first commit is skipped (a
        // worker that died mid-way through the group's first message left no offset behind).
        // Handlers are idempotent, so a new group replaying retained history is harmless.
        await consumer.subscribe({ topics: topics.map((declared) => topicPrefix + declared.name), fromBeginning: true });
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
            for (let attempt = 1, outageRetries = 0; ; attempt += 1) {
              try {
                await withTraceHeaders(headers, () => handle(incoming));
                countMessage(groupId, incoming.topic, 'handled');
                return;
              } catch (err) {
                if (isBackingServiceDown(err)) {
                  // The database or a broker is restarting: the message is fine, so it waits (in
                  // order, heartbeating) rather than use up its attempts and land in the dead letters.
                  attempt -= 1;
                  outageRetries += 1;
                  await new Promise((resolve) => setTimeout(resolve, backoffMs(outageRetries, OUTAGE_BACKOFF)));
                  await heartbeat();
                  continue;
                }
                if (attempt >= maxAttempts) {
                  // A poison message must not block its partition: park it and move on.
                  logger.error({ err, topic, partition, offset: message.offset }, 'message dead-lettered');
                  await publish([
                    {
                      topic: deadLetters.get(incoming.topic) as string,
                      key: incoming.key,
                      value: incoming.value,
                      headers: {
                        ...headers,
                        [DEAD_LETTER_HEADERS.source]: `${incoming.topic}/${partition}/${message.offset}`,
                        [DEAD_LETTER_HEADERS.reason]: String((err as Error).message).slice(0, 500),
                      },
                    },
                  ]);
                  countMessage(groupId, incoming.topic, 'dead_lettered');
                  return;
                }
                await new Promise((resolve) => setTimeout(resolve, backoffMs(attempt, HANDLER_BACKOFF)));
                // Still alive: without this, a long run of retries would cost the partition.
                await heartbeat();
              }
            }
          },
        });
      };
      await start();
      return {
        async stop() {
          stopped = true;
          clearTimeout(restartTimer);
          forgetLag(groupId);
          if (!current) return;
          consumers.delete(current);
          await current.disconnect();
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
