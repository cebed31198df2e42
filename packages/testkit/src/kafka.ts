import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

import { Kafka, logLevel } from 'kafkajs';

import { repoRoot, requiredEnv } from './processes.js';

const kafkaAdmin = () => new Kafka({ clientId: 'herald-testkit', brokers: requiredEnv('KAFKA_BROKERS').split(','), logLevel: logLevel.NOTHING }).admin();

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
    // kafkajs's own wait for leaders gives up on the first UNKNOWN_TOPIC_OR_PARTITION; the loop below waits instead.
    await admin.createTopics({ waitForLeaders: false, topics: names.map((topic) => ({ topic, numPartitions: 4, replicationFactor: 1 })) });
    // Wait until every partition has a leader; metadata lags creation, more so under load.
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        const { topics: described } = await admin.fetchTopicMetadata({ topics: names });
        if (described.length === names.length && described.every((topic) => topic.partitions.length > 0 && topic.partitions.every((p) => p.leader >= 0))) break;
      } catch (err) {
        if (Date.now() > deadline) throw err;
      }
      if (Date.now() > deadline) throw new Error(`topics of ${prefix} have no leaders after 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
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
