/**
 * Shared pieces of the bus tests: real PostgreSQL schemas and real Kafka topics, each unique per
 * run (so test files can run in parallel), a Kafka collector, and bounded waits.
 */
import { randomBytes } from 'node:crypto';

import { createPool, migrate, type Pool } from '@herald/db';
import { createLogger, type Logger } from '@herald/logging';
import { createTopics, requiredEnv } from '@herald/testkit';
import { Kafka, logLevel, type Admin, type IHeaders } from 'kafkajs';

import { outboxMigrations } from '../src/index.js';

export const databaseUrl = (): string => requiredEnv('DATABASE_URL');
export const brokers = (): string[] => requiredEnv('KAFKA_BROKERS').split(',').map((broker) => broker.trim());
export const randomHex = (bytes = 4): string => randomBytes(bytes).toString('hex');
const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Quiet by default; TEST_LOG_LEVEL=debug shows what the bus and relay log. */
export const testLogger: Logger = createLogger('bus-test', process.env.TEST_LOG_LEVEL ?? 'silent');

/** Test-side Kafka client (independent of the code under test), used to check what reached Kafka. */
export const kafka = new Kafka({ clientId: 'herald-bus-test', brokers: brokers(), logLevel: logLevel.NOTHING });

/** Cleanups run last-in first-out, so consumers stop before their topic is deleted, relays before their schema. */
export class Cleanup {
  private readonly steps: Array<() => Promise<unknown>> = [];

  defer(step: () => Promise<unknown>): void {
    this.steps.push(step);
  }

  async run(): Promise<void> {
    const errors: unknown[] = [];
    for (let step = this.steps.pop(); step; step = this.steps.pop()) {
      await step().catch((err: unknown) => errors.push(err));
    }
    if (errors.length > 0) throw new AggregateError(errors, 'cleanup failed');
  }
}

/** Rejects after `ms` instead of hanging the test run. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `check` until it returns true, failing after `timeoutMs`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(20);
  }
}

export async function createTopic(cleanup: Cleanup, admin: Admin, prefix: string, numPartitions: number): Promise<string> {
  const topic = `test.${prefix}.${randomHex()}`;
  await createTopics(admin, [topic], numPartitions);
  cleanup.defer(() => admin.deleteTopics({ topics: [topic] }));
  return topic;
}

/** How many records a fresh topic holds: the sum of its partitions' high watermarks. */
export async function messagesIn(admin: Admin, topic: string): Promise<number> {
  const offsets = await admin.fetchTopicOffsets(topic);
  return offsets.reduce((sum, partition) => sum + Number(partition.high), 0);
}

export interface OutboxSchema {
  schema: string;
  pool: Pool;
  /** A pool of its own, like another replica of the service would have. */
  newPool(): Pool;
  outboxCount(): Promise<number>;
}

/** A fresh schema `t_<prefix>_<random>` with the outbox tables (plus `extraDdl`), dropped at cleanup. */
export async function createOutboxSchema(cleanup: Cleanup, prefix: string, extraDdl = ''): Promise<OutboxSchema> {
  const schema = `t_${prefix}_${randomHex()}`;
  const newPool = (): Pool => {
    const pool = createPool({ url: databaseUrl(), schema, max: 5, applicationName: `bus-test-${prefix}` });
    cleanup.defer(() => pool.end());
    return pool;
  };
  const pool = newPool();
  await pool.query(`CREATE SCHEMA ${schema}`);
  cleanup.defer(() => pool.query(`DROP SCHEMA ${schema} CASCADE`));
  await migrate(pool, schema, [outboxMigrations]);
  if (extraDdl) await pool.query(extraDdl);
  return {
    schema,
    pool,
    newPool,
    async outboxCount() {
      const { rows } = await pool.query<{ count: number }>(`SELECT count(*)::int AS count FROM ${schema}.outbox`);
      return rows[0]?.count ?? -1;
    },
  };
}

export interface Received {
  topic: string;
  partition: number;
  offset: string;
  key: string;
  value: string;
  headers: Record<string, string>;
}

function headersOf(headers: IHeaders | undefined): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (value !== undefined) result[name] = (Array.isArray(value) ? value.join(',') : value).toString();
  }
  return result;
}

/**
 * Consumes `topic` from the beginning with a unique group and appends every record (duplicates
 * included) to the returned array; `onMessage`, when given, runs before the record is appended.
 */
export async function collect(
  cleanup: Cleanup,
  topic: string,
  onMessage?: (message: Received) => Promise<void>,
): Promise<Received[]> {
  const received: Received[] = [];
  const consumer = kafka.consumer({
    groupId: `test-collector-${randomHex()}`,
    allowAutoTopicCreation: false,
    // disconnect() waits for the fetch in flight: a short long-poll keeps cleanup fast.
    maxWaitTimeInMs: 100,
  });
  await consumer.connect();
  cleanup.defer(() => consumer.disconnect());
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    partitionsConsumedConcurrently: 4,
    eachMessage: async ({ topic: from, partition, message }) => {
      const record: Received = {
        topic: from,
        partition,
        offset: message.offset,
        key: message.key?.toString() ?? '',
        value: message.value?.toString() ?? '',
        headers: headersOf(message.headers),
      };
      await onMessage?.(record);
      received.push(record);
    },
  });
  return received;
}
