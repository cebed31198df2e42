/**
 * The transactional outbox, end to end through real PostgreSQL and real Kafka: atomic enqueue,
 * crash-safe relay, idempotent consumers, single-leader relays with per-key order, dead-lettering.
 * Every test works in its own schema and its own topics, so this file can run beside others.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { context, propagation, ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { createPool, withTransaction, type PoolClient } from '@herald/db';
import { createTopics } from '@herald/testkit';
import type { Admin } from 'kafkajs';

import {
  createKafkaBus,
  EVENT_ID_HEADER,
  enqueue,
  handleOnce,
  PROCESSED_EVENTS_RETENTION_MS,
  pruneProcessedEvents,
  startOutboxRelay,
  type Bus,
  type IncomingMessage,
  type OutgoingMessage,
} from '../src/index.js';
import {
  brokers,
  Cleanup,
  collect,
  createOutboxSchema,
  createTopic,
  databaseUrl,
  kafka,
  messagesIn,
  randomHex,
  testLogger,
  waitFor,
  withTimeout,
  type Received,
} from './helpers.js';

const json = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));
const newBus = (name: string): Bus => createKafkaBus({ brokers: brokers(), clientId: `bus-test-${name}`, logger: testLogger });

let admin: Admin;
before(async () => {
  admin = kafka.admin();
  await admin.connect();
});
after(async () => {
  await admin.disconnect();
});

test('a: a state change and its event commit together, or not at all', { timeout: 30_000 }, async () => {
  const cleanup = new Cleanup();
  try {
    const { schema, pool, outboxCount } = await createOutboxSchema(
      cleanup,
      'outbox_atomic',
      `CREATE TABLE things (id int PRIMARY KEY, name text NOT NULL);`,
    );
    const topic = await createTopic(cleanup, admin, 'outbox.atomic', 3);
    const received = await collect(cleanup, topic);
    const bus = newBus('atomic');
    cleanup.defer(() => bus.close());
    const relay = startOutboxRelay({ pool, schema, bus, logger: testLogger });
    cleanup.defer(() => relay.stop());

    // Committed: the row and the event.
    const [committedId] = await withTransaction(pool, async (tx) => {
      await tx.query(`INSERT INTO ${schema}.things (id, name) VALUES (1, 'first')`);
      return enqueue(tx, schema, [{ topic, key: 'thing-1', payload: json({ thingId: 1, name: 'first' }) }]);
    });

    // Rolled back: neither the row nor the event may survive.
    let rolledBackId: string | undefined;
    await assert.rejects(
      withTransaction(pool, async (tx) => {
        await tx.query(`INSERT INTO ${schema}.things (id, name) VALUES (2, 'second')`);
        [rolledBackId] = await enqueue(tx, schema, [{ topic, key: 'thing-1', payload: json({ thingId: 2, name: 'second' }) }]);
        throw new Error('deliberate rollback');
      }),
      /deliberate rollback/,
    );

    // A later committed event on the same key (same partition): once it is in Kafka, anything
    // the relay would ever have sent before it is there too.
    const [markerId] = await withTransaction(pool, (tx) =>
      enqueue(tx, schema, [{ topic, key: 'thing-1', payload: json({ marker: true }), eventId: '00000000-0000-4000-8000-000000000003' }]),
    );
    assert.equal(markerId, '00000000-0000-4000-8000-000000000003', 'enqueue returns the event id it was given');

    await withTimeout(relay.drained(), 10_000, 'relay drained');
    assert.equal(await outboxCount(), 0, 'the relay deletes what Kafka acknowledged');
    await waitFor('the marker event in Kafka', () => received.some((message) => message.headers[EVENT_ID_HEADER] === markerId));

    assert.ok(committedId && rolledBackId);
    assert.deepEqual(
      received.map(({ key, value, headers }) => ({ key, value: JSON.parse(value) as unknown, headers })),
      [
        { key: 'thing-1', value: { thingId: 1, name: 'first' }, headers: { [EVENT_ID_HEADER]: committedId } },
        { key: 'thing-1', value: { marker: true }, headers: { [EVENT_ID_HEADER]: markerId } },
      ],
    );
    assert.equal(await messagesIn(admin, topic), 2, 'exactly two records in the topic: the rolled-back event never left');
    const { rows } = await pool.query<{ id: number }>(`SELECT id FROM ${schema}.things ORDER BY id`);
    assert.deepEqual(rows, [{ id: 1 }], 'the rolled-back row is not there');
  } finally {
    await cleanup.run();
  }
});

test('b, c: a relay killed midway loses nothing, and the duplicates it causes are harmless', { timeout: 45_000 }, async (t) => {
  const cleanup = new Cleanup();
  try {
    const { schema, pool, outboxCount } = await createOutboxSchema(
      cleanup,
      'outbox_crash',
      // No unique constraint on purpose: an effect that ran twice would show as two rows.
      `CREATE TABLE effects (consumer text NOT NULL, event_id uuid NOT NULL);`,
    );
    const topic = await createTopic(cleanup, admin, 'outbox.crash', 3);
    const total = 2_000;
    const batchSize = 50;
    const batchesBeforeCrash = 3;

    const eventIds = await withTransaction(pool, (tx) =>
      enqueue(
        tx,
        schema,
        Array.from({ length: total }, (_, n) => ({ topic, key: `key-${n % 10}`, payload: json({ n }) })),
      ),
    );
    assert.equal(new Set(eventIds).size, total);

    // The consumer side of (c): every record Kafka hands out, duplicates included, goes through handleOnce.
    const effect = (consumer: string, eventId: string) => async (tx: PoolClient): Promise<void> => {
      await tx.query(`INSERT INTO ${schema}.effects (consumer, event_id) VALUES ($1, $2)`, [consumer, eventId]);
    };
    const handled = { ran: 0, skipped: 0 };
    const received = await collect(cleanup, topic, async (message) => {
      const eventId = message.headers[EVENT_ID_HEADER] ?? '';
      const ran = await handleOnce(pool, schema, 'test-consumer', eventId, effect('test-consumer', eventId));
      handled[ran ? 'ran' : 'skipped'] += 1;
    });

    await t.test('b: every event reaches Kafka after a SIGKILL mid-batch, and the outbox empties', async () => {
      // First relay in a child process; it stops right after Kafka acknowledged batch 3, before deleting it.
      const child = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/relay.js', import.meta.url))], {
        env: { ...process.env, OUTBOX_SCHEMA: schema, BATCH_SIZE: String(batchSize), HANG_AFTER_BATCHES: String(batchesBeforeCrash) },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const exited = new Promise<string>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? String(code))));
      cleanup.defer(async () => {
        child.kill('SIGKILL');
        await withTimeout(exited, 5_000, 'relay child exit');
      });

      await waitFor('the child relay to publish 3 batches', () => output.includes('hanging') || child.exitCode !== null, 20_000).catch(
        (err: Error) => {
          throw new Error(`${err.message}; child output:\n${output}`);
        },
      );
      assert.match(output, /published 3\nhanging\n/, `child output:\n${output}`);
      child.kill('SIGKILL');
      assert.equal(await withTimeout(exited, 5_000, 'relay child exit'), 'SIGKILL');

      // Batches 1-2 were deleted; batch 3 is in Kafka *and* still in the outbox (its transaction died).
      assert.equal(await outboxCount(), total - (batchesBeforeCrash - 1) * batchSize);

      // Second relay: takes the lock the dead session released, and finishes.
      const bus = newBus('crash-second');
      cleanup.defer(() => bus.close());
      const relay = startOutboxRelay({ pool, schema, bus, logger: testLogger, batchSize, pollMs: 100 });
      cleanup.defer(() => relay.stop());
      await withTimeout(relay.drained(), 20_000, 'second relay drained');
      assert.equal(await outboxCount(), 0);

      // Batch 3 went out twice, everything else once.
      const expectedRecords = total + batchSize;
      assert.equal(await messagesIn(admin, topic), expectedRecords);
      await waitFor(`${expectedRecords} records consumed`, () => received.length >= expectedRecords, 20_000);
      assert.equal(received.length, expectedRecords);
      const arrived = new Set(received.map((message) => message.headers[EVENT_ID_HEADER]));
      assert.deepEqual([...arrived].sort(), [...eventIds].sort(), 'every event id arrived, and nothing else');
    });

    await t.test('c: handleOnce runs the effect exactly once per event id', async () => {
      assert.deepEqual(handled, { ran: total, skipped: batchSize }, 'the 50 redelivered records were skipped');

      // Deliberate redeliveries, concurrently, of already-handled events: all skipped.
      const again = await Promise.all(
        eventIds.slice(0, 100).flatMap((id) => [0, 1].map(() => handleOnce(pool, schema, 'test-consumer', id, effect('test-consumer', id)))),
      );
      assert.deepEqual(again, Array<boolean>(200).fill(false));

      // Two deliveries racing for a never-seen (consumer, event): exactly one runs the effect.
      const racing = await Promise.all(
        eventIds.slice(0, 50).flatMap((id) => [0, 1].map(() => handleOnce(pool, schema, 'racing-consumer', id, effect('racing-consumer', id)))),
      );
      assert.equal(racing.filter(Boolean).length, 50);

      // A failing effect leaves no marker, so the redelivery runs it.
      const flakyId = eventIds[0] ?? '';
      await assert.rejects(
        handleOnce(pool, schema, 'flaky-consumer', flakyId, async (tx) => {
          await effect('flaky-consumer', flakyId)(tx);
          throw new Error('effect failed');
        }),
        /effect failed/,
      );
      assert.equal(await handleOnce(pool, schema, 'flaky-consumer', flakyId, effect('flaky-consumer', flakyId)), true);
      assert.equal(await handleOnce(pool, schema, 'flaky-consumer', flakyId, effect('flaky-consumer', flakyId)), false);

      const { rows } = await pool.query<{ consumer: string; runs: number; events: number }>(
        `SELECT consumer, count(*)::int AS runs, count(DISTINCT event_id)::int AS events
           FROM ${schema}.effects GROUP BY consumer ORDER BY consumer`,
      );
      assert.deepEqual(rows, [
        { consumer: 'flaky-consumer', runs: 1, events: 1 },
        { consumer: 'racing-consumer', runs: 50, events: 50 },
        { consumer: 'test-consumer', runs: total, events: total },
      ]);
      const { rows: effectIds } = await pool.query<{ event_id: string }>(
        `SELECT event_id FROM ${schema}.effects WHERE consumer = 'test-consumer' ORDER BY event_id`,
      );
      assert.deepEqual(effectIds.map((row) => row.event_id), [...eventIds].sort());
    });
  } finally {
    await cleanup.run();
  }
});

test('d: two relays on one schema: one publishes at a time, per-key order holds, the other takes over', { timeout: 30_000 }, async () => {
  const cleanup = new Cleanup();
  try {
    const { schema, pool, newPool, outboxCount } = await createOutboxSchema(cleanup, 'outbox_leader');
    const topic = await createTopic(cleanup, admin, 'outbox.leader', 3);
    const received = await collect(cleanup, topic);

    // Each relay is a separate "replica": its own pool and producer, counted by a wrapper.
    let inFlight = 0;
    let maxInFlight = 0;
    const published = [0, 0];
    const replicas = [0, 1].map((index) => {
      const kafkaBus = newBus(`leader-${index}`);
      cleanup.defer(() => kafkaBus.close());
      const bus: Bus = {
        async publish(messages: OutgoingMessage[]) {
          inFlight += 1;
          maxInFlight = Math.max(maxInFlight, inFlight);
          try {
            await kafkaBus.publish(messages);
            published[index] = (published[index] ?? 0) + messages.length;
          } finally {
            inFlight -= 1;
          }
        },
        subscribe: (options) => kafkaBus.subscribe(options),
        close: () => kafkaBus.close(),
      };
      const relay = startOutboxRelay({ pool: newPool(), schema, bus, logger: testLogger, batchSize: 7, pollMs: 100 });
      cleanup.defer(() => relay.stop());
      return relay;
    });

    // One transaction per event, so the relays see them trickle in across many batches.
    const enqueueRange = async (from: number, to: number): Promise<string[]> => {
      const ids: string[] = [];
      for (let n = from; n < to; n += 1) {
        ids.push(...(await withTransaction(pool, (tx) => enqueue(tx, schema, [{ topic, key: 'same-key', payload: json(n) }]))));
      }
      return ids;
    };
    const sequence = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, n) => String(from + n));

    const firstIds = await enqueueRange(0, 100);
    await waitFor('100 events in Kafka', () => received.length >= 100);
    await waitFor('the outbox to empty', async () => (await outboxCount()) === 0);
    assert.deepEqual(received.map((message) => message.value), sequence(0, 100), 'enqueue order per key');
    assert.deepEqual(received.map((message) => message.headers[EVENT_ID_HEADER]), firstIds);
    assert.equal(new Set(received.map((message) => message.partition)).size, 1, 'one key, one partition');
    assert.equal(maxInFlight, 1, 'never two publishes at once');
    assert.deepEqual([...published].sort((x, y) => x - y), [0, 100], 'a single leader published everything');

    // The leader stops (releasing its lock); the follower takes over and keeps the order.
    const leader = published[0] === 100 ? 0 : 1;
    const follower = 1 - leader;
    await replicas[leader]?.stop();
    const laterIds = await enqueueRange(100, 120);
    await waitFor('120 events in Kafka', () => received.length >= 120);
    assert.deepEqual(received.map((message) => message.value), sequence(0, 120));
    assert.deepEqual(received.map((message) => message.headers[EVENT_ID_HEADER]), [...firstIds, ...laterIds]);
    assert.equal(published[follower], 20, 'the follower published what came after the handover');
    assert.equal(await messagesIn(admin, topic), 120, 'a clean handover sends nothing twice');
  } finally {
    await cleanup.run();
  }
});

test('e: a new group starts at the oldest message; one that always fails is dead-lettered after maxAttempts, and the partition moves on', { timeout: 30_000 }, async () => {
  const cleanup = new Cleanup();
  try {
    const topic = await createTopic(cleanup, admin, 'subscribe', 1);
    const deadLetterTopic = await createTopic(cleanup, admin, 'subscribe.dlq', 1);
    const dead = await collect(cleanup, deadLetterTopic);
    const bus = newBus('subscribe');
    cleanup.defer(() => bus.close());

    // Published before the group exists: a new group starts at the oldest message, not the newest.
    const values = ['m0', 'm1', 'm2', 'm3', 'm4'];
    await bus.publish(values.map((value, n) => ({ topic, key: `k${n}`, value: Buffer.from(value), headers: { [EVENT_ID_HEADER]: `event-${n}` } })));

    // Every attempt is logged in order, so we see the retries happen before the next message.
    const attempts: string[] = [];
    const subscription = await bus.subscribe({
      consumer: { group: `test-subscriber-${topic}`, topics: [{ name: topic, deadLetter: deadLetterTopic }] },
      maxAttempts: 3,
      async handle(message: IncomingMessage) {
        const value = message.value.toString();
        attempts.push(value);
        if (value === 'm2') throw new Error('cannot handle m2');
      },
    });
    cleanup.defer(() => subscription.stop());

    await waitFor('m4 handled', () => attempts.includes('m4'));
    await waitFor('one dead letter', () => dead.length >= 1);
    assert.deepEqual(attempts, ['m0', 'm1', 'm2', 'm2', 'm2', 'm3', 'm4']);

    const [letter] = dead as [Received];
    assert.equal(letter.key, 'k2');
    assert.equal(letter.value, 'm2');
    assert.deepEqual(letter.headers, {
      [EVENT_ID_HEADER]: 'event-2',
      'herald-dlq-source': `${topic}/0/2`,
      'herald-dlq-reason': 'cannot handle m2',
    });
    assert.equal(await messagesIn(admin, deadLetterTopic), 1, 'only the poison message was dead-lettered');
  } finally {
    await cleanup.run();
  }
});

test('f: an event committed while a batch is in flight is relayed at once, and drained() waits for it', { timeout: 30_000 }, async () => {
  const cleanup = new Cleanup();
  try {
    const { schema, pool, outboxCount } = await createOutboxSchema(cleanup, 'outbox_wake');
    const topic = await createTopic(cleanup, admin, 'outbox.wake', 1);
    const received = await collect(cleanup, topic);

    // The first publish signals, then holds until the test releases it: another event is committed
    // and drained() registered while it is in flight.
    const kafkaBus = newBus('wake');
    cleanup.defer(() => kafkaBus.close());
    let signalFirstPublish: () => void = () => undefined;
    const firstPublish = new Promise<void>((resolve) => (signalFirstPublish = resolve));
    let releaseFirstPublish: () => void = () => undefined;
    const firstReleased = new Promise<void>((resolve) => (releaseFirstPublish = resolve));
    let publishes = 0;
    const bus: Bus = {
      async publish(messages) {
        publishes += 1;
        if (publishes === 1) {
          signalFirstPublish();
          await firstReleased;
        }
        await kafkaBus.publish(messages);
      },
      subscribe: (options) => kafkaBus.subscribe(options),
      close: () => kafkaBus.close(),
    };
    // A poll interval far beyond the test's waits: only NOTIFY (or drained()) may wake the relay.
    const relay = startOutboxRelay({ pool, schema, bus, logger: testLogger, pollMs: 60_000 });
    cleanup.defer(() => relay.stop());
    // Released first on the way out, so that stop() never waits on a held publish.
    cleanup.defer(async () => releaseFirstPublish());
    // Drained once: it holds the lock and listens (LISTEN comes before its first batch).
    await withTimeout(relay.drained(), 5_000, 'the relay started');
    assert.equal(publishes, 0);

    const [first] = await withTransaction(pool, (tx) => enqueue(tx, schema, [{ topic, key: 'k', payload: json('first') }]));
    await withTimeout(firstPublish, 5_000, 'the relay woken by NOTIFY');
    const [second] = await withTransaction(pool, (tx) => enqueue(tx, schema, [{ topic, key: 'k', payload: json('second') }]));

    // Registered while the first batch is in flight: must not resolve before `second` is published.
    const drained = relay.drained();
    releaseFirstPublish();
    await withTimeout(drained, 5_000, 'drained() with an event committed during a batch');
    assert.equal(await outboxCount(), 0, 'drained() resolved while the outbox still held an event');
    await waitFor('both events in Kafka', () => received.length >= 2, 5_000);
    assert.deepEqual(received.map((message) => message.headers[EVENT_ID_HEADER]), [first, second]);
  } finally {
    await cleanup.run();
  }
});

test('g: the trace context of the transaction that enqueued an event travels in its Kafka headers', { timeout: 30_000 }, async () => {
  // What the telemetry SDK installs in a service: a context manager and the W3C propagator.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const cleanup = new Cleanup();
  try {
    const { schema, pool } = await createOutboxSchema(cleanup, 'outbox_trace');
    const topic = await createTopic(cleanup, admin, 'outbox.trace', 1);
    const received = await collect(cleanup, topic);
    const bus = newBus('trace');
    cleanup.defer(() => bus.close());
    const relay = startOutboxRelay({ pool, schema, bus, logger: testLogger });
    cleanup.defer(() => relay.stop());

    const traceId = randomHex(16);
    const spanId = randomHex(8);
    const caller = trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: true });
    const [eventId] = await context.with(caller, () =>
      withTransaction(pool, (tx) => enqueue(tx, schema, [{ topic, key: 'traced', payload: json({ traced: true }) }])),
    );
    await withTimeout(relay.drained(), 10_000, 'relay drained');
    await waitFor('the traced event in Kafka', () => received.length === 1);
    // The relay publishes outside any request, yet the event keeps the enqueuing caller's trace.
    assert.deepEqual(received[0]?.headers, { traceparent: `00-${traceId}-${spanId}-01`, [EVENT_ID_HEADER]: eventId });
  } finally {
    await cleanup.run();
    propagation.disable();
    context.disable();
  }
});

test('h: namespaces sharing one outbox table each publish only their own events, in parallel', { timeout: 30_000 }, async () => {
  const cleanup = new Cleanup();
  try {
    const { schema } = await createOutboxSchema(cleanup, 'outbox_ns');
    const base = `test.outbox.ns.${randomHex()}`;
    const namespaces = [`a${randomHex(2)}.`, `b${randomHex(2)}.`];
    await createTopics(admin, namespaces.map((namespace) => namespace + base), 1);
    cleanup.defer(() => admin.deleteTopics({ topics: namespaces.map((namespace) => namespace + base) }));
    const sides = await Promise.all(
      namespaces.map(async (namespace) => {
        const pool = createPool({ url: databaseUrl(), schema, max: 3, applicationName: 'bus-test-ns', namespace });
        cleanup.defer(() => pool.end());
        const bus = createKafkaBus({ brokers: brokers(), clientId: `bus-test-${namespace}`, logger: testLogger, topicPrefix: namespace });
        cleanup.defer(() => bus.close());
        const received = await collect(cleanup, namespace + base);
        const ids = await withTransaction(pool, (tx) =>
          enqueue(tx, schema, Array.from({ length: 5 }, (_, n) => ({ topic: base, key: 'k', payload: json({ namespace, n }) }))),
        );
        return { namespace, pool, bus, received, ids };
      }),
    );
    // Both relays lead at once: the lock is per namespace.
    const relays = sides.map(({ pool, bus }) => startOutboxRelay({ pool, schema, bus, logger: testLogger }));
    cleanup.defer(() => Promise.all(relays.map((relay) => relay.stop())));
    // Both relays drained, then a marker through each: on the one-partition topic it comes after
    // everything its relay published, so what came before it is all the topic will ever hold.
    await Promise.all(relays.map((relay) => withTimeout(relay.drained(), 10_000, 'relay drained')));
    for (const side of sides) {
      const [marker] = await withTransaction(side.pool, (tx) => enqueue(tx, schema, [{ topic: base, key: 'k', payload: json({ marker: side.namespace }) }]));
      await waitFor(`${side.namespace} marker`, () => side.received.some((message) => message.headers[EVENT_ID_HEADER] === marker));
      assert.deepEqual(side.received.map((message) => message.headers[EVENT_ID_HEADER]), [...side.ids, marker]);
    }
  } finally {
    await cleanup.run();
  }
});

test('i: handleOnce prunes markers older than PROCESSED_EVENTS_RETENTION_MS (14 days) and keeps the rest', { timeout: 30_000 }, async () => {
  const cleanup = new Cleanup();
  try {
    const { schema, pool } = await createOutboxSchema(cleanup, 'processed_prune');
    assert.equal(PROCESSED_EVENTS_RETENTION_MS, 14 * 86_400_000);
    const ages = { expired: '14 days 1 minute', kept: '13 days 23 hours', recent: '1 hour' };
    const ids = Object.fromEntries(Object.keys(ages).map((name) => [name, randomUUID()])) as Record<keyof typeof ages, string>;
    for (const [name, age] of Object.entries(ages) as Array<[keyof typeof ages, string]>) {
      await pool.query(`INSERT INTO ${schema}.processed_events (consumer, event_id, processed_at) VALUES ('c', $1, now() - $2::interval)`, [ids[name], age]);
    }
    const fresh = randomUUID();
    // The first handleOnce on a schema in this process prunes it, in the background.
    assert.equal(await handleOnce(pool, schema, 'c', fresh, async () => undefined), true);
    const left = async () => (await pool.query<{ event_id: string }>(`SELECT event_id FROM ${schema}.processed_events ORDER BY processed_at`)).rows.map((row) => row.event_id);
    await waitFor('the expired marker pruned', async () => !(await left()).includes(ids.expired));
    assert.deepEqual(await left(), [ids.kept, ids.recent, fresh]);
    // Still remembered within the retention; a copy older than it could no longer be in its topic.
    assert.equal(await handleOnce(pool, schema, 'c', ids.kept, async () => undefined), false);
    // Batches: more rows than one DELETE takes all go.
    await pool.query(`INSERT INTO ${schema}.processed_events (consumer, event_id, processed_at) SELECT 'bulk', gen_random_uuid(), now() - interval '20 days' FROM generate_series(1, 25000)`);
    assert.equal(await pruneProcessedEvents(pool, schema), 25_000);
    assert.equal(await pruneProcessedEvents(pool, schema, 3_600_000), 2);
    assert.deepEqual(await left(), [fresh]);
  } finally {
    await cleanup.run();
  }
});
