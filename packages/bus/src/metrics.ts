import { CURRENT_NAMESPACE_SQL, type Pool } from '@herald/db';
import { meter } from '@herald/telemetry';

/**
 * The bus's metrics. Labels: `group` and `topic` as topics.ts declares them (without the
 * namespace prefix), `partition` (a topic has a fixed, small number), `schema` (a service's).
 */
const busMeter = meter('bus');

const messages = busMeter.createCounter('herald.kafka.messages', {
  description: 'Messages a consumer group finished with, by outcome (handled, dead_lettered)',
  unit: '{message}',
});

/** A message handled (`dead_lettered`: parked on its topic's dead-letter topic after its last attempt). */
export function countMessage(group: string, topic: string, outcome: 'handled' | 'dead_lettered'): void {
  messages.add(1, { group, topic, outcome });
}

const lag = busMeter.createObservableGauge('herald.kafka.consumer.lag', {
  description: "Messages of a partition not yet handled by this process's consumer of the group, as of its last fetched batch",
  unit: '{message}',
});
/** group -> "topic/partition" -> lag, for the partitions this process is assigned. */
const lags = new Map<string, Map<string, { topic: string; partition: number; lag: number }>>();

/** The lag of a partition after a batch of it was handled. */
export function recordLag(group: string, topic: string, partition: number, offsetLag: number): void {
  let partitions = lags.get(group);
  if (!partitions) lags.set(group, (partitions = new Map()));
  partitions.set(`${topic}/${partition}`, { topic, partition, lag: offsetLag });
}

/** Forgets a group's partitions (a rebalance moved them, or the consumer stopped). */
export function forgetLag(group: string): void {
  lags.delete(group);
}

lag.addCallback((result) => {
  for (const [group, partitions] of lags) {
    for (const { topic, partition, lag: value } of partitions.values()) result.observe(value, { group, topic, partition });
  }
});

const outboxRows = busMeter.createObservableGauge('herald.outbox.rows', { description: 'Outbox rows waiting to be published to Kafka', unit: '{row}' });
const outboxAge = busMeter.createObservableGauge('herald.outbox.oldest.age', {
  description: 'Age of the oldest outbox row waiting to be published (0 when none waits)',
  unit: 's',
});
/** The outboxes this process relays (one per service schema). */
const outboxes = new Map<string, Pool>();
/** Rows counted at most; beyond, the gauge says "at least this many". */
const COUNT_CAP = 1_000_000;

/** Observes a schema's outbox while its relay runs; returns the function that stops it. */
export function observeOutbox(pool: Pool, schema: string): () => void {
  outboxes.set(schema, pool);
  return () => outboxes.delete(schema);
}

busMeter.addBatchObservableCallback(
  async (result) => {
    await Promise.all(
      [...outboxes].map(async ([schema, pool]) => {
        const { rows } = await pool
          .query<{ waiting: string; age: number | null }>(
            `SELECT (SELECT count(*) FROM (SELECT 1 FROM ${schema}.outbox WHERE namespace = ${CURRENT_NAMESPACE_SQL} LIMIT ${COUNT_CAP}) AS capped) AS waiting,
                    (SELECT extract(epoch FROM now() - created_at) FROM ${schema}.outbox WHERE namespace = ${CURRENT_NAMESPACE_SQL} ORDER BY id LIMIT 1) AS age`,
          )
          // PostgreSQL unreachable: no sample this time rather than a wrong one.
          .catch(() => ({ rows: [] }));
        const row = rows[0];
        if (!row) return;
        result.observe(outboxRows, Number(row.waiting), { schema });
        result.observe(outboxAge, Math.max(0, Number(row.age ?? 0)), { schema });
      }),
    );
  },
  [outboxRows, outboxAge],
);
