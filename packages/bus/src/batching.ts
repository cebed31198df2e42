import type { Bus, OutgoingMessage } from './kafka.js';

/**
 * A publisher for callers that each have one message and must know it was acknowledged (the
 * gateway's engagement endpoint answers a browser only then). The producer sends one batch at a
 * time (idempotent, one request in flight); messages that arrive meanwhile wait and go together in
 * the next batch, so throughput grows with load instead of being one round trip per message.
 * A failed batch fails every caller in it; each caller decides what to answer.
 */
export function batchingPublisher(bus: Bus, maxBatch = 1_000): (message: OutgoingMessage) => Promise<void> {
  const waiting: Array<{ message: OutgoingMessage; settle: (err?: unknown) => void }> = [];
  let sending = false;

  const drain = async (): Promise<void> => {
    sending = true;
    while (waiting.length > 0) {
      const batch = waiting.splice(0, maxBatch);
      try {
        await bus.publish(batch.map((entry) => entry.message));
        for (const entry of batch) entry.settle();
      } catch (err) {
        for (const entry of batch) entry.settle(err);
      }
    }
    sending = false;
  };

  return (message) =>
    new Promise<void>((resolve, reject) => {
      waiting.push({ message, settle: (err) => (err === undefined ? resolve() : reject(err)) });
      if (!sending) void drain();
    });
}
