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

/** The Kafka bus, which can also connect its producer ahead of the first publish. */
export interface KafkaBus extends Bus {
  /** Connects the producer now (the first publish otherwise pays for it, with its own deadline). */
  connectProducer(): Promise<void>;
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
const brokerOutage = /ECONNREFUSED|ECONNRESET|No broker available|Connection error|Connection timeout|Failed to connect|Restarting the consumer|Broker not connected|NOT_COORDINATOR|coordinator is not available|coordinator is loading|leadership election|KafkaJSNumberOfRetriesExceeded|The group is rebalancing/i;
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
 */
export const RECONNECT_CAP_MS = 1_000;

/** Before starting a consumer again after it crashed: up to 0.1 s, 0.2 s, ... 1 s (full jitter). */
const CONSUMER_RESTART_BACKOFF: BackoffOptions = { baseMs: 100, capMs: RECONNECT_CAP_MS };
/**
 * A message whose handler found PostgreSQL, Redis or Kafka down waits up to 0.2 s, 0.4 s, ... 1 s
 * (full jitter), as long as the outage lasts: once the dependency is back, the message is handled
 * within a second (a 5 s cap let a partition idle up to 5 s after Kafka's return).
 */
const OUTAGE_BACKOFF: BackoffOptions = { baseMs: 200, capMs: RECONNECT_CAP_MS };
/** The client's retries (each request's, the producer's, a consumer's before it crashes). */
const CLIENT_RETRY = { initialRetryTime: 100, maxRetryTime: RECONNECT_CAP_MS, retries: 8 };
/**
 * A message whose handler failed otherwise is tried again after 0.1 s, 0.2 s, 0.4 s, ... (equal
 * jitter: its attempts are counted before the dead letter, so they must span some time).
 */
const HANDLER_BACKOFF: BackoffOptions = { baseMs: 100, capMs: 2_000, jitter: 'equal' };
/** Between two looks for the moment a crashed consumer's member can leave its group (see leaveOrphans). */
const LEAVE_LOOK_MS = 250;

/**
 * kafkajs's own cluster client, which its public clients are built on: the one way to send a
 * LeaveGroup for a member other than a running consumer's own (kafkajs has no public call for it,
 * nor static membership, KIP-345, which would make it unneeded). Typed here as far as it is used.
 */
interface GroupClient {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  findGroupCoordinator(request: { groupId: string }): Promise<{
    describeGroups(request: { groupIds: string[] }): Promise<{ groups: Array<{ members: Array<{ memberId: string }> }> }>;
    leaveGroup(request: { groupId: string; memberId: string }): Promise<unknown>;
  }>;
}

function groupClientOf(kafka: Kafka): () => GroupClient {
  const create = Object.getOwnPropertySymbols(kafka).find((symbol) => symbol.description === 'private:Kafka:createCluster');
  const factory = create === undefined ? undefined : (kafka as unknown as Record<symbol, unknown>)[create];
  // A kafkajs upgrade that moved it fails every service at start, not the first recovery.
  if (typeof factory !== 'function') throw new Error('kafkajs has no private:Kafka:createCluster (it was 2.2.4): see leaveOrphans in @herald/bus');
  return () => (factory as (options: Record<string, unknown>) => GroupClient)({});
}

/**
 * Removes from `groupId` the members of consumers of this process that crashed (their connection
 * lost with the broker, or the broker restarted), once the group has a member besides them (the
 * new consumer, waiting in the rebalance; or another replica). Why: kafkajs starts a crashed
 * consumer again under a new member id, and the coordinator, which kept the group's members
 * through the broker's restart, holds the rebalance until every member it knows has rejoined or
 * its session has ended; so a group consumed again only a session timeout (30 s by default) after
 * the broker came back. Why wait for a live member: a group left empty meanwhile would make the
 * new member's join wait the broker's group.initial.rebalance.delay.ms (3 s by default).
 * Looks until `done()` (the new consumer joined: the members are gone, or their sessions ended
 * them; or the subscription stopped). Resolves with the members removed (or already unknown).
 */
async function leaveOrphans(client: () => GroupClient, groupId: string, orphans: ReadonlySet<string>, done: () => boolean): Promise<string[]> {
  while (!done()) {
    // A client of its own each look: one whose connection failed (a broker just back, a busy machine) is not used again.
    const cluster = client();
    try {
      await cluster.connect();
      const coordinator = await cluster.findGroupCoordinator({ groupId });
      const { groups } = await coordinator.describeGroups({ groupIds: [groupId] });
      if ((groups[0]?.members ?? []).some((member) => !orphans.has(member.memberId))) {
        for (const memberId of orphans) {
          await coordinator.leaveGroup({ groupId, memberId }).catch((err: unknown) => {
            if ((err as { type?: string }).type !== 'UNKNOWN_MEMBER_ID') throw err;
          });
        }
        return [...orphans];
      }
    } catch {
      // The coordinator may still be loading the group (a broker just back loads every group's, one partition after another), or the broker not be back: look again.
    } finally {
      await cluster.disconnect().catch(() => undefined);
    }
    await new Promise((resolve) => setTimeout(resolve, LEAVE_LOOK_MS));
  }
  return [];
}

export function createKafkaBus({ brokers, clientId, logger, topicPrefix = '', sessionTimeoutMs = 30_000 }: KafkaBusOptions): KafkaBus {
  const outage = outageAwareLog(logger);
  const kafka = new Kafka({
    clientId,
    brokers,
    logLevel: logLevel.WARN,
    retry: CLIENT_RETRY,
    logCreator: () => ({ namespace, level, log }) => {
      const { message, ...fields } = log;
      outage.log(namespace, level, message, fields);
    },
  });
  let producer: Promise<Producer> | undefined;
  const consumers = new Set<Consumer>();
  const groupClient = groupClientOf(kafka);

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

    async connectProducer() {
      await connectedProducer();
    },

    async subscribe({ consumer: { group: groupId, topics }, handle, maxAttempts = 5, concurrency = 1 }) {
      const deadLetters = new Map(topics.map((declared) => [declared.name, declared.deadLetter]));
      const group = topicPrefix + groupId;
      let current: Consumer | undefined;
      let stopped = false;
      let crashes = 0;
      let restartTimer: NodeJS.Timeout | undefined;
      /** This subscription's member in the group, while its consumer runs (undefined from a crash until the next consumer joined). */
      let memberId: string | undefined;
      /** Members of its consumers that crashed: still in the group, to the coordinator, until they leave or their session ends. */
      const orphans = new Set<string>();
      let leaving = false;
      /** Once a new consumer asked to join: the rebalance then waits for no one gone (see leaveOrphans). */
      const removeOrphans = async (): Promise<void> => {
        if (leaving) return;
        leaving = true;
        try {
          const removed = await leaveOrphans(groupClient, group, orphans, () => stopped || memberId !== undefined);
          if (removed.length > 0) logger.info({ groupId, members: removed }, "removed the crashed consumers' members from the group");
        } finally {
          leaving = false;
          orphans.clear();
        }
      };
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
          groupId: group,
          allowAutoTopicCreation: false,
          sessionTimeout: sessionTimeoutMs,
          heartbeatInterval: Math.max(500, Math.floor(sessionTimeoutMs / 10)),
          // Every crash comes to the CRASH handler below, which starts the next consumer itself
          // (kafkajs's own restart would leave the crashed member behind, unknown to us).
          retry: { ...CLIENT_RETRY, restartOnFailure: async () => false },
        });
        current = consumer;
        consumers.add(consumer);
        // The coordinator answers a first JoinGroup (no member id yet) at once, asking for a second
        // with the id it made: that one waits in the rebalance, which the orphans' leaving ends.
        consumer.on(consumer.events.REQUEST, ({ payload }) => {
          if (payload.apiName === 'JoinGroup' && orphans.size > 0) void removeOrphans();
        });
        consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
          crashes = 0;
          memberId = payload.memberId;
          outage.recovered();
          // Its partitions may have moved: their lag is reported by whoever holds them now.
          forgetLag(groupId);
          const partitions = Object.values(payload.memberAssignment).reduce((sum, assigned) => sum + assigned.length, 0);
          logger.info({ groupId, partitions }, 'consumer joined its group');
        });
        // A consumer that crashed stays stopped (kafkajs has disconnected it, its member left if the
        // broker could be told): start a new one, backing off, and have its old member leave.
        consumer.on(consumer.events.CRASH, ({ payload }) => {
          if (stopped) return;
          // Through the outage filter: while the broker is down, a consumer crashes every few seconds.
          outage.log('Consumer', logLevel.WARN, 'Kafka consumer crashed; starting a new one', { error: payload.error, groupId });
          if (memberId !== undefined) orphans.add(memberId);
          memberId = undefined;
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
