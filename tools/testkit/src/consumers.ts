import { Kafka, logLevel, type Admin } from 'kafkajs';

import { connectDatabase } from './database.js';
import { requiredEnv } from './env.js';

/**
 * Positive evidence that the system has finished with what a test did, in place of "sleep, then
 * assert nothing happened": a consumer group's committed offset has passed an event (consumers
 * commit only after their effect is durable), and nothing is left in any outbox of the namespace.
 */

/** A consumer group and what it reads, as `consumers` of @herald/bus declares them (names without the stack's namespace). */
export interface ConsumedTopics {
  group: string;
  topics: readonly { name: string }[];
}

async function withAdmin<T>(use: (admin: Admin) => Promise<T>): Promise<T> {
  const admin = new Kafka({ clientId: 'herald-testkit', brokers: requiredEnv('KAFKA_BROKERS').split(','), logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    return await use(admin);
  } finally {
    await admin.disconnect();
  }
}

async function poll(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not reached in ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Committed offsets per partition; a partition the group never committed counts from its oldest message. */
async function committed(admin: Admin, groupId: string, topic: string): Promise<Map<number, bigint>> {
  const [low, fetched] = await Promise.all([admin.fetchTopicOffsets(topic), admin.fetchOffsets({ groupId, topics: [topic] })]);
  const offsets = new Map(low.map((partition) => [partition.partition, BigInt(partition.low)]));
  for (const partition of fetched[0]?.partitions ?? []) {
    if (BigInt(partition.offset) >= 0n) offsets.set(partition.partition, BigInt(partition.offset));
  }
  return offsets;
}

/** Waits until `group` has committed past `offset` of `topic`'s `partition` (the event at that offset is handled). */
export async function waitForConsumed(topicPrefix: string, group: string, topic: string, at: { partition: number; offset: string }, timeoutMs = 30_000): Promise<void> {
  await withAdmin((admin) =>
    poll(`${group} past ${topic}/${at.partition}@${at.offset}`, timeoutMs, async () => {
      const offsets = await committed(admin, topicPrefix + group, topicPrefix + topic);
      return (offsets.get(at.partition) ?? -1n) > BigInt(at.offset);
    }),
  );
}

async function outboxesEmpty(databaseUrl: string, namespace: string): Promise<boolean> {
  const db = await connectDatabase(databaseUrl);
  try {
    const { rows } = await db.query<{ schema: string }>(`SELECT table_schema AS schema FROM information_schema.tables WHERE table_name = 'outbox'`);
    for (const { schema } of rows) {
      const left = await db.query(`SELECT 1 FROM "${schema}".outbox WHERE namespace = $1 LIMIT 1`, [namespace]);
      if (left.rowCount !== 0) return false;
    }
    return true;
  } finally {
    await db.end();
  }
}

/**
 * Waits until the namespace is quiet: every outbox row of it published and each of `consumers`
 * caught up with its topic's end, twice in a row (an event handled between the two looks may
 * have queued another).
 */
export async function waitForQuiet(topicPrefix: string, consumers: readonly ConsumedTopics[], { databaseUrl = requiredEnv('DATABASE_URL'), timeoutMs = 30_000 } = {}): Promise<void> {
  await withAdmin(async (admin) => {
    const caughtUp = async (): Promise<boolean> => {
      if (!(await outboxesEmpty(databaseUrl, topicPrefix))) return false;
      for (const { group, topics } of consumers) {
        for (const { name } of topics) {
          const [ends, offsets] = await Promise.all([admin.fetchTopicOffsets(topicPrefix + name), committed(admin, topicPrefix + group, topicPrefix + name)]);
          if (ends.some((end) => (offsets.get(end.partition) ?? 0n) < BigInt(end.high))) return false;
        }
      }
      return true;
    };
    let quietLooks = 0;
    await poll(`namespace ${topicPrefix} quiet`, timeoutMs, async () => {
      quietLooks = (await caughtUp()) ? quietLooks + 1 : 0;
      return quietLooks >= 2;
    });
  });
}

/** What untilConsumingAgain saw: each group's time to commit again, and the groups that had nothing to consume. */
export interface ConsumingAgain {
  /** Milliseconds from the call until the group committed an offset again, by group. */
  back: Map<string, number>;
  /** Groups caught up with their topics' end, which received nothing since the first look (no message to prove them by). */
  idle: string[];
}

/**
 * How long after now each of `groups` commits an offset again (it consumed a message and its
 * effect is durable); a group that has not within `timeoutMs` is left out. Measured from this
 * call, against the offsets committed at its first successful look (the coordinator may still be
 * loading them when a broker has just come back: a commit made before that look is missed and the
 * next one counted, so a time can be later, never earlier, than the group's return). A group whose
 * topics received nothing since that look and which is caught up with their end cannot show it
 * consumes: it is `idle` (a message arriving later makes it count again). The wait ends once every
 * group is back or idle.
 */
export async function untilConsumingAgain(topicPrefix: string, groups: readonly ConsumedTopics[], timeoutMs: number): Promise<ConsumingAgain> {
  const from = Date.now();
  const back = new Map<string, number>();
  const idle = new Set<string>();
  /** The group's committed offsets and its topics' ends, each summed over its partitions. */
  const look = async (admin: Admin, { group, topics }: ConsumedTopics): Promise<{ committed: bigint; ends: bigint }> => {
    let sum = 0n;
    let ends = 0n;
    for (const { name } of topics) {
      const [offsets, high] = await Promise.all([committed(admin, topicPrefix + group, topicPrefix + name), admin.fetchTopicOffsets(topicPrefix + name)]);
      for (const offset of offsets.values()) sum += offset;
      for (const partition of high) ends += BigInt(partition.high);
    }
    return { committed: sum, ends };
  };
  await withAdmin(async (admin) => {
    const baseline = new Map<string, { committed: bigint; ends: bigint }>();
    while (back.size + idle.size < groups.length && Date.now() - from < timeoutMs) {
      for (const entry of groups) {
        if (back.has(entry.group)) continue;
        try {
          const now = await look(admin, entry);
          const before = baseline.get(entry.group);
          if (before === undefined) baseline.set(entry.group, now);
          else if (now.committed > before.committed) {
            idle.delete(entry.group);
            back.set(entry.group, Date.now() - from);
          } else if (now.ends === before.ends && now.committed === now.ends) idle.add(entry.group);
          else idle.delete(entry.group);
        } catch {
          // The coordinator is loading the group's offsets: look again.
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });
  return { back, idle: [...idle] };
}

/**
 * Waits until the group coordinator answers for every one of `groups` (a broker just started loads
 * every group's metadata, one offsets partition after another, before it can coordinate them).
 */
export async function coordinatorsBack(topicPrefix: string, groups: readonly ConsumedTopics[], timeoutMs: number): Promise<void> {
  await withAdmin((admin) =>
    poll('the group coordinators back', timeoutMs, async () => {
      const described = await admin.describeGroups(groups.map(({ group }) => topicPrefix + group)).catch(() => undefined);
      return described !== undefined;
    }),
  );
}
