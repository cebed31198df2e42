import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';

import { backoffMs, type BackoffOptions } from '@herald/backoff';
import { assertSchemaName, connectDedicated, createWakeup, CURRENT_NAMESPACE_SQL, withTransaction, type MigrationSource, type Pool, type PoolClient, type Queryable } from '@herald/db';
import type { Logger } from '@herald/logging';
import { currentTraceHeaders } from '@herald/telemetry';
import type pg from 'pg';

import { EVENT_ID_HEADER, RECONNECT_CAP_MS, type Bus } from './kafka.js';
import { observeOutbox } from './metrics.js';

/**
 * Between two tries of a relay that failed (the database or Kafka away): up to 0.2 s, 0.4 s, ...
 * 1 s (full jitter), however long the outage lasted: once it is back, what waited is published
 * within a second (a 10 s cap left events, and so every consumer group downstream, idle up to 10 s
 * after Kafka's return).
 */
const RELAY_BACKOFF: BackoffOptions = { baseMs: 200, capMs: RECONNECT_CAP_MS };

/**
 * Transactional outbox. A service writes its state change and the event in one transaction
 * (`enqueue` takes the transaction's client); the relay publishes committed rows to Kafka and
 * deletes them only after Kafka acknowledged. A crash between the two republishes a batch, so
 * delivery is at-least-once and consumers dedupe by event id (see `handleOnce`).
 *
 * The tables live in each service's own schema, created by `outboxMigrations` (migrations/ of this
 * package), which every service applies beside its own.
 */

export interface OutboxEvent {
  topic: string;
  key: string;
  payload: Uint8Array;
  /** Defaults to a fresh UUID; pass one when the payload already names its id. */
  eventId?: string;
  /** Kafka headers besides the trace context and the event id. */
  headers?: Record<string, string>;
}

const channelOf = (schema: string): string => `${schema}_outbox`;

export async function enqueue(tx: Queryable, schema: string, events: OutboxEvent[]): Promise<string[]> {
  assertSchemaName(schema);
  const trace = currentTraceHeaders();
  const ids: string[] = [];
  for (const event of events) {
    const eventId = event.eventId ?? randomUUID();
    ids.push(eventId);
    await tx.query(
      `INSERT INTO ${schema}.outbox (event_id, topic, message_key, payload, headers) VALUES ($1, $2, $3, $4, $5)`,
      [eventId, event.topic, event.key, Buffer.from(event.payload), { ...trace, ...event.headers }],
    );
  }
  // Delivered at commit only, so the relay never wakes for a rolled-back event.
  if (events.length > 0) await tx.query(`NOTIFY ${channelOf(schema)}`);
  return ids;
}

export interface RelayOptions {
  pool: Pool;
  schema: string;
  bus: Bus;
  logger: Logger;
  batchSize?: number;
  /** Poll interval when no notification arrives (a NOTIFY can be missed across reconnects). */
  pollMs?: number;
}

export interface Relay {
  /** Finishes the batch in flight, then releases the leadership lock. */
  stop(): Promise<void>;
  /** Resolves once the outbox has been seen empty after this call (used by tests and drains). */
  drained(): Promise<void>;
}

interface OutboxRow {
  id: string;
  event_id: string;
  topic: string;
  message_key: string;
  payload: Buffer;
  headers: Record<string, string>;
}

/**
 * Runs the relay. Only one replica publishes a schema's outbox at a time (a session advisory lock),
 * which keeps per-key order; the others wait and take over if the leader dies.
 */
