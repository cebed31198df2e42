import assert from 'node:assert/strict';
import { test } from 'node:test';

import { batchingPublisher, type Bus, type OutgoingMessage } from '../src/index.js';

// The batching publisher's own rules, on a Bus whose publish the test settles by hand (what Kafka
// does with a batch is the bus's business, tested against the real broker in outbox.test.ts).

function handBus() {
  const batches: Array<{ messages: OutgoingMessage[]; settle: (err?: Error) => void }> = [];
  const bus: Bus = {
    publish: (messages) => new Promise<void>((resolve, reject) => batches.push({ messages, settle: (err) => (err ? reject(err) : resolve()) })),
    subscribe: () => Promise.reject(new Error('not used')),
    close: () => Promise.resolve(),
  };
  return { bus, batches };
}

const message = (key: string): OutgoingMessage => ({ topic: 't', key, value: Buffer.from(key) });
const turn = () => new Promise((resolve) => setImmediate(resolve));

test('messages that arrive while a batch is out go together in the next; each caller learns its own batch outcome', async () => {
  const { bus, batches } = handBus();
  const publish = batchingPublisher(bus);
  const first = publish(message('a'));
  await turn();
  const queued = [publish(message('b')), publish(message('c')), publish(message('d'))];
  assert.deepEqual(batches.map((batch) => batch.messages.map((m) => m.key)), [['a']]);
  batches[0]?.settle();
  await first;
  await turn();
  assert.deepEqual(batches.map((batch) => batch.messages.map((m) => m.key)), [['a'], ['b', 'c', 'd']]);
  batches[1]?.settle(new Error('broker gone'));
  for (const result of await Promise.allSettled(queued)) assert.deepEqual(result.status === 'rejected' && (result.reason as Error).message, 'broker gone');
  // The next message starts a new batch.
  const later = publish(message('e'));
  await turn();
  batches[2]?.settle();
  await later;
});

test('at most maxWaiting messages wait; beyond that a caller is refused at once', async () => {
  const { bus, batches } = handBus();
  const publish = batchingPublisher(bus, 1_000, 2);
  const out = publish(message('a'));
  await turn();
  const waiting = [publish(message('b')), publish(message('c'))];
  await assert.rejects(publish(message('d')), /2 messages already wait for Kafka/);
  batches[0]?.settle();
  await out;
  await turn();
  batches[1]?.settle();
  await Promise.all(waiting);
});
