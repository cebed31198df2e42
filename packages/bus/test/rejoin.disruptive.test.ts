/**
 * After Kafka comes back (restarted, or crashed with `kill -9`), a consumer group consumes again
 * within 5 s of its coordinator having loaded it, with the production session timeout (30 s): the consumer whose connection died
 * starts again under a new member id and removes its old member itself, so the coordinator does
 * not wait out that member's session. It restarts this checkout's Kafka (deploy/infra.sh): only
 * against infrastructure nothing else is using, so scripts/test.sh runs it alone, with the other
 * *.disruptive.test.js files.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { createKafkaNamespace, infraComponent } from '@herald/testkit';

import { createKafkaBus, type Bus } from '../src/index.js';
import { brokers, kafka, testLogger } from './helpers.js';

const SESSION_TIMEOUT_MS = 30_000;
const BAR_MS = 5_000;
const TOPIC = 'herald.audience.events';

const buses: Bus[] = [];

for (const how of ['restart', 'crash'] as const) {
  test(`Kafka ${how}: the group consumes again within ${BAR_MS / 1_000} s of its coordinator being back, its session being ${SESSION_TIMEOUT_MS / 1_000} s`, { timeout: 240_000 }, async () => {
    const namespace = await createKafkaNamespace();
    try {
      const newBus = (name: string): Bus => {
        const bus = createKafkaBus({ brokers: brokers(), clientId: `rejoin-${name}`, logger: testLogger, topicPrefix: namespace.prefix, sessionTimeoutMs: SESSION_TIMEOUT_MS });
        buses.push(bus);
        return bus;
      };
      // The latest publication time each message carries, as consumed.
      let consumedUpTo = 0;
      const consumer = newBus('consumer');
      await consumer.subscribe({
        consumer: { group: 'rejoin', topics: [{ name: TOPIC, deadLetter: `${TOPIC}.dlq` }] },
        handle: async (message) => {
          consumedUpTo = Math.max(consumedUpTo, Number(message.value.toString()));
        },
      });
      // A message every 100 ms, whatever Kafka's state (a publish that fails is not retried).
      const producer = newBus('producer');
      let publishing = true;
      const published = (async () => {
        while (publishing) {
          const at = Date.now();
          await Promise.race([
            producer.publish([{ topic: TOPIC, key: String(at % 4), value: Buffer.from(String(at)) }]),
            new Promise((resolve) => setTimeout(resolve, 2_000)),
          ]).catch(() => undefined);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      })();
      try {
        const calm = Date.now();
        while (consumedUpTo < calm) await new Promise((resolve) => setTimeout(resolve, 50));
        const before = await infraComponent('pid', 'kafka');
        await infraComponent(how === 'crash' ? 'crash' : 'stop', 'kafka');
        await infraComponent('start', 'kafka');
        assert.notEqual(await infraComponent('pid', 'kafka'), before);
        // Back for this group once its coordinator has loaded it (a broker just started loads every
        // group's metadata, partition after partition: seconds on a busy machine, which no client can shorten).
        for (;;) {
          const admin = kafka.admin();
          const described = await admin
            .connect()
            .then(() => admin.describeGroups([`${namespace.prefix}rejoin`]))
            .catch(() => undefined)
            .finally(() => admin.disconnect().catch(() => undefined));
          if (described) break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        const back = Date.now();
        // Consuming again: a message published after that, handled.
        while (consumedUpTo <= back && Date.now() - back < 60_000) await new Promise((resolve) => setTimeout(resolve, 50));
        const tookMs = Date.now() - back;
        assert.ok(consumedUpTo > back, 'not consuming again within 60 s');
        assert.ok(tookMs <= BAR_MS, `consuming again ${tookMs} ms after the coordinator had the group back`);
      } finally {
        publishing = false;
        await published;
      }
    } finally {
      await Promise.all(buses.splice(0).map((bus) => bus.close().catch(() => undefined)));
      await namespace.remove();
    }
  });
}