export function startOutboxRelay({ pool, schema, bus, logger, batchSize = 500, pollMs = 1_000 }: RelayOptions): Relay {
  assertSchemaName(schema);
  let stopping = false;
  // Woken by NOTIFY, drained() and stop().
  const { sleep, wake: poke } = createWakeup();
  const drainWaiters: Array<() => void> = [];

  const publishBatch = async (client: pg.Client): Promise<number> => {
    await client.query('BEGIN');
    try {
      const { rows } = await client.query<OutboxRow>(
        `SELECT id, event_id, topic, message_key, payload, headers FROM ${schema}.outbox
          WHERE namespace = ${CURRENT_NAMESPACE_SQL} ORDER BY id LIMIT $1 FOR UPDATE`,
        [batchSize],
      );
      if (rows.length > 0) {
        await bus.publish(
          rows.map((row) => ({
            topic: row.topic,
            key: row.message_key,
            value: row.payload,
            headers: { ...row.headers, [EVENT_ID_HEADER]: row.event_id },
          })),
        );
        await client.query(`DELETE FROM ${schema}.outbox WHERE id = ANY($1::bigint[])`, [rows.map((row) => row.id)]);
      }
      await client.query('COMMIT');
      return rows.length;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  };

  /** Takes the schema's leadership (a session lock) on `client` if no other replica holds it. */
  const lead = async (client: pg.Client): Promise<boolean> => {
    const { rows } = await client.query<{ leader: boolean }>(`SELECT pg_try_advisory_lock(hashtext($1 || ${CURRENT_NAMESPACE_SQL})) AS leader`, [`herald.outbox.${schema}.`]);
    return rows[0]?.leader === true;
  };

  const run = async (): Promise<void> => {
    let failures = 0;
    while (!stopping) {
      // Its own connection (see connectDedicated): the leader holds it, and its session lock, for good.
      let client: pg.Client | undefined;
      try {
        client = await connectDedicated(pool);
        // Another replica leads: ask again now and then, on the same connection.
        let leader = await lead(client);
        while (!leader && !stopping) {
          await sleep(pollMs * 5);
          if (!stopping) leader = await lead(client);
        }
        if (!leader) continue;
        const onNotification = (): void => poke();
        client.on('notification', onNotification);
        await client.query(`LISTEN ${channelOf(schema)}`);
        while (!stopping) {
          // Only waiters registered before this batch's SELECT may be resolved by it.
          const waiting = drainWaiters.length;
          const published = await publishBatch(client);
          failures = 0;
          if (published === batchSize) continue;
          for (const resolve of drainWaiters.splice(0, waiting)) resolve();
          await sleep(pollMs);
        }
        await client.query(`UNLISTEN ${channelOf(schema)}`);
        await client.query(`SELECT pg_advisory_unlock(hashtext($1 || ${CURRENT_NAMESPACE_SQL}))`, [`herald.outbox.${schema}.`]);
        client.off('notification', onNotification);
      } catch (err) {
        failures += 1;
        // Once per outage; the retries that follow are expected until the database is back.
        if (failures === 1) logger.warn({ err, schema }, 'outbox relay failed; retrying with backoff');
        // Ending the connection ends its session, and with it the leadership lock.
        await client?.end().catch(() => undefined);
        client = undefined;
        await sleep(backoffMs(failures, RELAY_BACKOFF));
      } finally {
        await client?.end().catch(() => undefined);
      }
    }
  };

  const running = run();
  const unobserve = observeOutbox(pool, schema);
  return {
    async stop() {
      stopping = true;
      unobserve();
      poke();
      await running;
    },
    drained() {
      return new Promise((resolve) => {
        drainWaiters.push(resolve);
        poke();
      });
    },
  };
}

/**
 * How long handleOnce remembers an event: 14 days, twice the 7 days Herald's topics keep a message
 * (Kafka's default retention, which deploy/kafka and the chart leave as it is). A copy of a message
 * can only arrive while its topic still holds it, so a marker older than that guards nothing.
 */
export const PROCESSED_EVENTS_RETENTION_MS = 14 * 86_400_000;
/** Each process prunes a schema's markers at most this often, on the way out of a handleOnce. */
const PRUNE_EVERY_MS = 3_600_000;
/** Rows per DELETE: a large backlog goes in short statements, never one long lock. */
const PRUNE_BATCH = 10_000;
const prunedAt = new Map<string, number>();

/** Deletes the processed_events markers of `schema` older than `retentionMs`, in batches; returns how many went. */
export async function pruneProcessedEvents(db: Queryable, schema: string, retentionMs = PROCESSED_EVENTS_RETENTION_MS): Promise<number> {
  assertSchemaName(schema);
  let total = 0;
  for (;;) {
    const { rowCount } = await db.query(
      `DELETE FROM ${schema}.processed_events WHERE ctid = ANY(ARRAY(
         SELECT ctid FROM ${schema}.processed_events WHERE processed_at < now() - make_interval(secs => $1) LIMIT $2))`,
      [retentionMs / 1_000, PRUNE_BATCH],
    );
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < PRUNE_BATCH) return total;
  }
}

/**
 * Runs `effect` at most once per (consumer, event id): the marker and the effect commit together,
 * so a redelivered message is skipped and a failed effect is retried. Markers are kept for
 * PROCESSED_EVENTS_RETENTION_MS: once an hour per process and schema, the older ones are pruned.
 */
export async function handleOnce(
  pool: Pool,
  schema: string,
  consumer: string,
  eventId: string,
  effect: (tx: PoolClient) => Promise<void>,
): Promise<boolean> {
  assertSchemaName(schema);
  return withTransaction(pool, async (tx) => {
    const inserted = await tx.query(
      `INSERT INTO ${schema}.processed_events (consumer, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
      [consumer, eventId],
    );
    if (inserted.rowCount === 0) return false;
    await effect(tx);
    return true;
  }).then((ran) => {
    if (Date.now() - (prunedAt.get(schema) ?? 0) >= PRUNE_EVERY_MS) {
      prunedAt.set(schema, Date.now());
      // In the background: the message's handling never waits for it. A failed prune is tried again next time.
      void pruneProcessedEvents(pool, schema).catch(() => prunedAt.delete(schema));
    }
    return ran;
  });
}

/** The outbox and processed_events tables, applied to a service's schema beside its own migrations. */
export const outboxMigrations: MigrationSource = {
  track: 'outbox',
  dir: fileURLToPath(new URL('../../migrations', import.meta.url)),
};
