import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

import { Kafka, logLevel, type Admin } from 'kafkajs';

import { repoRoot, requiredEnv } from './env.js';

const kafkaAdmin = () => new Kafka({ clientId: 'herald-testkit', brokers: requiredEnv('KAFKA_BROKERS').split(','), logLevel: logLevel.NOTHING }).admin();

/**
 * Creates `names` and waits until every partition has a leader. kafkajs's own `waitForLeaders`
 * gives up on the first UNKNOWN_TOPIC_OR_PARTITION, which metadata answers for a moment after
 * creation (longer under load); this waits through it, for 30 s at most.
 */
export async function createTopics(admin: Admin, names: string[], numPartitions: number): Promise<void> {
  await admin.createTopics({ waitForLeaders: false, topics: names.map((topic) => ({ topic, numPartitions, replicationFactor: 1 })) });
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const { topics: described } = await admin.fetchTopicMetadata({ topics: names });
      if (described.length === names.length && described.every((topic) => topic.partitions.length === numPartitions && topic.partitions.every((p) => p.leader >= 0))) return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    if (Date.now() > deadline) throw new Error(`topics ${names.join(', ')} have no leaders after 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Herald's topics (deploy/kafka/topics.txt) under a fresh prefix, and a way to remove them. */
export async function createKafkaNamespace(): Promise<{ prefix: string; remove(): Promise<void> }> {
  const prefix = `t${randomBytes(5).toString('hex')}.`;
  const listed = await readFile(join(repoRoot, 'deploy/kafka/topics.txt'), 'utf8');
  const topics = listed
    .split('\n')
    .map((line) => line.replace(/#.*/, '').trim())
    .filter((line) => line !== '')
    .map((line) => (line.split(/\s+/)[0] ?? '').trim());
  const names = topics.map((topic) => prefix + topic);
  const admin = kafkaAdmin();
  await admin.connect();
  try {
    // A few partitions keep per-key order meaningful and topic creation quick.
    await createTopics(admin, names, 4);
  } finally {
    await admin.disconnect();
  }
  return {
    prefix,
    async remove() {
      const cleaner = kafkaAdmin();
      await cleaner.connect();
      try {
        await cleaner.deleteTopics({ topics: names });
      } catch {
        // Best effort: a leftover namespace is harmless.
      } finally {
        await cleaner.disconnect();
      }
    },
  };
}
